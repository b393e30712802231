package itest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nacre/test/testcluster"
	"nacre/test/wait"
)

// Multi-client tests: two mounts (two mount daemons, two clients) of one
// cluster.

func twoMounts(t *testing.T) (*testcluster.Cluster, *fuseMount, *fuseMount) {
	t.Helper()
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	return cl, mountFuse(t, cl), mountFuse(t, cl)
}

func randBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	r.Read(b)
	return b
}

func statOf(t *testing.T, p string) syscall.Stat_t {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestFuseCloseToOpenBetweenMounts: a client that opens a file after
// another closed it sees every byte and the right size; a stat from the
// other client, even one that had the file's attributes cached, shows the
// writer's size and mtime.
func TestFuseCloseToOpenBetweenMounts(t *testing.T) {
	_, a, b := twoMounts(t)
	r := rand.New(rand.NewSource(1))
	pa, pb := a.Path("shared.dat"), b.Path("shared.dat")
	if err := os.WriteFile(pa, []byte("v0"), 0o644); err != nil {
		t.Fatal(err)
	}
	ref := []byte("v0")
	for round, size := range []int{3<<20 + 123, 1000, 5 << 20, 0, 64 << 10} {
		// Reader caches attributes and pages of the old version.
		if got, err := os.ReadFile(pb); err != nil || !bytes.Equal(got, ref) {
			t.Fatalf("round %d: reader before the write: %d bytes, %v", round, len(got), err)
		}
		statOf(t, pb)
		// Writer rewrites (sometimes appends) and closes.
		var f *os.File
		var err error
		if round%2 == 0 {
			f, err = os.OpenFile(pa, os.O_WRONLY|os.O_TRUNC, 0)
			ref = randBytes(r, size)
		} else {
			f, err = os.OpenFile(pa, os.O_WRONLY|os.O_APPEND, 0)
			more := randBytes(r, size)
			ref = append(ref, more...)
		}
		if err != nil {
			t.Fatal(err)
		}
		// The new bytes: all of ref for a rewrite, its tail for an append.
		if _, err := f.Write(ref[len(ref)-size:]); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		sa := statOf(t, pa)
		sb := statOf(t, pb)
		if sb.Size != int64(len(ref)) || sb.Size != sa.Size || sb.Mtim != sa.Mtim {
			t.Fatalf("round %d: stat on the other client: size %d mtime %v; writer: size %d mtime %v; want size %d",
				round, sb.Size, sb.Mtim, sa.Size, sa.Mtim, len(ref))
		}
		got, err := os.ReadFile(pb)
		if err != nil || !bytes.Equal(got, ref) {
			t.Fatalf("round %d: reader after close: %d bytes (want %d), first difference at %d, %v", round, len(got), len(ref), firstDiff(got, ref), err)
		}
	}
}

// TestFuseFlockAcrossMounts: flock(2) is coherent between clients, a
// waiter is woken by the holder's close, and a client's locks go when its
// mount daemon dies.
func TestFuseFlockAcrossMounts(t *testing.T) {
	_, a, b := twoMounts(t)
	if err := os.WriteFile(a.Path("lk"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fa, err := os.OpenFile(a.Path("lk"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.OpenFile(b.Path("lk"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	if err := syscall.Flock(int(fa.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(fb.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("shared lock on the other client while exclusive held: %v, want EWOULDBLOCK", err)
	}
	got := make(chan error, 1)
	go func() { got <- syscall.Flock(int(fb.Fd()), syscall.LOCK_EX) }()
	select {
	case err := <-got:
		t.Fatalf("blocking flock returned while held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	fa.Close() // releases the flock
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken by the holder's close")
	}
	// b holds it now; kill b's mount daemon: its session ends, the lock goes.
	fa2, err := os.OpenFile(a.Path("lk"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fa2.Close()
	if err := syscall.Flock(int(fa2.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EWOULDBLOCK) {
		t.Fatalf("lock held by b: %v", err)
	}
	b.Kill()
	wait.NoErr(t, 10*time.Second, "the lock of a dead client to be released", func() error {
		return syscall.Flock(int(fa2.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	})
}

// TestFuseByteRangeLocksAcrossMounts: POSIX byte-range locks conflict
// between clients by range and type, F_GETLK reports the holder's lock,
// and F_SETLKW waits for the range to be unlocked.
func TestFuseByteRangeLocksAcrossMounts(t *testing.T) {
	_, a, b := twoMounts(t)
	if err := os.WriteFile(a.Path("rl"), make([]byte, 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	fa, err := os.OpenFile(a.Path("rl"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	fb, err := os.OpenFile(b.Path("rl"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	lk := func(f *os.File, cmd int, typ int16, start, n int64) (syscall.Flock_t, error) {
		l := syscall.Flock_t{Type: typ, Whence: 0, Start: start, Len: n}
		err := syscall.FcntlFlock(f.Fd(), cmd, &l)
		return l, err
	}
	if _, err := lk(fa, syscall.F_SETLK, syscall.F_WRLCK, 100, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := lk(fb, syscall.F_SETLK, syscall.F_RDLCK, 0, 100); err != nil {
		t.Fatalf("disjoint range: %v", err)
	}
	if _, err := lk(fb, syscall.F_SETLK, syscall.F_RDLCK, 150, 10); !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EACCES) {
		t.Fatalf("overlapping range: %v, want EAGAIN", err)
	}
	l, err := lk(fb, syscall.F_GETLK, syscall.F_WRLCK, 0, 0)
	if err != nil || l.Type != syscall.F_WRLCK || l.Start != 100 || l.Len != 100 {
		t.Fatalf("F_GETLK: %+v %v", l, err)
	}
	got := make(chan error, 1)
	go func() { _, err := lk(fb, syscall.F_SETLKW, syscall.F_WRLCK, 190, 20); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("F_SETLKW returned while the range is held: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := lk(fa, syscall.F_SETLK, syscall.F_UNLCK, 150, 50); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("F_SETLKW not granted after unlock")
	}
	// a still holds [100,150); its close releases it.
	if _, err := lk(fb, syscall.F_SETLK, syscall.F_WRLCK, 120, 1); !errors.Is(err, syscall.EAGAIN) && !errors.Is(err, syscall.EACCES) {
		t.Fatalf("remaining part: %v", err)
	}
	fa.Close()
	if _, err := lk(fb, syscall.F_SETLK, syscall.F_WRLCK, 0, 0); err != nil {
		t.Fatalf("after the holder's close: %v", err)
	}
}

// TestFusePosixLocksBelongToTheProcess: a POSIX lock is its process's,
// whichever descriptor took it, as on a local file system (checked side
// by side with the test's temporary directory): another descriptor of
// the process converts it, F_GETLK through it reports no conflict, and an
// unlock through it releases the lock for everyone. Before, the open file
// was part of the owner: the second descriptor got EAGAIN, F_GETLK named
// the process's own lock, and its unlock did nothing, so other clients
// waited on the lock until the first descriptor was closed.
func TestFusePosixLocksBelongToTheProcess(t *testing.T) {
	_, a, b := twoMounts(t)
	lk := func(f *os.File, cmd int, typ int16) (int16, error) {
		l := unix.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 10}
		err := unix.FcntlFlock(f.Fd(), cmd, &l)
		return l.Type, err
	}
	open := func(p string) *os.File {
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	for _, dir := range []string{t.TempDir(), a.Dir} {
		p := filepath.Join(dir, "plock")
		fd0, fd1 := open(p), open(p)
		probe := open(p) // an OFD lock's owner: its open file, not the process
		if _, err := lk(fd0, unix.F_SETLK, unix.F_WRLCK); err != nil {
			t.Fatalf("%s: lock through the first descriptor: %v", dir, err)
		}
		if typ, err := lk(probe, unix.F_OFD_GETLK, unix.F_WRLCK); err != nil || typ != unix.F_WRLCK {
			t.Fatalf("%s: the lock is not seen by another owner: type %d, %v", dir, typ, err)
		}
		if _, err := lk(fd1, unix.F_SETLK, unix.F_WRLCK); err != nil {
			t.Fatalf("%s: the process locks again through a second descriptor: %v, want success", dir, err)
		}
		if typ, err := lk(fd1, unix.F_GETLK, unix.F_WRLCK); err != nil || typ != unix.F_UNLCK {
			t.Fatalf("%s: F_GETLK through a second descriptor: type %d (%v), want no conflict (F_UNLCK %d)", dir, typ, err, unix.F_UNLCK)
		}
		if _, err := lk(fd1, unix.F_SETLK, unix.F_UNLCK); err != nil {
			t.Fatalf("%s: unlock through the second descriptor: %v", dir, err)
		}
		if typ, err := lk(probe, unix.F_OFD_GETLK, unix.F_WRLCK); err != nil || typ != unix.F_UNLCK {
			t.Fatalf("%s: after the unlock through the second descriptor the lock is still there: type %d, %v", dir, typ, err)
		}
	}
	// And for another client.
	fb := open(b.Path("plock"))
	if _, err := lk(fb, unix.F_SETLK, unix.F_WRLCK); err != nil {
		t.Fatalf("another client's lock after the unlock: %v", err)
	}
}

// TestFuseConcurrentCreatesInSharedDir: both clients create files in one
// directory at once; names are unique and O_EXCL has exactly one winner.
func TestFuseConcurrentCreatesInSharedDir(t *testing.T) {
	_, a, b := twoMounts(t)
	if err := os.Mkdir(a.Path("shared"), 0o755); err != nil {
		t.Fatal(err)
	}
	const per = 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[string]int{}
	errs := make(chan error, 8)
	for ci, m := range []*fuseMount{a, b} {
		for w := 0; w < 2; w++ {
			wg.Add(1)
			go func(ci, w int, m *fuseMount) {
				defer wg.Done()
				for i := 0; i < per; i++ {
					name := m.Path("shared", fmt.Sprintf("c%d-w%d-%d", ci, w, i))
					if err := os.WriteFile(name, []byte(name), 0o644); err != nil {
						errs <- err
						return
					}
					// Everyone races for the same names too.
					race := m.Path("shared", fmt.Sprintf("race-%d", i%20))
					f, err := os.OpenFile(race, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
					if err == nil {
						f.Close()
						mu.Lock()
						wins[race[len(m.Dir):]]++
						mu.Unlock()
					} else if !errors.Is(err, os.ErrExist) {
						errs <- err
						return
					}
				}
			}(ci, w, m)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, n := range wins {
		if n != 1 {
			t.Errorf("%s created %d times with O_EXCL", k, n)
		}
	}
	if len(wins) != 20 {
		t.Errorf("%d race names created, want 20", len(wins))
	}
	for _, m := range []*fuseMount{a, b} {
		ents, err := os.ReadDir(m.Path("shared"))
		if err != nil {
			t.Fatal(err)
		}
		if len(ents) != 4*per+20 {
			t.Errorf("%s lists %d entries, want %d", m.Dir, len(ents), 4*per+20)
		}
	}
}

// TestFuseRenameRacesBetweenMounts: both clients rename files between
// two directories at once; afterwards every file exists exactly once,
// with its content, whichever rename won.
func TestFuseRenameRacesBetweenMounts(t *testing.T) {
	_, a, b := twoMounts(t)
	for _, d := range []string{"x", "y"} {
		if err := os.Mkdir(a.Path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const files = 20
	for i := 0; i < files; i++ {
		if err := os.WriteFile(a.Path("x", fmt.Sprint(i)), []byte(fmt.Sprint("content ", i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	for ci, m := range []*fuseMount{a, b} {
		wg.Add(1)
		go func(ci int, m *fuseMount) {
			defer wg.Done()
			r := rand.New(rand.NewSource(int64(ci)))
			for k := 0; k < 300; k++ {
				i := r.Intn(files)
				from, to := "x", "y"
				if r.Intn(2) == 0 {
					from, to = to, from
				}
				// Either may fail (the other client moved it): fine.
				os.Rename(m.Path(from, fmt.Sprint(i)), m.Path(to, fmt.Sprint(i)))
			}
		}(ci, m)
	}
	wg.Wait()
	time.Sleep(1100 * time.Millisecond) // entry caches
	for _, m := range []*fuseMount{a, b} {
		var names []string
		for _, d := range []string{"x", "y"} {
			ents, err := os.ReadDir(m.Path(d))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				names = append(names, e.Name())
				got, err := os.ReadFile(m.Path(d, e.Name()))
				if err != nil || string(got) != "content "+e.Name() {
					t.Errorf("%s/%s: %q %v", d, e.Name(), got, err)
				}
				var st syscall.Stat_t
				if err := syscall.Stat(m.Path(d, e.Name()), &st); err != nil || st.Nlink != 1 {
					t.Errorf("%s/%s: nlink %d %v", d, e.Name(), st.Nlink, err)
				}
			}
		}
		sort.Strings(names)
		if len(names) != files {
			t.Fatalf("%s: %d files after the races, want %d: %v", m.Dir, len(names), files, names)
		}
		for i := 1; i < len(names); i++ {
			if names[i] == names[i-1] {
				t.Fatalf("%s: %s in both directories", m.Dir, names[i])
			}
		}
	}
}

// TestFuseOpenThroughANameAnotherMountMoved: a mount that looked a name up
// a moment ago opens, through it, what the name holds now, after another
// mount renamed the file (or directory) away or swapped it, not the moved
// object. Before, `echo NEW > a` on one mount within a second of `mv a b`
// on the other wrote into b. A process whose working directory another
// mount moved still lists it, and a file reached through /proc/PID/fd
// after a move still opens.
func TestFuseOpenThroughANameAnotherMountMoved(t *testing.T) {
	_, m1, m2 := twoMounts(t)
	must := mustOf(t)
	must(os.MkdirAll(m1.Path("r", "d1"), 0o755))
	must(os.WriteFile(m1.Path("r", "a"), []byte("precious"), 0o644))
	must(os.WriteFile(m1.Path("r", "d1", "in-d1"), nil, 0o644))
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	// m2 learns the names; after a moment (past what a path walk's own
	// lookup takes) m1 moves them.
	read(m2.Path("r", "a"))
	if _, err := os.ReadDir(m2.Path("r", "d1")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	must(os.Rename(m1.Path("r", "a"), m1.Path("r", "b")))
	must(os.Rename(m1.Path("r", "d1"), m1.Path("r", "d2")))
	must(os.MkdirAll(m1.Path("r", "d1", "new-d1"), 0o755))

	must(os.WriteFile(m2.Path("r", "a"), []byte("NEW"), 0o644))
	if got := read(m1.Path("r", "b")); got != "precious" {
		t.Fatalf("the moved file holds %q, want %q: an open of the old name on the other mount reached it", got, "precious")
	}
	if got := read(m1.Path("r", "a")); got != "NEW" {
		t.Fatalf("r/a holds %q, want NEW", got)
	}
	ents, err := os.ReadDir(m2.Path("r", "d1"))
	if err != nil || len(ents) != 1 || ents[0].Name() != "new-d1" {
		t.Fatalf("listing r/d1 on the other mount: %v (%v), want the new r/d1's [new-d1]", ents, err)
	}

	// RENAME_EXCHANGE swaps two names: each now opens the other file.
	must(os.WriteFile(m1.Path("r", "x"), []byte("x"), 0o644))
	must(os.WriteFile(m1.Path("r", "y"), []byte("y"), 0o644))
	read(m2.Path("r", "x"))
	read(m2.Path("r", "y"))
	time.Sleep(100 * time.Millisecond) // as above: past a path walk's own lookup
	must(renameExchange(m1.Path("r", "x"), m1.Path("r", "y")))
	if got := read(m2.Path("r", "x")); got != "y" {
		t.Fatalf("r/x after the swap reads %q on the other mount, want y", got)
	}

	// A file with two names, both cached: the one moved away is checked
	// too, whichever the kernel opens through.
	must(os.WriteFile(m1.Path("r", "h1"), []byte("OLD"), 0o644))
	must(os.Link(m1.Path("r", "h1"), m1.Path("r", "h2")))
	read(m2.Path("r", "h1"))
	read(m2.Path("r", "h2"))
	time.Sleep(100 * time.Millisecond) // as above: past a path walk's own lookup
	must(os.Rename(m1.Path("r", "h1"), m1.Path("r", "hz")))
	must(os.WriteFile(m1.Path("r", "h1"), []byte("NEW"), 0o644))
	if got := read(m2.Path("r", "h1")); got != "NEW" {
		t.Fatalf("r/h1 reads %q on the other mount after it was moved away and made again, want NEW", got)
	}
	if got := read(m2.Path("r", "h2")); got != "OLD" {
		t.Fatalf("r/h2 (the other link) reads %q, want OLD", got)
	}

	// Reached without a name: a working directory moved away, and a
	// /proc/PID/fd link to a moved file.
	f, err := os.Open(m2.Path("r", "b"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sh", "-c", `sleep 0.3; ls -a . >/dev/null && cat "/proc/$PPID/fd/$FD"`)
	cmd.Dir = m2.Path("r", "d2")
	cmd.Env = append(os.Environ(), fmt.Sprintf("FD=%d", f.Fd()))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	must(cmd.Start())
	time.Sleep(100 * time.Millisecond) // as above: past a path walk's own lookup
	must(os.Rename(m1.Path("r", "d2"), m1.Path("r", "d3")))
	must(os.Rename(m1.Path("r", "b"), m1.Path("r", "c")))
	if err := cmd.Wait(); err != nil || out.String() != "precious" {
		t.Fatalf("a process in a directory another mount moved: %v, output %q, want it to list it and read precious", err, out.String())
	}
}

func renameExchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}
