package cli

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Local files that get writes, whole or not at all: into a temporary
// file beside the destination (partialName, which put names its remote
// temporary files with too), renamed over it once complete.

// partialSuffix marks the temporary files put and get write
// (".NAME.nacre-partial-RANDOM" in the destination's directory).
const partialSuffix = ".nacre-partial"

// partialName is the name of put's temporary file for name (at most 255
// bytes, so that any name that fits gets one).
func partialName(name string) string {
	var r [4]byte
	rand.Read(r[:])
	suffix := partialSuffix + "-" + hex.EncodeToString(r[:])
	if limit := 255 - 1 - len(suffix); len(name) > limit {
		name = name[:limit]
	}
	return "." + name + suffix
}

// localError is a failure to write Get's local file (not to read the
// remote one); its text names the local file.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }

func (e *localError) Unwrap() error { return e.err }

// localWriter makes the write errors of Get's local file localErrors.
type localWriter struct {
	w    io.Writer
	name string
}

func (l localWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if err != nil {
		err = &localError{fmt.Errorf("cannot write %s: %w", l.name, unwrapPath(err))}
	}
	return n, err
}

// writeLocal writes a local file (Get's destination) with fill: see Get.
// perm is the permission bits of a new file, before the umask. Its own
// errors, and fill's errors writing the file, are *localErrors naming
// local; fill's other errors are returned as they are.
func writeLocal(local string, perm os.FileMode, fill func(io.Writer) error) error {
	var fillErr error
	err := writeLocalFile(local, perm, func(w io.Writer) error {
		fillErr = fill(localWriter{w, local})
		return fillErr
	})
	if err == nil || err == fillErr {
		return err
	}
	return &localError{err}
}

// writeLocalFile is writeLocal; fill's errors are returned as they are.
func writeLocalFile(local string, perm os.FileMode, fill func(io.Writer) error) error {
	dest := local
	if lst, err := os.Lstat(local); err == nil && lst.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(local)
		if err != nil {
			link, _ := os.Readlink(local)
			if errors.Is(err, fs.ErrNotExist) {
				// As cp: a dangling link is not written through (it may
				// point where the user did not mean to create a file).
				return fmt.Errorf("cannot write %s: it is a symbolic link to %s, which does not exist (not writing through a dangling link; remove the link or create %s)", local, link, link)
			}
			return fmt.Errorf("cannot write %s (a symbolic link to %s): %w", local, link, unwrapPath(err))
		}
		dest = target
	}
	st, err := os.Stat(dest)
	switch {
	case err == nil && st.IsDir():
		return fmt.Errorf("cannot write %s: it is a directory", local)
	case err == nil && !st.Mode().IsRegular():
		// A FIFO, a device, a socket: write into it (`get F /dev/null`),
		// never replace it with a regular file.
		return writeInto(local, dest, fill)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	return replaceFile(local, dest, st, perm, fill)
}

// writeInto writes into the existing file dest (not a regular file),
// named local in messages.
func writeInto(local, dest string, fill func(io.Writer) error) error {
	// O_TRUNC as cp's; devices and FIFOs ignore it.
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	if err := fill(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	return nil
}

// replaceFile writes the regular file dest (old: its attributes, nil if it
// does not exist yet; local: its name in messages) through a temporary
// file in its directory, renamed over it once durable.
func replaceFile(local, dest string, old os.FileInfo, perm os.FileMode, fill func(io.Writer) error) (err error) {
	dir, name := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	// O_EXCL with the mode: the kernel applies the umask, and a temporary
	// name is never shared by two gets (or taken from another file).
	var f *os.File
	for try := 0; ; try++ {
		tmp := filepath.Join(dir, partialName(name))
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == 100 {
			break
		}
	}
	if err != nil {
		if old != nil {
			// The file may be writable when its directory is not (or is
			// no place for new files, as /proc).
			return fmt.Errorf("cannot write %s: cannot create the temporary file that replaces it in %s: %w", local, dir, unwrapPath(err))
		}
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if old != nil {
		// The file replaced keeps its owner (when allowed: only root may
		// give a file away) and then its mode, as cp writing into it would.
		if s, ok := old.Sys().(*syscall.Stat_t); ok && (int(s.Uid) != os.Geteuid() || int(s.Gid) != os.Getegid()) {
			f.Chown(int(s.Uid), int(s.Gid))
		}
		if err := f.Chmod(old.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)); err != nil {
			return fmt.Errorf("cannot write %s: give the temporary file %s its mode: %w", local, tmp, unwrapPath(err))
		}
	}
	// The file is new: blocks of zeros can stay holes (sparseFile).
	sf := &sparseFile{f: f}
	if err := fill(sf); err != nil {
		return err
	}
	if err := sf.finish(); err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("cannot write %s: rename the temporary file %s over it: %w", local, tmp, unwrapPath(err))
	}
	return nil
}

// unwrapPath drops an *fs.PathError's operation and path, for messages
// that name the file themselves.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
