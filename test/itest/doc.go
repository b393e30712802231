// Package itest holds Nacre's integration tests: real server processes on
// loopback (test/testcluster), driven through the client library and
// the nacre binary. They form the integration tier: `go test -short`
// (the fast tier) skips them. Set NACRE_ITEST_LONG=1 for the longer
// variants.
package itest
