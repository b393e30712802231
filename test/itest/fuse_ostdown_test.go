package itest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestFuseIOToADownOSTFailsWithEIO: through the mount, I/O to a file with
// a stripe on an OST that stays down fails with EIO (not the dial's
// "connection refused", which an application would report as if the file
// had said it), after the mount's wait for the OST, and then at once
// until the OST answers; the mount's log names the OST. Once the OST is
// back, the file reads whole.
func TestFuseIOToADownOSTFailsWithEIO(t *testing.T) {
	needFUSE(t)
	t.Setenv("NACRE_OST_DOWN_AFTER", "2s")
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	p := m.Path("wide")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(p, "nacre.lov", []byte("stripe_count=2 stripe_size=64K"), 0); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: both stripes
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cl.Kill("ost1", syscall.SIGKILL)
	read := func() (time.Duration, error) {
		// A fresh open: the kernel's pages of the file are not used.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECT, 0)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		buf := make([]byte, 128<<10)
		start := time.Now()
		_, err = f.ReadAt(buf, 0)
		return time.Since(start), err
	}
	took, err := read()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read with OST0001 down: %v after %v, want EIO", err, took)
	}
	if took > 20*time.Second {
		t.Fatalf("read with OST0001 down failed only after %v (the mount waits 2 s here)", took)
	}
	took, err = read()
	if !errors.Is(err, syscall.EIO) || took > 5*time.Second {
		t.Fatalf("second read with OST0001 down: %v after %v, want EIO at once", err, took)
	}
	log, _ := os.ReadFile(m.Log)
	if !strings.Contains(string(log), "OST unreachable") || !strings.Contains(string(log), "OST0001") {
		t.Fatalf("the mount's log does not name the unreachable OST:\n%s", log)
	}
	cl.Restart()
	waitReadsBack(t, p, data, "after OST0001 came back")
	// Reads of 1 MiB (max_read) once made go-fuse log a failed splice
	// each; the mount does not splice.
	if log, _ := os.ReadFile(m.Log); strings.Contains(string(log), "trySplice") {
		t.Fatalf("the mount's log has splice failures:\n%s", log)
	}
}

// TestWithAnOSTDownTheToolsSayWhatTheyDoNotKnow: a file open for writing
// (its size is the OSTs' to tell) on an OST that is down. Before, `nacre
// ls -l DIR` showed size 0 and exited 0, getstripe and path2fid (which
// need only metadata) failed waiting for the OST, and df on the mount
// counted the dead OST's last figures.
func TestWithAnOSTDownTheToolsSayWhatTheyDoNotKnow(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	// The mount holds the written file: it gives up on the down OST
	// after 3 s instead of 30 (the MDS asks it to flush for others).
	t.Setenv("NACRE_OST_DOWN_AFTER", "3s")
	m := mountFuse(t, cl)
	if out, err := cl.Run("mkdir", "/d"); err != nil {
		t.Fatalf("mkdir: %v\n%s", err, out)
	}
	if out, err := cl.Run("setstripe", "-c", "1", "-i", "0", "/d"); err != nil {
		t.Fatalf("setstripe: %v\n%s", err, out)
	}
	f, err := os.Create(m.Path("d/open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(bytes.Repeat([]byte("x"), 1<<20)); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	var before unix.Statfs_t
	if err := unix.Statfs(m.Dir, &before); err != nil {
		t.Fatal(err)
	}
	cl.Kill("ost0", syscall.SIGKILL)

	out, err := cl.Run("ls", "-l", "/d")
	if err == nil || !strings.Contains(out, "size unknown") || !strings.Contains(out, "            ? ") {
		t.Errorf("ls -l of a directory holding a file on the down OST: want ? for its size, a message and exit 1; got %v\n%s", err, out)
	}
	for _, args := range [][]string{{"getstripe", "/d/open"}, {"path2fid", "/d/open"}} {
		if out, err := cl.Run(args...); err != nil {
			t.Errorf("nacre %s with the file's OST down: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Once the MGS has missed the OST's heartbeats, df leaves it out.
	wait.NoErr(t, 20*time.Second, "df on the mount to leave the down OST out", func() error {
		var st unix.Statfs_t
		if err := unix.Statfs(m.Dir, &st); err != nil {
			t.Fatalf("df on the mount with an OST down: %v", err)
		}
		if st.Blocks*uint64(st.Bsize) >= before.Blocks*uint64(before.Bsize)*3/4 {
			return fmt.Errorf("%d blocks, %d before", st.Blocks, before.Blocks)
		}
		return nil
	})
}

// TestFuseWriteErrorReachesEveryDescriptor: writes acknowledged by the
// mount (written behind) fail because their OST is down; a close of a
// duplicate descriptor (a forked child's copy) reports EIO, and so do the
// original's fsync and close. Before, the child's close took the error
// and the parent's fsync returned 0 for data that was never written.
func TestFuseWriteErrorReachesEveryDescriptor(t *testing.T) {
	cl, m := oneOSTMount(t)
	f, err := os.Create(m.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cl.Kill("ost0", syscall.SIGKILL)
	if _, err := f.Write(bytes.Repeat([]byte("x"), 256<<10)); err != nil {
		t.Fatalf("write (behind, acknowledged at once): %v", err)
	}
	dup, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Close(dup); !errors.Is(err, syscall.EIO) {
		t.Fatalf("close of a duplicate descriptor: %v, want EIO", err)
	}
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync after the duplicate's close reported the error: %v, want EIO again", err)
	}
	// Once the OST is back the file works again: for handles opened
	// since, for one only reading, and for the first one once its fsync
	// has reported the failure. Before, a failure kept for fsync made
	// every write and close of the file fail, on every handle of the
	// mount, until somebody called fsync.
	cl.Restart()
	if err := f.Sync(); err != nil {
		t.Fatalf("a second fsync, with the OST back: %v", err)
	}
	if err := os.WriteFile(m.Path("f"), []byte("again"), 0o644); err != nil {
		t.Fatalf("a new open, write and close with the OST back: %v", err)
	}
	if got, err := os.ReadFile(m.Path("f")); err != nil || string(got) != "again" {
		t.Fatalf("read back: %q, %v", got, err)
	}
	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("a write through the first handle after its fsync reported: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close of the first handle: %v", err)
	}
}

// TestFuseWriteErrorSparesHandlesOpenedLater: a write behind fails while
// another handle of the file stays open (holding the failure for it); a
// handle opened after it, or one only reading, is not failed with it.
func TestFuseWriteErrorSparesHandlesOpenedLater(t *testing.T) {
	cl, m := oneOSTMount(t)
	holder, err := os.OpenFile(m.Path("f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	cl.Kill("ost0", syscall.SIGKILL)
	w, err := os.OpenFile(m.Path("f"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(bytes.Repeat([]byte("y"), 64<<10))
	if err := w.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("close with the OST down: %v, want EIO", err)
	}
	cl.Restart()
	for i := 0; i < 2; i++ {
		if err := os.WriteFile(m.Path("f"), []byte("z"), 0o644); err != nil {
			t.Fatalf("round %d: open, write and close with the OST back: %v", i, err)
		}
	}
	r, err := os.Open(m.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("close of a handle only reading: %v", err)
	}
	if err := holder.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync of the handle open when the write failed: %v, want EIO (Linux reports it to every description open then)", err)
	}
}

// TestFuseReadOnlyCloseDuringAnOutage: with the file's OST down, the close
// of a handle only reading succeeds and does not fail the file's writer:
// nothing was lost. Before, it returned EIO (it re-ran the writer's close,
// whose size check could not reach the OST) and recorded that as a failed
// write, so the writer's next write failed once the OST was back and left
// the file short.
func TestFuseReadOnlyCloseDuringAnOutage(t *testing.T) {
	cl, m := oneOSTMount(t)
	a, err := os.OpenFile(m.Path("f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := a.Write(bytes.Repeat([]byte("a"), 4096)); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	r, err := os.Open(m.Path("f"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Read(make([]byte, 100)); err != nil {
		t.Fatal(err)
	}
	cl.Kill("ost0", syscall.SIGKILL)
	if err := r.Close(); err != nil {
		t.Fatalf("close of a handle only reading, with the OST down: %v", err)
	}
	cl.Restart()
	if _, err := a.WriteAt(bytes.Repeat([]byte("b"), 4096), 4096); err != nil {
		t.Fatalf("the writer's next write, with the OST back: %v", err)
	}
	if err := a.Sync(); err != nil {
		t.Fatalf("the writer's fsync: %v", err)
	}
	if st, err := os.Stat(m.Path("f")); err != nil || st.Size() != 8192 {
		t.Fatalf("size %v (%v), want 8192", st.Size(), err)
	}
}

// TestFuseFailedAppendLeavesNoHole: an append fails because its OST is
// down; once the OST is back, the next append goes where the file really
// ends, as on a local disk. Before, the mount had already counted the
// failed append's bytes in the file's end and left a hole of zeros.
func TestFuseFailedAppendLeavesNoHole(t *testing.T) {
	cl, m := oneOSTMount(t)
	f, err := os.OpenFile(m.Path("log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	first := bytes.Repeat([]byte("a"), 4096)
	if _, err := f.Write(first); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	cl.Kill("ost0", syscall.SIGKILL)
	f.Write(bytes.Repeat([]byte("b"), 4096)) // acknowledged or not: it is lost
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("fsync with the OST down: %v, want EIO", err)
	}
	cl.Restart()
	if _, err := f.Write([]byte("after\n")); err != nil {
		t.Fatalf("append with the OST back: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	got, err := os.ReadFile(m.Path("log"))
	if err != nil {
		t.Fatal(err)
	}
	if want := append(first, "after\n"...); !bytes.Equal(got, want) {
		t.Fatalf("file is %d bytes (zeros at 4096: %v), want %d: the failed append left a hole",
			len(got), len(got) > 4096 && got[4096] == 0, len(want))
	}
}

// TestFuseTruncateWithAnOSTDownChangesNothing: a truncate of a striped
// file with one of its OSTs down fails with EIO and leaves the file as it
// was. Before, the stripes on the OSTs that were up were cut: the file
// kept its size and read zeros where those stripes' data had been.
func TestFuseTruncateWithAnOSTDownChangesNothing(t *testing.T) {
	needFUSE(t)
	t.Setenv("NACRE_OST_DOWN_AFTER", "2s")
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	p := m.Path("wide")
	must := mustOf(t)
	must(os.WriteFile(p, nil, 0o644))
	must(syscall.Setxattr(p, "nacre.lov", []byte("stripe_count=2 stripe_size=64K"), 0))
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i/4096 + 1)
	}
	must(os.WriteFile(p, data, 0o644))
	cl.Kill("ost1", syscall.SIGKILL)
	if err := os.Truncate(p, 100<<10); !errors.Is(err, syscall.EIO) {
		t.Fatalf("truncate with OST0001 down: %v, want EIO", err)
	}
	cl.Restart()
	waitReadsBack(t, p, data, "after the failed truncate")
}

// waitReadsBack waits up to 30 s (an OST coming back) until the file at p
// reads as data.
func waitReadsBack(t *testing.T, p string, data []byte, when string) {
	t.Helper()
	wait.NoErr(t, 30*time.Second, when+": the file to read back whole", func() error {
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, data) {
			return fmt.Errorf("%d bytes, %d of them zeros (%v), want the file's %d", len(got), bytes.Count(got, []byte{0}), err, len(data))
		}
		return nil
	})
}
