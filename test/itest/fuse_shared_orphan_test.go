package itest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/fid"
	"nacre/test/testcluster"
	"nacre/test/wait"
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
	wait.NoErr(t, 30*time.Second, "the closed files to be destroyed (no orphans left)", func() error {
		ns := lfsckRun(t, cl, "-t", "namespace", "-n").Components["namespace"]
		if got := ns.Stats["objects"]; got != base || ns.Inconsistent != 0 {
			return fmt.Errorf("the MDT holds %d objects, not %d as before; inconsistent %d", got, base, ns.Inconsistent)
		}
		return nil
	})
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
	wait.NoErr(t, 20*time.Second, "a remove through the other mount after the failover", func() error {
		return os.Remove(b.Path("f"))
	})
	time.Sleep(time.Second) // longer than a release takes
	got := make([]byte, len(data))
	if n, err := held.ReadAt(got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("after a failover and a removal through another mount, the open file reads %d bytes (%v)", n, err)
	}
}

// TestFuseCreateOfAnExistingFileCrossingItsCloseKeepsTheOpen: a mount
// closes a file (its close goes to the MDS in a later batch) and, while
// that batch is on its way, opens the same file again through a name it
// believed missing (a cached negative entry: O_CREAT becomes the MDS's
// create of an existing file, which records the open itself). The MDS
// hears the open and then the close; before, it counted the file as
// closed here, and a removal through another mount destroyed a file
// still open. Now the mount says the open again once the close is
// through.
func TestFuseCreateOfAnExistingFileCrossingItsCloseKeepsTheOpen(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	// Only the mounts: the close batch waits 4 s before it is sent.
	t.Setenv("NACRE_FAULTS", "fuse.closes.send=delay:4s*1")
	a := mountFuse(t, cl, "negative_timeout=60")
	b := mountFuse(t, cl)
	data := bytes.Repeat([]byte("open again while its close travels\n"), 1024)
	if err := os.WriteFile(a.Path("f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	// a caches "g" as missing; b then makes it a second name of f.
	if _, err := os.Stat(a.Path("g")); !os.IsNotExist(err) {
		t.Fatalf("stat of a missing name: %v", err)
	}
	if err := os.Link(b.Path("f"), b.Path("g")); err != nil {
		t.Fatal(err)
	}
	// The close is queued for 5 s, the batches are looked at each second,
	// and the one holding f waits 4 s before it goes: at 6.5 s it is on
	// its way.
	time.Sleep(time.Until(closed.Add(6500 * time.Millisecond)))
	held, err := os.OpenFile(a.Path("g"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	var st, fst syscall.Stat_t
	if err := syscall.Fstat(int(held.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(b.Path("f"), &fst); err != nil || fst.Ino != st.Ino {
		t.Fatalf("the open of g is not of f (inode %d, f's %d: %v): the test did not open the existing file", st.Ino, fst.Ino, err)
	}
	// Past the batch's arrival, remove both names through b.
	time.Sleep(time.Until(closed.Add(11 * time.Second)))
	for _, n := range []string{"f", "g"} {
		if err := os.Remove(b.Path(n)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // longer than a release takes
	got := make([]byte, len(data))
	if n, err := held.ReadAt(got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("a file opened again while its close was on its way, then removed through another mount, reads %d bytes (%v), want its %d", n, err, len(data))
	}
}

// TestFuseOpenCrossingTheLastReleaseKeepsTheOpen: an open of a file that
// finds it open on this mount tells the MDS nothing, and the last close
// of the other handle can cross it (the kernel sends releases
// asynchronously): that close was queued for the MDS, and went 5 s later
// with the file open again, so a removal through another mount then
// destroyed a file open here (TestReplicaOpenFilesSurviveFailover failed
// that way, its open coming just after a write's close). Now a queued
// close of a file open again is dropped.
func TestFuseOpenCrossingTheLastReleaseKeepsTheOpen(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	// Only the mounts: the open of f waits 2 s once it found f open.
	t.Setenv("NACRE_FAULTS", "fuse.open.registered=delay:2s*1")
	a := mountFuse(t, cl)
	b := mountFuse(t, cl)
	data := bytes.Repeat([]byte("open across the last release\n"), 1024)
	w, err := os.Create(a.Path("f")) // a create: no open hits the point
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	type opened struct {
		f   *os.File
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		f, err := os.Open(a.Path("f"))
		ch <- opened{f, err}
	}()
	// While the open waits at the point (2 s), the writer's last close.
	time.Sleep(500 * time.Millisecond)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	o := <-ch
	if o.err != nil {
		t.Fatal(o.err)
	}
	held := o.f
	defer held.Close()
	// Past the close batch (5 s, looked at each second), remove f
	// through b.
	time.Sleep(7 * time.Second)
	if err := os.Remove(b.Path("f")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // longer than a release takes
	got := make([]byte, len(data))
	if n, err := held.ReadAt(got, 0); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("a file opened as its other handle closed, then removed through another mount, reads %d bytes (%v), want its %d", n, err, len(data))
	}
}

// TestFuseDirectoryRemovedWhileInUse: a directory that is a shell's
// working directory or open on a descriptor, removed through the same or
// another mount, behaves as on a local file system: stat gives it no
// links, listing it gives nothing (ls exits 0, says nothing on stderr),
// and nothing can be made in it. Before, stat gave ENOENT (removed
// through another mount) or the link count it had (through this mount),
// and ls failed.
func TestFuseDirectoryRemovedWhileInUse(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	a := mountFuse(t, cl)
	b := mountFuse(t, cl)
	for _, through := range []*fuseMount{a, b} {
		where := "this mount"
		if through == b {
			where = "another mount"
		}
		t.Run(where, func(t *testing.T) {
			name := "wd-" + strings.ReplaceAll(where, " ", "-")
			if err := os.Mkdir(a.Path(name), 0o755); err != nil {
				t.Fatal(err)
			}
			fd, err := os.Open(a.Path(name))
			if err != nil {
				t.Fatal(err)
			}
			defer fd.Close()
			// A shell whose working directory it is, waiting for a line
			// once it has started (its start-up reads the working
			// directory, which fails once it is gone, as on ext4).
			sh := exec.Command("sh", "-c", `echo ready; read x; ls -la .; echo "ls=$?"; stat -c 'links=%h' .; mkdir sub 2>/dev/null; echo "mkdir=$?"`)
			sh.Dir = a.Path(name)
			in, err := sh.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			outPipe, err := sh.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			sh.Stderr = &stderr
			if err := sh.Start(); err != nil {
				t.Fatal(err)
			}
			defer sh.Process.Kill()
			shOut := bufio.NewReader(outPipe)
			if line, err := shOut.ReadString('\n'); line != "ready\n" {
				t.Fatalf("the shell did not start: %q, %v (%s)", line, err, stderr.String())
			}
			if err := os.Remove(through.Path(name)); err != nil {
				t.Fatal(err)
			}
			if through == b {
				time.Sleep(1500 * time.Millisecond) // past a's attribute timeout
			}
			var st syscall.Stat_t
			if err := syscall.Fstat(int(fd.Fd()), &st); err != nil || st.Nlink != 0 || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				t.Errorf("fstat of the open directory removed through %s: links %d, mode %o (%v); want a directory with 0 links", where, st.Nlink, st.Mode, err)
			}
			// Nothing, or ENOENT: the kernel refuses to list a directory
			// removed on this machine (it marks it dead), as on ext4.
			if names, err := fd.Readdirnames(-1); len(names) != 0 || (err != nil && !errors.Is(err, syscall.ENOENT)) {
				t.Errorf("listing the open directory removed through %s: %q (%v), want nothing", where, names, err)
			}
			in.Write([]byte("go\n"))
			in.Close()
			rest, _ := io.ReadAll(shOut)
			if err := sh.Wait(); err != nil {
				t.Fatalf("shell: %v\n%s%s", err, rest, stderr.String())
			}
			out := string(rest)
			for _, want := range []string{"ls=0", "links=0", "mkdir=1"} {
				if !strings.Contains(out, want) {
					t.Errorf("in a working directory removed through %s: want %q in\n%s", where, want, out)
				}
			}
			if stderr.Len() != 0 {
				t.Errorf("in a working directory removed through %s, the commands complained:\n%s", where, stderr.String())
			}
		})
	}
}

// TestFuseSpaceOfAFileRemovedElsewhereIsFreedAtOnce: a file written and
// closed through a mount, whose close the mount still batches (the MDS
// counts it open there), and removed through another client, is
// destroyed at once: the MDS asks the mount for its close
// (SessionDown.ask_close) instead of keeping the file until the batch
// goes 5 s later.
func TestFuseSpaceOfAFileRemovedElsewhereIsFreedAtOnce(t *testing.T) {
	// A new leader keeps every removed file for the grace: past it here.
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1, Env: []string{"NACRE_OPEN_GRACE=1s"}})
	a := mountFuse(t, cl)
	url := targetOf(t, cl, "ost").MetricsURL
	destroys := func() float64 {
		return scrapeFamilies(t, url).sum("nacre_ost_ops_total", map[string]string{"op": "destroy"})
	}
	if err := os.WriteFile(a.Path("big"), make([]byte, 4<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	d0 := destroys()
	c := cl.Client(t)
	start := time.Now()
	if _, err := c.Remove(context.Background(), fid.Root, "big", false); err != nil {
		t.Fatal(err)
	}
	// The batch would tell the close 5 s after it; the destroy follows
	// within half a second of the close.
	wait.For(t, 3*time.Second, "the removed file's object to be destroyed", func() bool { return destroys() > d0 })
	t.Logf("destroyed %s after the removal", time.Since(start).Round(10*time.Millisecond))
	// Open here, a removed file stays readable (an open-unlinked file).
	f, err := os.Create(a.Path("kept"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("still here")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Remove(context.Background(), fid.Root, "kept", false); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	buf := make([]byte, 10)
	if n, err := f.ReadAt(buf, 0); err != nil || string(buf[:n]) != "still here" {
		t.Fatalf("read of a file open here after another client removed it: %q, %v", buf[:n], err)
	}
}
