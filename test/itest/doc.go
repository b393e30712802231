// Package itest holds Nacre's integration tests: real server processes on
// loopback (test/testcluster), driven through the client library and
// the nacre binary. Set NACRE_ITEST_LONG=1 for the longer variants.
package itest
