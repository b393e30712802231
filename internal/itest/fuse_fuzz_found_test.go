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

	"nacre/internal/testcluster"
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
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
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
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
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
	time.Sleep(20 * time.Millisecond)
	must(unix.Renameat2(unix.AT_FDCWD, m.Path("d", "ea"), unix.AT_FDCWD, m.Path("d", "ec"), unix.RENAME_EXCHANGE))
	if _, after := mtime(m.Path("d", "ea")); after <= before {
		t.Errorf("the directory exchanged with a symlink kept its change time (%v before, %v after)", before, after)
	}
}
