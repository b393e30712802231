package target

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// fullTmpfs mounts a small tmpfs and fills it; free removes the filler.
// It is unmounted at the end of the test, and the test skipped where
// tmpfs cannot be mounted (not root).
func fullTmpfs(t *testing.T) (dir string, free func()) {
	t.Helper()
	dir = t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (root needed): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	f.Close()
	return dir, func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
}

// A format that fails on a full disk leaves nothing that blocks the same
// format once there is room: no identity temporary file, and no directory
// it made itself (an empty directory that was there stays, empty).
// Before, nacre-target.json.tmp was left and the retry was refused ("the
// directory is not empty and holds no Nacre target").
func TestAFormatThatFailsOnAFullDiskCanBeRetried(t *testing.T) {
	small, free := fullTmpfs(t)
	made := filepath.Join(small, "a", "t1")
	there := filepath.Join(small, "t2")
	if err := os.Mkdir(there, 0o755); err != nil {
		t.Fatal(err)
	}
	id := Identity{Fsname: "test", Kind: OST, MGSNode: "127.0.0.1:1", Listen: "127.0.0.1:0"}
	for _, d := range []string{made, there} {
		err := Format(d, id)
		if err == nil || !strings.Contains(err.Error(), "no space left on device") {
			t.Fatalf("format %s on a full disk: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(small, "a")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed format left the directories it made: %v", err)
	}
	if !Empty(there) {
		entries, _ := os.ReadDir(there)
		t.Errorf("the failed format left %v in %s", entries, there)
	}
	free()
	for _, d := range []string{made, there} {
		if err := Format(d, id); err != nil {
			t.Errorf("format %s again with room: %v", d, err)
		}
	}
}

// Save removes its temporary file when it fails.
func TestAFailedSaveLeavesNoTemporaryFile(t *testing.T) {
	small, _ := fullTmpfs(t)
	if err := Save(small, Identity{Fsname: "test", Kind: OST}); err == nil {
		t.Fatal("save on a full disk succeeded")
	}
	if _, err := os.Stat(filepath.Join(small, IdentityFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed save left its temporary file: %v", err)
	}
}
