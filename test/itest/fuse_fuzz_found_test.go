package itest

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nacre/test/testcluster"
)

// TestFuseListingKeepsTheSizeOfFilesBeingWritten: a listing (the kernel
// asks with readdirplus) while this mount's writes to an open file are
// still on their way to the OSTs gives the file its full size, as stat
// does; an older size would move SEEK_END back, and the next write would
// land over the data (found by differential testing against ext4).
func TestFuseListingKeepsTheSizeOfFilesBeingWritten(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	must := mustOf(t)
	must(os.Mkdir(m.Path("d"), 0o755))
	for round := range 5 {
		p := m.Path("d", "f")
		fd, err := syscall.Open(p, syscall.O_RDWR|syscall.O_CREAT|syscall.O_TRUNC, 0o644)
		must(err)
		data := bytes.Repeat([]byte{'x'}, 70000)
		if n, err := syscall.Write(fd, data); err != nil || n != len(data) {
			t.Fatalf("write: %d, %v", n, err)
		}
		f, err := os.Open(m.Path("d"))
		must(err)
		if _, err := f.Readdirnames(-1); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var st syscall.Stat_t
		must(syscall.Fstat(fd, &st))
		if st.Size != 70000 {
			t.Errorf("round %d: fstat after a listing: size %d, want 70000", round, st.Size)
		}
		end, err := syscall.Seek(fd, 0, io.SeekEnd)
		must(err)
		if end != 70000 {
			t.Errorf("round %d: SEEK_END after a listing: %d, want 70000", round, end)
		}
		if _, err := syscall.Write(fd, []byte("yyyyyyyyyy")); err != nil {
			t.Fatal(err)
		}
		must(syscall.Close(fd))
		got, err := os.ReadFile(p)
		must(err)
		if want := append(data, "yyyyyyyyyy"...); !bytes.Equal(got, want) {
			t.Fatalf("round %d: the file holds %d bytes (first 10 %q), want 70,000 x then 10 y", round, len(got), got[:min(10, len(got))])
		}
	}
}

// TestFuseDirectoryTimesDoNotMoveByThemselves: the times a mount shows
// for a directory it changed are the MDT's, so they stay the same when
// its cached attributes expire (they moved back by up to 160 ms: the
// mount had shown its own clock); and a RENAME_EXCHANGE gives both
// objects a new change time at once (the directory's showed its old one
// for a second).
func TestFuseDirectoryTimesDoNotMoveByThemselves(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	must := mustOf(t)
	must(os.Mkdir(m.Path("d"), 0o755))
	mtime := func(p string) (int64, int64) {
		t.Helper()
		var st syscall.Stat_t
		must(syscall.Lstat(p, &st))
		return st.Mtim.Nano(), st.Ctim.Nano()
	}
	for i := range 3 {
		must(os.WriteFile(m.Path("d", fmt.Sprint("f", i)), nil, 0o644))
		m0, c0 := mtime(m.Path("d"))
		time.Sleep(1200 * time.Millisecond) // past the attribute timeout
		if m1, c1 := mtime(m.Path("d")); m1 != m0 || c1 != c0 {
			t.Errorf("create %d: the directory's mtime moved by %v and ctime by %v once its attributes expired",
				i, time.Duration(m1-m0), time.Duration(c1-c0))
		}
	}
	must(os.Symlink("zz", m.Path("d", "ea")))
	must(os.Mkdir(m.Path("d", "ec"), 0o755))
	_, before := mtime(m.Path("d", "ec"))
	time.Sleep(20 * time.Millisecond) // a time set now differs from the one read
	must(unix.Renameat2(unix.AT_FDCWD, m.Path("d", "ea"), unix.AT_FDCWD, m.Path("d", "ec"), unix.RENAME_EXCHANGE))
	if _, after := mtime(m.Path("d", "ea")); after <= before {
		t.Errorf("the directory exchanged with a symlink kept its change time (%v before, %v after)", before, after)
	}
}

// TestFuseAttributesOfAnOpenFIFOAfterItsUnlink: fchmod, fchown and
// futimens of a FIFO still open after its last name went work, as on a
// local file system (they failed with ENOENT: a FIFO's opens never reach
// the mount, so the MDT destroyed it at the unlink).
func TestFuseAttributesOfAnOpenFIFOAfterItsUnlink(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	p := m.Path("fifo")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(p, syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Unlink(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fchmod(fd, 0o640); err != nil {
		t.Errorf("fchmod: %v", err)
	}
	if err := syscall.Fchown(fd, 12, 34); err != nil {
		t.Errorf("fchown: %v", err)
	}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), []unix.Timespec{{Sec: 5}, {Sec: 7}}, 0); err != nil {
		t.Errorf("utimensat: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode != syscall.S_IFIFO|0o640 || st.Uid != 12 || st.Gid != 34 || st.Mtim.Sec != 7 || st.Nlink != 0 {
		t.Errorf("fstat: mode %o uid %d gid %d mtime %d nlink %d, want 10640 12 34 7 0", st.Mode, st.Uid, st.Gid, st.Mtim.Sec, st.Nlink)
	}
}

// TestFuseFallocateMovesTheTimes: fallocate that allocates within the
// file, preallocates past its end with KEEP_SIZE, or punches a hole moves
// mtime and ctime, as on ext4.
func TestFuseFallocateMovesTheTimes(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	p := m.Path("f")
	if err := os.WriteFile(p, bytes.Repeat([]byte("x"), 100000), 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := syscall.Open(p, syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	for _, c := range []struct {
		name      string
		mode      uint32
		off, size int64
	}{
		{"allocate inside", 0, 0, 1},
		{"keep size past the end", unix.FALLOC_FL_KEEP_SIZE, 10, 200000},
		{"punch a hole", unix.FALLOC_FL_KEEP_SIZE | unix.FALLOC_FL_PUNCH_HOLE, 1, 65536},
	} {
		var before, after syscall.Stat_t
		if err := syscall.Fstat(fd, &before); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // a time set now differs from the one read
		if err := unix.Fallocate(fd, c.mode, c.off, c.size); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := syscall.Fstat(fd, &after); err != nil {
			t.Fatal(err)
		}
		if after.Mtim.Nano() <= before.Mtim.Nano() || after.Ctim.Nano() <= before.Ctim.Nano() || after.Size != 100000 {
			t.Errorf("%s: mtime %v -> %v, ctime %v -> %v, size %d", c.name, before.Mtim, after.Mtim, before.Ctim, after.Ctim, after.Size)
		}
	}
}

// TestFuseOpenAfterAnotherMountRemovedTheName: a name another mount just
// removed or renamed over, still in this mount's kernel cache for the
// entry timeout, opens what the name holds now: a new file with O_CREAT,
// the replacement after a rename over it. It opened the unnamed old file,
// kept for opens elsewhere: reads gave old data and writes were lost.
func TestFuseOpenAfterAnotherMountRemovedTheName(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	a, b := mountFuse(t, cl), mountFuse(t, cl)
	must := mustOf(t)
	appendTo := func(p, s string) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		must(err)
		_, err = f.WriteString(s)
		must(err)
		must(f.Close())
	}
	for i, look := range []string{"stat", "read"} { // read: a close still queued on b
		name := fmt.Sprint("r", i)
		must(os.WriteFile(a.Path(name), []byte("old\n"), 0o644))
		if look == "stat" {
			_, err := os.Stat(b.Path(name))
			must(err)
		} else if got, err := os.ReadFile(b.Path(name)); err != nil || string(got) != "old\n" {
			t.Fatalf("read on b: %q, %v", got, err)
		}
		// Another process on a keeps the file open, so that it stays.
		keep, err := os.Open(a.Path(name))
		must(err)
		must(os.Remove(a.Path(name)))
		appendTo(b.Path(name), "from b\n")
		if got, err := os.ReadFile(b.Path(name)); err != nil || string(got) != "from b\n" {
			t.Errorf("%s, then removed on a: b appended to the name and reads %q (%v), want a new file with \"from b\"", look, got, err)
		}
		if out, err := cl.Run("cat", "/"+name); err != nil || out != "from b\n" {
			t.Errorf("%s, then removed on a: the name holds %q (%v), want \"from b\"", look, out, err)
		}
		keep.Close()
	}
	// A file replaced by a rename over it (a configuration update).
	must(os.WriteFile(a.Path("conf"), []byte("v1"), 0o644))
	if got, err := os.ReadFile(b.Path("conf")); err != nil || string(got) != "v1" {
		t.Fatalf("read conf on b: %q, %v", got, err)
	}
	must(os.WriteFile(a.Path("conf.tmp"), []byte("v2"), 0o644))
	must(os.Rename(a.Path("conf.tmp"), a.Path("conf")))
	if got, err := os.ReadFile(b.Path("conf")); err != nil || string(got) != "v2" {
		t.Errorf("conf renamed over on a: b reads %q (%v), want v2", got, err)
	}
}
