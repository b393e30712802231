package itest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nacre/test/testcluster"
)

// Times and appends through the mount, as archivers, editors and loggers
// rely on them.

// TestFuseTimesFollowWrites: a time set after writing (tar x, cp -p) is
// kept by the close; a write moves ctime with mtime; a create moves its
// directory's times at once; a punched hole moves the file's times and
// is seen by another mount.
func TestFuseTimesFollowWrites(t *testing.T) {
	_, a, b := twoMounts(t)

	// Write 3 MB, set mtime to 2001, close: the old time stays.
	p := a.Path("archived")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("x"), 3<<20)); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	if err := unix.Futimes(int(f.Fd()), []unix.Timeval{unix.NsecToTimeval(old.UnixNano()), unix.NsecToTimeval(old.UnixNano())}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{p, b.Path("archived")} {
		if st := statOf(t, q); st.Mtim.Sec != old.Unix() || st.Size != 3<<20 {
			t.Errorf("%s: mtime %d size %d after write, futimes(2001), close; want mtime %d size %d", q, st.Mtim.Sec, st.Size, old.Unix(), 3<<20)
		}
	}
	// tar does the same for every file it extracts.
	if _, err := exec.LookPath("tar"); err == nil {
		src := t.TempDir()
		if err := os.WriteFile(src+"/t.txt", bytes.Repeat([]byte("t"), 1<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(src+"/t.txt", old, old); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("sh", "-c", "tar -C "+src+" -cf - t.txt | tar -C "+a.Path()+" -xf -").CombinedOutput()
		if err != nil {
			t.Fatalf("tar: %v\n%s", err, out)
		}
		if st := statOf(t, a.Path("t.txt")); st.Mtim.Sec != old.Unix() {
			t.Errorf("tar x kept mtime %d, want %d", st.Mtim.Sec, old.Unix())
		}
	}

	// A write moves ctime with mtime.
	q := a.Path("edited")
	if err := os.WriteFile(q, []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := statOf(t, q)
	time.Sleep(1100 * time.Millisecond) // the times after differ from those before, even in whole seconds
	g, err := os.OpenFile(q, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt([]byte("2"), 1); err != nil {
		t.Fatal(err)
	}
	g.Close()
	after := statOf(t, q)
	if after.Mtim == before.Mtim || after.Ctim.Nano() < after.Mtim.Nano() {
		t.Errorf("after a write: mtime %v -> %v, ctime %v -> %v; want both moved, ctime >= mtime", before.Mtim, after.Mtim, before.Ctim, after.Ctim)
	}

	// A create moves its directory's times at once.
	if err := os.Mkdir(a.Path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	d0 := statOf(t, a.Path("d"))
	time.Sleep(20 * time.Millisecond) // a time set now differs from the one read
	h, err := os.OpenFile(a.Path("d", "new"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	if d1 := statOf(t, a.Path("d")); d1.Mtim == d0.Mtim || d1.Ctim == d0.Ctim {
		t.Errorf("directory times unchanged right after a create in it: mtime %v ctime %v", d1.Mtim, d1.Ctim)
	}

	// A punched hole: times move, and the other mount reads zeros.
	r := a.Path("punched")
	if err := os.WriteFile(r, bytes.Repeat([]byte("X"), 100000), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(b.Path("punched")); err != nil || got[0] != 'X' {
		t.Fatalf("other mount before the punch: %v", err)
	}
	p0 := statOf(t, r)
	time.Sleep(1100 * time.Millisecond) // the times after differ from those before, even in whole seconds
	k, err := os.OpenFile(r, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(k.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 8192); err != nil {
		t.Fatal(err)
	}
	k.Close()
	if p1 := statOf(t, r); p1.Mtim == p0.Mtim || p1.Ctim == p0.Ctim || p1.Size != 100000 {
		t.Errorf("after punching a hole: mtime %v -> %v, ctime %v -> %v, size %d", p0.Mtim, p1.Mtim, p0.Ctim, p1.Ctim, p1.Size)
	}
	got, err := os.ReadFile(b.Path("punched"))
	if err != nil || len(got) != 100000 || !bytes.Equal(got[:8192], make([]byte, 8192)) || got[8192] != 'X' {
		t.Errorf("other mount after the punch: %d bytes, first bytes %q, %v; want zeros up to 8192, then X", len(got), got[:min(len(got), 8)], err)
	}
}

// TestFuseAppendsFromProcessesOfOneMount: processes that each open with
// O_APPEND, write one record and close, at the same time, lose none: the
// attributes a second opener gets include the first one's writes still
// in the mount's write-behind.
func TestFuseAppendsFromProcessesOfOneMount(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	p := m.Path("log")
	const procs, recs = 4, 300
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for w := 0; w < procs; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rec := []byte(strings.Repeat(string(rune('A'+w)), 99) + "\n")
			for i := 0; i < recs; i++ {
				fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT, 0o644)
				if err != nil {
					errs <- err
					return
				}
				if _, err := syscall.Write(fd, rec); err != nil {
					errs <- err
				}
				syscall.Close(fd)
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != procs*recs*100 {
		t.Fatalf("%d bytes after %d appends of 100 bytes", len(got), procs*recs)
	}
	for i := 0; i < len(got); i += 100 {
		r := got[i : i+100]
		if r[99] != '\n' || bytes.Count(r, r[:1]) != 99 {
			t.Fatalf("record %d is torn: %q", i/100, r)
		}
	}
}

// TestFuseTimesOutOfRangeAreClamped: times are kept in nanoseconds since
// 1970 in an int64 (years 1677 to 2262). A time set beyond that range is
// clamped to its edge, as ext4 clamps to its own range, rather than
// wrapping to a date at the other end.
func TestFuseTimesOutOfRangeAreClamped(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	p := m.Path("f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const year3000, year1000 = 32503680000, -30610224000
	ts := []unix.Timespec{{Sec: year1000}, {Sec: year3000, Nsec: 5}}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0); err != nil {
		t.Fatal(err)
	}
	st := statOf(t, p)
	if st.Mtim.Sec < 9223372036 || st.Atim.Sec > -9223372036 {
		t.Fatalf("atime %d s, mtime %d s after setting years 1000 and 3000; want the edges of the range (about -9223372036 and 9223372036)", st.Atim.Sec, st.Mtim.Sec)
	}
}
