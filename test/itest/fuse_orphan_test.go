package itest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestFuseCloseCrossingARemoveLeavesNoOrphan: the kernel sends a release
// asynchronously after close(2), so it can reach the mount daemon while an
// unlink or rmdir of the same file is in flight (`rm -rf` closes a
// directory and removes it at once). The MDT keeps the removed object as
// an orphan because the file was open when the request left; the mount
// must then release it, or it stays on the MDT for good (the checker saw
// such directories as nlink inconsistencies after ordinary `rm -rf`).
// The fault point fuse.remove.inflight holds every unlink, rmdir and
// rename in flight so that the close crosses it each time.
//
// It also checks that the checker does not take a directory removed while
// open for an inconsistency: such a directory has no name and no links
// until its last close.
func TestFuseCloseCrossingARemoveLeavesNoOrphan(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	t.Setenv("NACRE_FAULTS", "fuse.remove.inflight=delay:400ms")
	m := mountFuse(t, cl)
	base := lfsckRun(t, cl, "-t", "namespace", "-n").Components["namespace"].Stats["objects"]

	// A directory removed while open: kept until closed, and clean.
	if err := os.Mkdir(m.Path("open"), 0o755); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(m.Path("open"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.Path("open")); err != nil {
		t.Fatal(err)
	}
	r := lfsckRun(t, cl, "-t", "namespace", "-n")
	if ns := r.Components["namespace"]; ns.Inconsistent != 0 {
		t.Errorf("a directory removed while open is reported as inconsistent: %+v", ns.Counters)
	}
	held.Close()

	for _, kind := range []string{"dir", "file"} {
		p := m.Path(kind)
		var err error
		if kind == "dir" {
			err = os.Mkdir(p, 0o755)
		} else {
			err = os.WriteFile(p, []byte("x"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- os.Remove(p) }()
		time.Sleep(150 * time.Millisecond) // the remove is in flight
		f.Close()
		if err := <-done; err != nil {
			t.Fatalf("remove %s: %v", kind, err)
		}
	}

	// Releases are asynchronous: wait for them, counting.
	wait.NoErr(t, 10*time.Second, "the MDT to hold as many objects as before (no orphans left)", func() error {
		ns := lfsckRun(t, cl, "-t", "namespace", "-n").Components["namespace"]
		if got := ns.Stats["objects"]; got != base || ns.Inconsistent != 0 {
			return fmt.Errorf("it holds %d, not %d; inconsistent %d %+v", got, base, ns.Inconsistent, ns.Counters)
		}
		return nil
	})
}
