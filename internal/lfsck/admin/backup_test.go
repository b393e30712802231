package admin

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"nacre/internal/kv"
	"nacre/internal/mdt"
	"nacre/internal/target"
)

// newMDTDir formats a stopped MDT directory whose store records it and
// holds objects records of 100 bytes (what a backup copies; nothing
// here reads them as inodes).
func newMDTDir(t *testing.T, objects int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mdt0")
	id := target.Identity{Fsname: "test", Kind: target.MDT, Listen: "127.0.0.1:0", MGSNode: "127.0.0.1:1"}
	if err := target.Format(dir, id); err != nil {
		t.Fatal(err)
	}
	id, err := target.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := kv.Open(target.StoreDir(dir), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := target.CheckStore(db, id); err != nil {
		t.Fatal(err)
	}
	for i := range objects {
		if err := db.Set(mdt.ObjKey(uint64(i+2)), bytes.Repeat([]byte{byte(i)}, 100), false); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// smallFullDisk mounts a tmpfs of a few pages at a new directory, fills
// it after fill has written what it wants there, and unmounts it at the
// end of the test. It skips where tmpfs cannot be mounted (not root).
func smallFullDisk(t *testing.T) (dir string, fillUp func()) {
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
	return dir, func() {
		f, err := os.Create(filepath.Join(dir, "filler"))
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
				return
			}
		}
	}
}

// A backup that fails (the disk is full) leaves the earlier backup at the
// same path as it was, and nothing else. Before, the file was truncated
// first and removed on the error: the good backup was gone.
func TestAFailedBackupKeepsTheEarlierOne(t *testing.T) {
	small, fillUp := smallFullDisk(t)
	good := filepath.Join(small, "good.bk")
	e := Env{Out: io.Discard, Err: io.Discard}
	if err := Backup(e, newMDTDir(t, 0), good); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(good)
	if err != nil || len(before) == 0 {
		t.Fatalf("the first backup: %v (%d bytes)", err, len(before))
	}
	fillUp()
	// Larger than the space the earlier backup takes, which truncating it
	// would free.
	err = Backup(e, newMDTDir(t, 200), good)
	if err == nil || !strings.Contains(err.Error(), "no space left on device") || !strings.Contains(err.Error(), good) {
		t.Fatalf("a backup to a full disk: %v, want an error naming %s and ENOSPC", err, good)
	}
	after, rerr := os.ReadFile(good)
	if rerr != nil || !bytes.Equal(after, before) {
		t.Fatalf("the earlier backup after a failed one: %v (%d bytes, was %d)", rerr, len(after), len(before))
	}
	entries, _ := os.ReadDir(small)
	for _, en := range entries {
		if en.Name() != "good.bk" && en.Name() != "filler" {
			t.Errorf("a failed backup left %s behind", en.Name())
		}
	}
}

// A backup written over an earlier one replaces it whole.
func TestABackupReplacesTheEarlierOne(t *testing.T) {
	mdtDir := newMDTDir(t, 1)
	out := filepath.Join(t.TempDir(), "b.bk")
	if err := os.WriteFile(out, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Backup(Env{Out: io.Discard, Err: io.Discard}, mdtDir, out); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil || !strings.HasPrefix(string(b), "NACRE-MDT-BACKUP") {
		t.Fatalf("backup over an old file: %v %q", err, b[:min(len(b), 20)])
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Errorf("the replaced backup's mode is %v, want the old file's 0600", st.Mode().Perm())
	}
}
