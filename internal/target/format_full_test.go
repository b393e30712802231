package target

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nacre/test/testdisk"
)

// fullTmpfs mounts a small tmpfs and fills it; free removes the filler.
func fullTmpfs(t *testing.T) (dir string, free func()) {
	dir = testdisk.SmallTmpfs(t)
	return dir, testdisk.Fill(t, dir)
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
