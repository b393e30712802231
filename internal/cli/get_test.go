package cli

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// fillWith is a writeLocal filler writing s.
func fillWith(s string) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := io.WriteString(w, s)
		return err
	}
}

// leftovers lists the temporary files left in dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), partialSuffix) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestGetWritesIntoAFIFO: a FIFO is written into (its reader gets the
// data), not replaced by a regular file.
func TestGetWritesIntoAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- "open: " + err.Error()
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- string(b)
	}()
	if err := writeLocal(fifo, 0o644, fillWith("through the pipe")); err != nil {
		t.Fatal(err)
	}
	if s := <-got; s != "through the pipe" {
		t.Fatalf("the FIFO's reader got %q", s)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the FIFO is now %v (%v)", st.Mode(), err)
	}
	if l := leftovers(t, dir); l != nil {
		t.Fatalf("left %v", l)
	}
}

// TestGetWritesIntoADevice: a character device (here a /dev/null and a
// /dev/full made in the test's directory) is written into and stays a
// device, also when the write fails.
func TestGetWritesIntoADevice(t *testing.T) {
	dir := t.TempDir()
	null, full := filepath.Join(dir, "null"), filepath.Join(dir, "full")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Skipf("mknod needs root: %v", err)
	}
	if err := syscall.Mknod(full, syscall.S_IFCHR|0o666, 1<<8|7); err != nil {
		t.Fatal(err)
	}
	if err := writeLocal(null, 0o644, fillWith("discarded")); err != nil {
		t.Fatalf("write into a null device: %v", err)
	}
	err := writeLocal(full, 0o644, fillWith("no room"))
	var le *localError
	if !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &le) || !strings.Contains(err.Error(), "cannot write "+full) {
		t.Fatalf("write into a full device: %v, want ENOSPC naming %s", err, full)
	}
	for _, p := range []string{null, full} {
		if st, err := os.Lstat(p); err != nil || st.Mode()&os.ModeCharDevice == 0 {
			t.Fatalf("%s is now %v (%v)", p, st.Mode(), err)
		}
	}
	if l := leftovers(t, dir); l != nil {
		t.Fatalf("left %v", l)
	}
}

// TestGetWritesThroughASymlink: the file a link names is replaced (and
// keeps its mode); the link stays. A dangling link is refused.
func TestGetWritesThroughASymlink(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	target := filepath.Join(sub, "target")
	if err := os.WriteFile(target, []byte("old"), 0o640); err != nil {
		t.Fatal(err)
	}
	os.Chmod(target, 0o640)
	link := filepath.Join(dir, "link")
	if err := os.Symlink("sub/target", link); err != nil {
		t.Fatal(err)
	}
	if err := writeLocal(link, 0o644, fillWith("new")); err != nil {
		t.Fatal(err)
	}
	if to, err := os.Readlink(link); err != nil || to != "sub/target" {
		t.Fatalf("the link now points to %q (%v)", to, err)
	}
	st, err := os.Stat(target)
	if b, _ := os.ReadFile(target); err != nil || string(b) != "new" || st.Mode() != 0o640 {
		t.Fatalf("the link's target holds %q with mode %v (%v), want \"new\" with -rw-r-----", b, st.Mode(), err)
	}

	dangling := filepath.Join(dir, "dangling")
	os.Symlink("nowhere", dangling)
	if err := writeLocal(dangling, 0o644, fillWith("x")); err == nil || !strings.Contains(err.Error(), "dangling") {
		t.Fatalf("write through a dangling link: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the dangling link's target was created: %v", err)
	}
	for _, d := range []string{dir, sub} {
		if l := leftovers(t, d); l != nil {
			t.Fatalf("left %v", l)
		}
	}
}

// TestGetRegularFileModes: a new file gets the remote file's mode less the
// umask; a file replaced keeps its own.
func TestGetRegularFileModes(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh")
	if err := writeLocal(fresh, 0o751, fillWith("a")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(fresh); err != nil || uint32(st.Mode().Perm()) != 0o751&^umask() {
		t.Fatalf("new file: %v (%v), want %o", st.Mode(), err, 0o751&^umask())
	}
	old := filepath.Join(dir, "old")
	os.WriteFile(old, []byte("old"), 0o600)
	os.Chmod(old, 0o604)
	if err := writeLocal(old, 0o755, fillWith("replaced")); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(old); err != nil || st.Mode() != 0o604 {
		t.Fatalf("replaced file: %v (%v), want -rw----r--", st.Mode(), err)
	}
	if b, _ := os.ReadFile(old); string(b) != "replaced" {
		t.Fatalf("replaced file holds %q", b)
	}
}

// TestGetFailureLeavesTheFile: a get that fails leaves the destination as
// it was and no temporary file; the failure is returned as it is.
func TestGetFailureLeavesTheFile(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "dst")
	os.WriteFile(dst, []byte("keep me"), 0o644)
	boom := errors.New("remote read failed")
	err := writeLocal(dst, 0o644, func(w io.Writer) error {
		io.WriteString(w, "half")
		return boom
	})
	if err != boom {
		t.Fatalf("failed fill: %v, want it as it is", err)
	}
	if b, _ := os.ReadFile(dst); string(b) != "keep me" {
		t.Fatalf("the destination now holds %q", b)
	}
	if l := leftovers(t, dir); l != nil {
		t.Fatalf("left %v", l)
	}
	if err := writeLocal(dir, 0o644, fillWith("x")); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("write over a directory: %v", err)
	}
}

// TestConcurrentGetsDoNotCollide: two gets of one destination at once
// each write a temporary file of their own; both succeed, and the file
// holds all of one of them.
func TestConcurrentGetsDoNotCollide(t *testing.T) {
	dir := t.TempDir()
	dst := filepath.Join(dir, "dst")
	var started sync.WaitGroup
	started.Add(2)
	contents := []string{strings.Repeat("a", 1<<20), strings.Repeat("b", 1<<20)}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range contents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = writeLocal(dst, 0o644, func(w io.Writer) error {
				half := len(contents[i]) / 2
				if _, err := io.WriteString(w, contents[i][:half]); err != nil {
					return err
				}
				// Both temporary files exist and are half written.
				started.Done()
				started.Wait()
				_, err := io.WriteString(w, contents[i][half:])
				return err
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("get %d: %v", i, err)
		}
	}
	if b, _ := os.ReadFile(dst); string(b) != contents[0] && string(b) != contents[1] {
		t.Fatalf("the destination holds a mix of both gets (%d bytes)", len(b))
	}
	if l := leftovers(t, dir); l != nil {
		t.Fatalf("left %v", l)
	}
}
