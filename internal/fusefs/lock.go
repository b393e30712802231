package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
)

func lockSpec(in *fuse.LkIn) client.LockSpec {
	l := client.LockSpec{Flock: in.LkFlags&fuse.LK_FLOCK != 0, Owner: in.Owner, Handle: in.Fh, Pid: in.Lk.Pid,
		Start: in.Lk.Start, End: in.Lk.End}
	switch in.Lk.Typ {
	case syscall.F_RDLCK:
		l.Type = pb.LockType_LOCK_READ
	case syscall.F_WRLCK:
		l.Type = pb.LockType_LOCK_WRITE
	default:
		l.Type = pb.LockType_LOCK_UNLOCK
	}
	return l
}

// GetLk is F_GETLK (and F_OFD_GETLK): the first conflicting lock of any
// client.
func (fs *FS) GetLk(cancel <-chan struct{}, in *fuse.LkIn, out *fuse.LkOut) fuse.Status {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil || fs.sess == nil {
		return fuse.Status(syscall.ENOLCK)
	}
	l, found, err := fs.sess.GetLock(context.Background(), h.of.fid, lockSpec(in))
	if err != nil {
		return fs.status("getlk", err)
	}
	if !found {
		out.Lk = fuse.FileLock{Typ: syscall.F_UNLCK}
		return fuse.OK
	}
	out.Lk = fuse.FileLock{Start: l.Start, End: l.End, Pid: l.Pid, Typ: syscall.F_RDLCK}
	if l.Type == pb.LockType_LOCK_WRITE {
		out.Lk.Typ = syscall.F_WRLCK
	}
	return fuse.OK
}

// SetLk is F_SETLK, flock(LOCK_NB) and unlocking.
func (fs *FS) SetLk(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return fs.setLk(cancel, in, false)
}

// SetLkw is F_SETLKW and blocking flock: it waits at the MDS until the
// lock is granted or the caller is interrupted.
func (fs *FS) SetLkw(cancel <-chan struct{}, in *fuse.LkIn) fuse.Status {
	return fs.setLk(cancel, in, true)
}

// Locks are cache coherency points, as on NFS: a client's writes reach
// the OSTs before any change of its locks on the file (unlocking or
// converting one can let another client in), and a client that is granted
// a lock drops what its kernel caches of the file (pages, attributes) and
// takes the file's end afresh for its next append, so it reads and
// appends to what the previous holder wrote. Without this, two clients
// that keep a file open and take turns under a lock (a shared log,
// SQLite, ROMIO's data sieving) would read stale pages and append over
// each other's records.
func (fs *FS) setLk(cancel <-chan struct{}, in *fuse.LkIn, wait bool) fuse.Status {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil || fs.sess == nil {
		return fuse.Status(syscall.ENOLCK)
	}
	l := lockSpec(in)
	if l.Type != pb.LockType_LOCK_UNLOCK {
		h.of.locked.Store(true)
	} else {
		wait = false
	}
	h.of.wb.fence()
	err := fs.sess.SetLock(context.Background(), h.of.fid, l, wait, cancel)
	if err == nil && l.Type != pb.LockType_LOCK_UNLOCK {
		fs.lockGranted(h)
	}
	return fs.status("setlk", err)
}

// lockGranted drops the kernel's pages and attributes of a file this
// client was just granted a lock on (another client may have changed it
// under the lock before), and has the next append fetch the file's end.
func (fs *FS) lockGranted(h *handle) {
	h.of.endStale()
	fs.mu.Lock()
	n := h.n
	n.kValid = false
	n.ino = nil
	fs.mu.Unlock()
	if fs.srv != nil {
		fs.srv.InodeNotify(n.id, 0, 0)
	}
}
