package itest

import (
	"bytes"
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"nacre/internal/fid"
	"nacre/internal/testcluster"
)

// TestFuseFileRemovedThroughAnotherClientStaysOpen: a file open on one
// mount and removed through another mount (unlink) or replaced by a
// rename there stays readable and writable where it is open, as POSIX
// says and Lustre does; once it is closed it is destroyed, and the
// namespace is clean. Before, the MDT destroyed it at once and the
// reader got errors.
func TestFuseFileRemovedThroughAnotherClientStaysOpen(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	a := mountFuse(t, cl)
	b := mountFuse(t, cl)
	base := lfsckRun(t, cl, "-t", "namespace", "-n").Components["namespace"].Stats["objects"]
	data := bytes.Repeat([]byte("kept while open\n"), 4096)
	for _, how := range []string{"unlink", "rename"} {
		name := "f-" + how
		if err := os.WriteFile(a.Path(name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		held, err := os.OpenFile(a.Path(name), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		switch how {
		case "unlink":
			err = os.Remove(b.Path(name))
		case "rename":
			if err = os.WriteFile(b.Path("new"), []byte("the new file\n"), 0o644); err == nil {
				err = os.Rename(b.Path("new"), b.Path(name))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(data))
		if n, err := held.ReadAt(got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
			t.Fatalf("%s through another mount: the open file reads %d bytes (%v), want its %d", how, n, err, len(data))
		}
		if _, err := held.WriteAt([]byte("still writable"), 0); err != nil {
			t.Fatalf("%s through another mount: write to the open file: %v", how, err)
		}
		if err := held.Sync(); err != nil {
			t.Fatalf("%s: fsync: %v", how, err)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(int(held.Fd()), &st); err != nil || st.Size != int64(len(data)) {
			t.Fatalf("%s: fstat of the open file: size %d (%v)", how, st.Size, err)
		}
		// The checker counts the kept file as referenced, not as an
		// inconsistency.
		if ns := lfsckRun(t, cl, "-t", "namespace", "-n").Components["namespace"]; ns.Inconsistent != 0 {
			t.Errorf("%s: a removed file still open is reported as inconsistent: %+v", how, ns.Counters)
		}
		held.Close()
	}
	if err := os.Remove(a.Path("f-rename")); err != nil {
		t.Fatal(err)
	}
	// Closed: destroyed (releases are asynchronous; a new leader waits a
	// little before destroying them).
	deadline := time.Now().Add(30 * time.Second)
	for {
		ns := lfsckRun(t, cl, "-t", "namespace", "-n").Components["namespace"]
		if got := ns.Stats["objects"]; got == base && ns.Inconsistent == 0 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("30 s after the files were closed the MDT holds %d objects, not %d as before (orphans left); inconsistent %d",
				got, base, ns.Inconsistent)
		}
		time.Sleep(300 * time.Millisecond)
	}
	// A file held open by the descriptor that created it (the create
	// recorded the open) and removed through the other mount.
	created, err := os.Create(a.Path("created"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(b.Path("created")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // longer than a release takes
	if _, err := created.WriteAt(data, 0); err != nil {
		t.Fatalf("write to a created file removed through another mount: %v", err)
	}
	got := make([]byte, len(data))
	if n, err := created.ReadAt(got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("a created file removed through another mount reads back %d bytes (%v), not what was written", n, err)
	}
	created.Close()

	// A file removed through the client library (no mount, no opens of
	// its own) while open on a mount is kept too.
	if err := os.WriteFile(a.Path("g"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(a.Path("g"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	c := cl.Client(t)
	if _, err := c.Unlink(context.Background(), fid.Root, "g"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // longer than a release takes
	got = make([]byte, len(data))
	if n, err := held.ReadAt(got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("removed through the library: the open file reads %d bytes (%v)", n, err)
	}
}

// TestReplicaOpenFilesSurviveFailover: a file open on one mount of a
// three-replica cluster is removed through another mount after the MDT's
// leader was killed and the new leader's grace ended: the new leader knows
// the file is open from the mount's new session, and keeps it.
func TestReplicaOpenFilesSurviveFailover(t *testing.T) {
	needFUSE(t)
	cl := startReplicated(t, "NACRE_OPEN_GRACE=2s")
	a := mountFuse(t, cl)
	b := mountFuse(t, cl)
	data := bytes.Repeat([]byte("open across a failover\n"), 2048)
	if err := os.WriteFile(a.Path("f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	held, err := os.Open(a.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	leader := waitLeader(t, cl, "mdt0")
	cl.Kill(leader, syscall.SIGKILL)
	waitLeader(t, cl, "mdt0", leader)
	// Past the new leader's grace: only the sessions' lists count now.
	time.Sleep(4 * time.Second)
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := os.Remove(b.Path("f"))
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("remove through the other mount after the failover: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second) // longer than a release takes
	got := make([]byte, len(data))
	if n, err := held.ReadAt(got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("after a failover and a removal through another mount, the open file reads %d bytes (%v)", n, err)
	}
}
