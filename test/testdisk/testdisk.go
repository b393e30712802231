// Package testdisk gives tests the disks that fail: a small tmpfs they can
// fill (ENOSPC), and a store's write-ahead log scribbled over (a damaged
// disk). Only tests import it.
package testdisk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// SmallTmpfs mounts a tmpfs of a few pages at a new directory and
// unmounts it at the end of the test. It skips the test where tmpfs
// cannot be mounted (not root).
func SmallTmpfs(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (root needed): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// Fill writes a file in dir until its file system is full, and returns
// what removes it.
func Fill(t testing.TB, dir string) (free func()) {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	return func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
}

// DamageWAL scribbles over bytes 100-200 of the newest write-ahead log
// (*.log) of the store in dir, as a damaged disk would.
func DamageWAL(t testing.TB, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log")
	}
	b, err := os.ReadFile(logs[len(logs)-1])
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i <= 200 && i < len(b); i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(logs[len(logs)-1], b, 0o644); err != nil {
		t.Fatal(err)
	}
}
