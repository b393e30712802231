package itest

import (
	"context"
	"os"
	"sort"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"

	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// notLinux are the cases of go-fuse's posixtest suite that assert what a
// local Linux file system does not do, with what Nacre does instead (and
// the test that checks it against a local directory).
var notLinux = map[string]string{
	// Two descriptors of one process locking one range: the suite wants
	// EAGAIN (OFD semantics); on Linux, as on Lustre, POSIX locks belong
	// to the process and the second lock succeeds.
	"FcntlFlockLocksFile": "TestFusePosixLocksBelongToTheProcess",
}

// TestFusePosixSuite runs every case of go-fuse's posixtest suite against
// a Nacre mount, each in a fresh directory, but those in notLinux.
func TestFusePosixSuite(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	for name := range notLinux {
		if posixtest.All[name] == nil {
			t.Errorf("notLinux names %s, which the suite no longer has", name)
		}
	}
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		if notLinux[name] == "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			dir := m.Path("posix-" + name)
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			posixtest.All[name](t, dir)
		})
	}
}

// TestFusePosixSuiteOnTwoMDTs runs the suite on a cluster of two MDTs,
// every other case in a directory made on MDT1 (a remote directory of
// the root, on MDT0): through the mount, a remote directory behaves as
// any other.
func TestFusePosixSuiteOnTwoMDTs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of two MDTs")
	}
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{MDTs: 2, OSTs: 1})
	c := cl.Client(t)
	m := mountFuse(t, cl)
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		if notLinux[name] == "" {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			on := uint32(i % 2)
			if _, _, err := c.Create(context.Background(), fid.Root, "posix-"+name, syscall.S_IFDIR|0o755, client.CreateOpts{Exclusive: true, MDT: &on}); err != nil {
				t.Fatal(err)
			}
			posixtest.All[name](t, m.Path("posix-"+name))
		})
	}
}
