package admin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"nacre/internal/cli"
	"nacre/internal/kv"
	"nacre/internal/mdt"
	"nacre/internal/raftgroup"
	"nacre/internal/raftlog"
	"nacre/internal/target"
	"nacre/internal/target/proc"
)

// offlineMDT opens an MDT's store with its server stopped: read-only for
// a backup, which checks it (checkBackupSource), or to write for a
// restore.
func offlineMDT(dir string, readOnly bool) (*kv.DB, target.Identity, error) {
	id, err := stoppedMDT(dir)
	if err != nil {
		return nil, id, err
	}
	db, err := kv.Open(target.StoreDir(dir), kv.Options{ReadOnly: readOnly})
	if err != nil {
		return nil, id, err
	}
	if readOnly {
		return db, id, nil
	}
	// A restore may write into a new, empty store (the old device died):
	// that store is the target's from now on, whatever it has run on.
	chk := id
	chk.Started = time.Time{}
	if err := target.CheckStore(db, chk); err != nil {
		db.Close()
		return nil, id, err
	}
	return db, id, nil
}

// stoppedMDT is the identity of the MDT in dir, whose server must be
// stopped.
func stoppedMDT(dir string) (target.Identity, error) {
	id, err := target.Load(dir)
	if err != nil {
		return id, err
	}
	if id.Kind != target.MDT {
		return id, fmt.Errorf("%s holds %s, not an MDT", dir, id.Describe())
	}
	if pid, ok := proc.Serving(dir); ok {
		return id, fmt.Errorf("%s is served by process %d; stop it first (a file-level backup or restore is done with the MDT stopped)", dir, pid)
	}
	return id, nil
}

// checkBackupSource makes sure the store of the MDT in dir holds what the
// MDT has: its owner is recorded (CheckStore, as a start checks it), and
// a target that has run finds the record of its Raft log there. A store
// that lost data (a damaged write-ahead log) opens and reads as a smaller
// or empty namespace, and a backup of it, restored, would empty the file
// system; `nacre up` refuses to start on it.
func checkBackupSource(db *kv.DB, dir string, id target.Identity) error {
	if err := target.VerifyStore(db, id); err != nil {
		return err
	}
	if !target.HasRun(dir, id) {
		return nil
	}
	ok, err := raftgroup.RecordsLog(db, mdt.RaftPrefix)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	// A restore removes the Raft log with the store's record of it (the
	// restored state starts a new log), as does a start that finds none:
	// only a store without the record beside a log that holds something
	// lost data, which is what a start refuses too. (Before, a backup
	// right after a restore was refused.)
	logDir := target.RaftLogDir(dir)
	names, err := os.ReadDir(logDir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(names) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the Raft log directory %s: %w", logDir, err)
	}
	return fmt.Errorf("the store %s has no record of its Raft log, although the target has run and its log %s holds %d files: the store lost data (a damaged write-ahead log?)",
		db.Dir(), logDir, len(names))
}

// Backup writes a file-level backup of the (stopped) MDT in dir to file.
// A regular file is written whole beside file and renamed over it only
// once synced, so a failed backup (a full disk) leaves an earlier backup
// at that path as it was. A store that fails its checks is refused
// unless force (checkBackupSource).
func Backup(e cli.Env, dir, file string, force bool) error {
	db, id, err := offlineMDT(dir, true)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := checkBackupSource(db, dir, id); err != nil {
		if !force {
			return fmt.Errorf("refusing to back up %s from %s: %w; a backup of this store would hold what is left of it, "+
				"and restored it would lose the files it lacks. Start the MDT with `nacre up`, which says what it finds; "+
				"with a replicated MDT, back up another replica (stop it first), whose store the others' Raft log keeps whole, "+
				"or replace this one (nacre replica replace); else keep the older backup you have. "+
				"`nacre mdt backup --force` backs up what the store holds anyway (the backup may be incomplete)", id.Label(), dir, err)
		}
		fmt.Fprintf(e.Stderr(), "warning: backing up %s although its store fails its checks (--force): %v; the backup may be incomplete\n", id.Label(), err)
	}
	var h *mdt.BackupHeader
	err = writeWhole(file, func(w io.Writer) (err error) {
		h, err = mdt.Backup(db, id, w)
		return err
	})
	if err != nil {
		return fmt.Errorf("backup of %s to %s: %w", id.Label(), file, err)
	}
	fmt.Fprintf(e.Out, "backed up %s (%d objects) to %s\n", id.Label(), h.Objects, file)
	return nil
}

// writeWhole writes path with fn. A regular file (or a new one) is
// written to a hidden temporary file in the same directory, synced, and
// renamed over path, with the directory synced: path is either as it
// was or whole, never truncated or half-written. Anything else (a device,
// a FIFO, a symbolic link: /dev/stdout) is written into directly, as it
// cannot be renamed over (renaming over a link replaced the link: with
// --out /dev/stdout, /dev/stdout itself). A new file gets the mode the
// umask leaves, as os.Create gives it (the backup holds every name).
func writeWhole(path string, fn func(io.Writer) error) error {
	mode := os.FileMode(0o666) &^ umask()
	st, err := os.Lstat(path)
	switch {
	case err == nil && !st.Mode().IsRegular():
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		err = fn(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	case err == nil:
		mode = st.Mode().Perm() // a backup replaced keeps its mode
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	d, base := filepath.Split(path)
	if d == "" {
		d = "."
	}
	f, err := os.CreateTemp(d, "."+base+".nacre-partial-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = fn(f)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename is durable only once the directory is synced.
	if err := target.SyncDir(d); err != nil {
		return fmt.Errorf("%s is written, but its directory could not be synced (a crash may lose it): %w", path, err)
	}
	return nil
}

// umask is the process's file mode creation mask.
func umask() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return os.FileMode(m)
}

// Restore restores a backup into the (stopped) MDT in dir; its object
// index is rebuilt by an OI scrub when the MDT next starts. The backup is
// read through and checked before the store is opened (opening creates a
// store where there is none), and a store this restore created is
// removed again if the restore fails: a failed restore leaves the
// directory as it was, and `nacre up` says what it said before.
func Restore(e cli.Env, dir, file string, force bool) error {
	id, err := stoppedMDT(dir)
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("restore of %s: %w", id.Label(), err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		// A pipe (ssh host cat backup | nacre mdt restore --from
		// /dev/stdin) is read twice, to check it and to restore it:
		// spooled to a file beside the target first.
		sp, err := spool(f, dir)
		if err != nil {
			return fmt.Errorf("restore of %s from %s: %w; %s was not changed", id.Label(), file, err, dir)
		}
		defer os.Remove(sp.Name())
		defer sp.Close()
		f = sp
	}
	h, err := mdt.CheckBackup(f)
	if err == nil {
		err = h.CheckFor(id)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return fmt.Errorf("restore of %s from %s: %w; %s was not changed", id.Label(), file, err, dir)
	}
	storeDir := target.StoreDir(dir)
	_, serr := os.Stat(storeDir)
	madeDir := errors.Is(serr, os.ErrNotExist)
	madeStore := madeDir || target.Empty(storeDir)
	db, id, err := offlineMDT(dir, false)
	if err != nil {
		return err
	}
	// The restored state starts a new Raft log: the old one goes right
	// before mdt.Restore wipes the group's state in the store.
	h, err = mdt.Restore(db, id, f, force, func() error { return raftlog.Remove(vfs.Default, target.RaftLogDir(dir)) })
	db.Close()
	if err != nil {
		err = fmt.Errorf("restore of %s from %s: %w", id.Label(), file, err)
		if madeStore {
			if rerr := removeStore(storeDir, madeDir); rerr != nil {
				err = fmt.Errorf("%w; and the store it created could not be removed: %v", err, rerr)
			}
		}
		return err
	}
	fmt.Fprintf(e.Out, "restored %s from %s (%d objects, backed up %s) with new local keys;\nits object index is rebuilt by an OI scrub when it starts (nacre lfsck query)\n",
		id.Label(), filepath.Base(file), h.Objects, h.Created.Format(time.RFC3339))
	return nil
}

// spool copies r to a new unlinked-on-return temporary file in dir,
// positioned at its start.
func spool(r io.Reader, dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".nacre-restore-*")
	if err != nil {
		return nil, fmt.Errorf("spool the backup: %w", err)
	}
	if _, err = io.Copy(f, r); err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("spool the backup to %s: %w", dir, err)
	}
	return f, nil
}

// removeStore removes a store a failed restore created: the directory
// too if it made it, else what is in it (the directory was there, empty:
// perhaps a mount point).
func removeStore(storeDir string, dirToo bool) error {
	if dirToo {
		return os.RemoveAll(storeDir)
	}
	entries, err := os.ReadDir(storeDir)
	if err != nil {
		return err
	}
	for _, en := range entries {
		if err := os.RemoveAll(filepath.Join(storeDir, en.Name())); err != nil {
			return err
		}
	}
	return nil
}
