package itest

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Locks as cache coherency points (as on NFS): what a client wrote under
// a lock is what the next holder of the lock, on another client, reads,
// although both keep the file open (close-to-open does not apply).

// takeTurns runs a(i) and b(i) alternately, a first, n times each.
func takeTurns(t *testing.T, n int, a, b func(i int) error) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := a(i); err != nil {
			t.Fatalf("turn %d of the first client: %v", i, err)
		}
		if err := b(i); err != nil {
			t.Fatalf("turn %d of the second client: %v", i, err)
		}
	}
}

// TestFuseLockedReadModifyWriteAcrossMounts: two clients increment a
// counter in a file they both keep open, each under a lock (OFD
// byte-range locks, then flock): no increment is lost, because a client
// that gets the lock does not read the pages it cached before, and a
// client's writes reach the OSTs before its unlock lets the other in.
func TestFuseLockedReadModifyWriteAcrossMounts(t *testing.T) {
	_, a, b := twoMounts(t)
	if err := os.WriteFile(a.Path("counter"), []byte(fmt.Sprintf("%15d\n", 0)), 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(m *fuseMount) *os.File {
		f, err := os.OpenFile(m.Path("counter"), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	fa, fb := open(a), open(b)
	ofd := func(f *os.File, typ int16) error {
		l := unix.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 16}
		return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLKW, &l)
	}
	increment := func(f *os.File, useFlock bool) error {
		lock, unlock := func() error { return ofd(f, unix.F_WRLCK) }, func() error { return ofd(f, unix.F_UNLCK) }
		if useFlock {
			lock = func() error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }
			unlock = func() error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
		}
		if err := lock(); err != nil {
			return err
		}
		buf := make([]byte, 16)
		if _, err := f.ReadAt(buf, 0); err != nil {
			return err
		}
		v, err := strconv.Atoi(strings.TrimSpace(string(buf)))
		if err != nil {
			return fmt.Errorf("counter %q: %v", buf, err)
		}
		if _, err := f.WriteAt([]byte(fmt.Sprintf("%15d\n", v+1)), 0); err != nil {
			return err
		}
		return unlock()
	}
	// A reader that holds the lock sees the last increment, although
	// its kernel still has the pages and attributes of the value before.
	readLocked := func(f *os.File, want int) error {
		if err := ofd(f, unix.F_RDLCK); err != nil {
			return err
		}
		buf := make([]byte, 16)
		if _, err := f.ReadAt(buf, 0); err != nil {
			return err
		}
		if err := ofd(f, unix.F_UNLCK); err != nil {
			return err
		}
		if v, _ := strconv.Atoi(strings.TrimSpace(string(buf))); v != want {
			return fmt.Errorf("read %d under the lock, want %d", v, want)
		}
		return nil
	}
	const n = 25
	v := 0
	takeTurns(t, n,
		func(int) error { v++; return increment(fa, false) },
		func(int) error { return readLocked(fb, v) })
	takeTurns(t, n,
		func(int) error { v++; return increment(fb, true) },
		func(int) error { return readLocked(fa, v) })
	for _, useFlock := range []bool{false, true} {
		takeTurns(t, n,
			func(int) error { v++; return increment(fa, useFlock) },
			func(int) error { v++; return increment(fb, useFlock) })
	}
	for _, m := range []*fuseMount{a, b} {
		got, err := os.ReadFile(m.Path("counter"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := strconv.Atoi(strings.TrimSpace(string(got))); got != v {
			t.Errorf("%s: counter %d after %d locked increments", m.Dir, got, v)
		}
	}
}

// TestFuseLockedAppendsAcrossMounts: two clients append records to a log
// they both keep open with O_APPEND, each append under flock (the usual
// way jobs on several nodes share a log): every record is kept, in
// order. After one client empties the log under the lock, the other's
// next append goes to its start, not to where the end used to be.
func TestFuseLockedAppendsAcrossMounts(t *testing.T) {
	_, a, b := twoMounts(t)
	if err := os.WriteFile(a.Path("log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	open := func(m *fuseMount) *os.File {
		f, err := os.OpenFile(m.Path("log"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	fa, fb := open(a), open(b)
	appendLocked := func(f *os.File, rec string) error {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			return err
		}
		if _, err := f.WriteString(rec); err != nil {
			return err
		}
		return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}
	var want bytes.Buffer
	rec := func(who string, i int) string { return fmt.Sprintf("%s record %03d\n", who, i) }
	takeTurns(t, 30,
		func(i int) error { want.WriteString(rec("a", i)); return appendLocked(fa, rec("a", i)) },
		func(i int) error { want.WriteString(rec("b", i)); return appendLocked(fb, rec("b", i)) })
	check := func(when string) {
		t.Helper()
		for _, m := range []*fuseMount{a, b} {
			got, err := os.ReadFile(m.Path("log"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("%s: %s holds %d bytes, want %d; first difference at %d:\n%s", when, m.Dir, len(got), want.Len(), firstDiff(got, want.Bytes()), got)
			}
		}
	}
	check("after the appends")

	// a empties the log under the lock; b appends, then a.
	if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := fa.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	want.Reset()
	want.WriteString(rec("b", 100) + rec("a", 100))
	if err := appendLocked(fb, rec("b", 100)); err != nil {
		t.Fatal(err)
	}
	if err := appendLocked(fa, rec("a", 100)); err != nil {
		t.Fatal(err)
	}
	check("after emptying the log")
}

// TestFuseTruncateByOtherClientSeenThroughOpenFile: a client that wrote
// a file and keeps it open sees another client's truncate (which is
// announced to it at once): its size and reads end at the new end, not
// at the end of its own earlier writes, and its next writes count again.
func TestFuseTruncateByOtherClientSeenThroughOpenFile(t *testing.T) {
	_, a, b := twoMounts(t)
	fb, err := os.OpenFile(b.Path("f"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if _, err := fb.Write(bytes.Repeat([]byte("b"), 10000)); err != nil {
		t.Fatal(err)
	}
	// Written-behind data is ordered before another client's truncate
	// only by a sync point (fsync, close, a lock).
	if err := fb.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(a.Path("f"), 26); err != nil {
		t.Fatal(err)
	}
	st, err := fb.Stat()
	if err != nil || st.Size() != 26 {
		t.Fatalf("size through the open file after the other client's truncate: %v %v, want 26", st.Size(), err)
	}
	buf := make([]byte, 8192)
	n, err := fb.ReadAt(buf, 0)
	if n != 26 || !bytes.Equal(buf[:n], bytes.Repeat([]byte("b"), 26)) {
		t.Fatalf("read through the open file: %d bytes (%v), want the 26 left", n, err)
	}
	// b writes on; a, which has no open file, sees b's new end at once
	// (a stat, not only after b's close).
	if _, err := fb.WriteAt([]byte("tail"), 100); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // a's attribute cache
	if st, err := os.Stat(a.Path("f")); err != nil || st.Size() != 104 {
		t.Fatalf("other client's stat after the write: %v %v, want 104", st.Size(), err)
	}
}
