package admin

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/cli"
	"nacre/internal/kv"
	"nacre/internal/mdt"
	"nacre/internal/target"
	"nacre/test/testdisk"
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

// A backup that fails (the disk is full) leaves the earlier backup at the
// same path as it was, and nothing else. Before, the file was truncated
// first and removed on the error: the good backup was gone.
func TestAFailedBackupKeepsTheEarlierOne(t *testing.T) {
	small := testdisk.SmallTmpfs(t)
	fillUp := func() { testdisk.Fill(t, small) }
	good := filepath.Join(small, "good.bk")
	e := cli.Env{Out: io.Discard, Err: io.Discard}
	if err := Backup(e, newMDTDir(t, 0), good, false); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(good)
	if err != nil || len(before) == 0 {
		t.Fatalf("the first backup: %v (%d bytes)", err, len(before))
	}
	fillUp()
	// Larger than the space the earlier backup takes, which truncating it
	// would free.
	err = Backup(e, newMDTDir(t, 200), good, false)
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
	if err := Backup(cli.Env{Out: io.Discard, Err: io.Discard}, mdtDir, out, false); err != nil {
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

// markStarted records in the identity of dir that the target has run.
func markStarted(t *testing.T, dir string) {
	t.Helper()
	id, err := target.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	id.Started = time.Now().UTC()
	if err := target.Save(dir, id); err != nil {
		t.Fatal(err)
	}
}

// A store that lost data (what a damaged write-ahead log leaves: no
// record of the Raft log the MDT ran with, or nothing at all) is not
// backed up: `nacre up` refuses to start on it, and a backup of it,
// restored, would empty the file system. Before, the backup said
// "backed up MDT0000 (0 objects)" and exited 0. --force backs it up
// anyway, with a warning.
func TestABackupOfADamagedStoreIsRefusedUnlessForced(t *testing.T) {
	lostLog := newMDTDir(t, 3)
	markStarted(t, lostLog)
	// Its Raft log holds what the store lost.
	if err := os.MkdirAll(target.RaftLogDir(lostLog), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target.RaftLogDir(lostLog), "seg-1"), []byte("entries"), 0o644); err != nil {
		t.Fatal(err)
	}
	lostAll := newMDTDir(t, 3)
	markStarted(t, lostAll)
	if err := os.RemoveAll(target.StoreDir(lostAll)); err != nil {
		t.Fatal(err)
	}
	db, err := kv.Open(target.StoreDir(lostAll), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	for _, c := range []struct {
		dir, why string
	}{{lostLog, "has no record of its Raft log"}, {lostAll, "holds none of its data"}} {
		out := filepath.Join(t.TempDir(), "b.bk")
		var stderr bytes.Buffer
		e := cli.Env{Out: io.Discard, Err: &stderr}
		err := Backup(e, c.dir, out, false)
		if err == nil || !strings.Contains(err.Error(), "refusing to back up MDT0000") || !strings.Contains(err.Error(), c.why) ||
			!strings.Contains(err.Error(), "--force") || !strings.Contains(err.Error(), "another replica") {
			t.Errorf("backup of a store that %s: %v", c.why, err)
		}
		if _, serr := os.Stat(out); !errors.Is(serr, os.ErrNotExist) {
			t.Errorf("a refused backup wrote %s: %v", out, serr)
		}
		if err := Backup(e, c.dir, out, true); err != nil {
			t.Errorf("backup --force of a store that %s: %v", c.why, err)
		}
		if !strings.Contains(stderr.String(), "warning: backing up MDT0000 although its store fails its checks") || !strings.Contains(stderr.String(), "may be incomplete") {
			t.Errorf("backup --force of a store that %s warns: %q", c.why, stderr.String())
		}
	}
}

// storeFiles lists what the store directory of dir holds.
func storeFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(target.StoreDir(dir))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		names = append(names, en.Name())
	}
	return names
}

// emptyStore removes what the store directory of dir holds and keeps the
// directory (a mount point whose device is not mounted, a store removed
// by hand: rm -rf store/*).
func emptyStore(t *testing.T, dir string) {
	t.Helper()
	for _, name := range storeFiles(t, dir) {
		if err := os.RemoveAll(filepath.Join(target.StoreDir(dir), name)); err != nil {
			t.Fatal(err)
		}
	}
}

// A restore from a file that is not a whole backup fails before it
// touches the target: an emptied store directory stays empty (before, the
// restore created a new store there, and the next `nacre up` said the
// Raft log was damaged instead of that the store is missing), and a
// truncated backup is named truncated, not "unexpected EOF".
func TestAFailedRestoreLeavesTheTargetAsItWas(t *testing.T) {
	src := newMDTDir(t, 50)
	bk := filepath.Join(t.TempDir(), "good.bk")
	e := cli.Env{Out: io.Discard, Err: io.Discard}
	if err := Backup(e, src, bk, false); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(bk)
	if err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(files, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, file string
		want       []string
	}{
		{"not a backup", write("passwd", []byte("root:x:0:0:root:/root:/bin/bash\n")), []string{"not a Nacre MDT backup"}},
		{"empty", write("empty", nil), []string{"not a Nacre MDT backup"}},
		{"truncated in its records", write("half.bk", whole[:len(whole)/2]), []string{"the backup is truncated", fmt.Sprintf("after %d bytes", len(whole)/2), "incomplete"}},
		{"truncated in its magic", write("short.bk", whole[:5]), []string{"the backup is truncated"}},
		{"without its CRC", write("nocrc.bk", whole[:len(whole)-2]), []string{"the backup is truncated"}},
		{"another version", write("v2.bk", append([]byte("NACRE-MDT-BACKUP 2\n"), whole[len("NACRE-MDT-BACKUP 1\n"):]...)), []string{"format version \"2\""}},
	} {
		dst := newMDTDir(t, 3)
		markStarted(t, dst)
		emptyStore(t, dst)
		err := Restore(e, dst, c.file, false)
		if err == nil {
			t.Errorf("restore from a file %s succeeded", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("restore from a file %s: %v; want it to say %q", c.name, err, w)
			}
		}
		if got := storeFiles(t, dst); len(got) > 0 {
			t.Errorf("restore from a file %s left a store behind: %v", c.name, got)
		}
	}
	// A whole backup restores into the same emptied store.
	dst := newMDTDir(t, 3)
	markStarted(t, dst)
	emptyStore(t, dst)
	if err := Restore(e, dst, bk, true); err != nil {
		t.Fatalf("restore of a whole backup: %v", err)
	}
}

// A restored MDT is backed up again at once: a restore starts a new Raft
// log (the old one and the store's record of it go), which the check for
// a store that lost data took for a damaged store. The restore also reads
// its backup from a pipe (it was read twice: "illegal seek").
func TestARestoredMDTIsBackedUpAndAPipeRestores(t *testing.T) {
	e := cli.Env{Out: io.Discard, Err: io.Discard}
	src := newMDTDir(t, 20)
	bk := filepath.Join(t.TempDir(), "b1.bk")
	if err := Backup(e, src, bk, false); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		b, _ := os.ReadFile(bk)
		w.Write(b)
		w.Close()
	}()
	dst := newMDTDir(t, 3)
	markStarted(t, dst)
	if err := Restore(e, dst, fifo, true); err != nil {
		t.Fatalf("restore from a pipe: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(dst, ".nacre-restore-*")); len(left) > 0 {
		t.Errorf("the spooled backup is left: %v", left)
	}
	b2 := filepath.Join(t.TempDir(), "b2.bk")
	if err := Backup(e, dst, b2, false); err != nil {
		t.Fatalf("backup right after a restore: %v", err)
	}
}

// A backup through a symbolic link (--out /dev/stdout) writes into what
// the link names and leaves the link: it was renamed over (as root,
// /dev/stdout itself). A new backup file gets the mode the umask leaves.
func TestABackupThroughALinkKeepsTheLinkAndANewOneTheUmask(t *testing.T) {
	e := cli.Env{Out: io.Discard, Err: io.Discard}
	src := newMDTDir(t, 5)
	d := t.TempDir()
	real := filepath.Join(d, "real")
	if err := os.WriteFile(real, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(d, "out")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := Backup(e, src, link, false); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced: %v %v", st.Mode(), err)
	}
	if st, err := os.Stat(real); err != nil || st.Size() == 0 {
		t.Fatalf("the backup did not go where the link points: %v", err)
	}
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	fresh := filepath.Join(d, "fresh.bk")
	if err := Backup(e, src, fresh, false); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(fresh); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("a new backup under umask 077 has mode %v (%v), want 0600", st.Mode().Perm(), err)
	}
}
