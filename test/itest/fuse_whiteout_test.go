package itest

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"nacre/test/testcluster"
)

// TestRenameWhiteoutAndOverlay: renameat2(RENAME_WHITEOUT) through the
// mount leaves a whiteout at the old name, and overlayfs takes the mount
// as its upper layer: a removal and a rename in the merged view leave
// whiteouts there.
func TestRenameWhiteoutAndOverlay(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster and mounts it")
	}
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	m := mountFuse(t, cl)
	must := mustOf(t)

	must(os.WriteFile(m.Path("x"), []byte("x"), 0o644))
	must(unix.Renameat2(unix.AT_FDCWD, m.Path("x"), unix.AT_FDCWD, m.Path("y"), unix.RENAME_WHITEOUT))
	isWhiteout := func(p string) bool {
		var st syscall.Stat_t
		return syscall.Lstat(p, &st) == nil && st.Mode == syscall.S_IFCHR && st.Rdev == 0
	}
	if !isWhiteout(m.Path("x")) {
		t.Fatal("renameat2(RENAME_WHITEOUT) left no whiteout at the old name")
	}
	if b, err := os.ReadFile(m.Path("y")); err != nil || string(b) != "x" {
		t.Fatalf("the file did not move: %q %v", b, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, m.Path("y"), unix.AT_FDCWD, m.Path("x"), unix.RENAME_WHITEOUT|unix.RENAME_EXCHANGE); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("RENAME_WHITEOUT|RENAME_EXCHANGE: %v, want EINVAL", err)
	}

	lower, merged := t.TempDir(), t.TempDir()
	must(os.WriteFile(filepath.Join(lower, "f"), []byte("low"), 0o644))
	must(os.WriteFile(filepath.Join(lower, "g"), []byte("keep"), 0o644))
	must(os.Mkdir(m.Path("upper"), 0o755))
	must(os.Mkdir(m.Path("work"), 0o755))
	opts := "lowerdir=" + lower + ",upperdir=" + m.Path("upper") + ",workdir=" + m.Path("work")
	if err := syscall.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		// Not every kernel has overlayfs; the whiteout above is what it
		// needs of the mount.
		t.Skipf("mount overlayfs (%s): %v", opts, err)
	}
	t.Cleanup(func() { syscall.Unmount(merged, 0) }) // before the mount's own cleanup
	must(os.Remove(filepath.Join(merged, "f")))
	if _, err := os.Stat(filepath.Join(merged, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a removed lower file is still in the merged view: %v", err)
	}
	if !isWhiteout(m.Path("upper", "f")) {
		t.Fatal("overlayfs left no whiteout in the upper layer for a removed lower file")
	}
	must(os.Rename(filepath.Join(merged, "g"), filepath.Join(merged, "h")))
	if b, err := os.ReadFile(filepath.Join(merged, "h")); err != nil || string(b) != "keep" {
		t.Fatalf("read the renamed file in the merged view: %q %v", b, err)
	}
	if !isWhiteout(m.Path("upper", "g")) {
		t.Fatal("overlayfs left no whiteout in the upper layer for a renamed lower file")
	}
	if _, err := os.Stat(filepath.Join(merged, "g")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old name is still in the merged view: %v", err)
	}
	must(syscall.Unmount(merged, 0))
}
