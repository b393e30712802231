package fusefs

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fault"
	"nacre/internal/fid"
)

// openFile is a regular file this mount has open, shared by all of its
// handles so that their writes and sizes agree.
type openFile struct {
	fid fid.FID
	f   *client.File
	// rw: writes, truncates and punches share it; flush (which records
	// the size and clears the MDT's dirty flag) excludes them.
	rw     sync.RWMutex
	wb     *writeBehind
	refs   int  // handles (under FS.mu)
	orphan bool // may be an orphan: release it at the last close (FS.mu)
	locked atomic.Bool
	ae     appendEnd // where appends go (append.go)
	// appending: appends hold it shared from their token check until their
	// write is queued; a revocation of the token exclusively (append.go).
	appending sync.RWMutex
}

// shared runs fn with rw held shared (a write, truncate or punch), and
// releases it however fn ends: a panic in a punch, recovered higher up,
// left rw held, and every later flush and close of the file hung for good
// in an uninterruptible wait.
func (of *openFile) shared(fn func() error) error {
	of.rw.RLock()
	defer of.rw.RUnlock()
	return fn()
}

// handle is an open file or directory (a FUSE file handle).
type handle struct {
	id    uint64
	n     *node
	of    *openFile
	dir   *dirHandle
	flags uint32 // open(2) flags
	// appendDirect: opened O_APPEND for writing, so FOPEN_DIRECT_IO, and
	// the daemon places its appends (append.go).
	appendDirect bool
	// errSeen: the failures of the file's writes behind this handle was
	// told of, or that came before it was opened (writeBehind.err).
	errSeen uint64
}

// writable says whether h was opened for writing.
func (h *handle) writable() bool { return h.flags&syscall.O_ACCMODE != syscall.O_RDONLY }

// syncWrites: the handle's writes are written through (and for O_SYNC
// and O_DSYNC made durable) before they are acknowledged.
func (h *handle) syncWrites() bool {
	return h.flags&(syscall.O_SYNC|syscall.O_DSYNC|syscall.O_DIRECT) != 0
}

func (fs *FS) handle(fh uint64) *handle {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.handles[fh]
}

// openFIDsLocked lists the files and directories this mount has open or is
// opening (fs.mu held).
func (fs *FS) openFIDsLocked() []fid.FID {
	if len(fs.files) == 0 && len(fs.opening) == 0 && len(fs.dirs) == 0 {
		return nil
	}
	out := make([]fid.FID, 0, len(fs.files)+len(fs.opening)+len(fs.dirs))
	for f := range fs.files {
		out = append(out, f)
	}
	for f := range fs.dirs {
		if fs.files[f] == nil {
			out = append(out, f)
		}
	}
	for f := range fs.opening {
		if fs.files[f] == nil {
			out = append(out, f)
		}
	}
	return out
}

// beginOpen registers an open in progress and waits for the unlinks and
// renames that started before it (they could not know of it).
func (fs *FS) beginOpen(f fid.FID) {
	fs.mu.Lock()
	for fs.releasing[f] != nil || fs.closing[f] != nil {
		ch := fs.releasing[f]
		if ch == nil {
			ch = fs.closing[f]
		}
		fs.mu.Unlock()
		<-ch
		fs.mu.Lock()
	}
	fs.opening[f]++
	fs.mu.Unlock()
	fs.nsGate.Lock()
	fs.nsGate.Unlock()
}

func (fs *FS) endOpen(f fid.FID) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.opening[f] <= 1 {
		delete(fs.opening, f)
	} else {
		fs.opening[f]--
	}
}

// openHandle opens a handle on a regular file with fresh attributes. It
// reports whether the kernel may keep its page cache: only if the file
// did not change since the kernel last heard of it.
func (fs *FS) openHandle(n *node, ino *pb.Inode, flags uint32) (*handle, bool) {
	f := fid.FromPB(ino.Fid)
	fs.mu.Lock()
	of := fs.files[f]
	if of == nil {
		of = &openFile{fid: f, f: fs.c.OpenInode(ino), orphan: fs.inherit[f], wb: newWriteBehind(fs.budget)}
		of.ae.end = ino.Size
		delete(fs.inherit, f)
		fs.files[f] = of
	} else {
		of.f.Refresh(ino)
		of.ae.mu.Lock()
		stale := of.ae.stale
		of.ae.mu.Unlock()
		if stale {
			of.setEnd(ino.Size)
		} else {
			of.grow(ino.Size)
		}
	}
	of.refs++
	dirty := ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0
	keep := n.kValid && n.kSize == ino.Size && n.kMtime == ino.MtimeNs && !dirty
	stale := n.kValid && !keep
	h := &handle{id: fs.nextFh, n: n, of: of, flags: flags, appendDirect: appendDirect(flags)}
	of.wb.mu.Lock()
	h.errSeen = of.wb.errSeq
	of.wb.mu.Unlock()
	fs.nextFh++
	fs.handles[h.id] = h
	n.kSize, n.kMtime, n.kValid = ino.Size, ino.MtimeNs, true
	fs.mu.Unlock()
	if stale && fs.srv != nil {
		// The kernel's size may be stale (its attribute timeout has not
		// run out): make it ask again before the first read.
		fs.srv.InodeNotify(n.id, -1, 0)
	}
	return h, keep
}

func openFlags(h *handle, keep bool) uint32 {
	fl := uint32(fuse.FOPEN_PARALLEL_DIRECT_WRITES)
	if keep {
		fl |= fuse.FOPEN_KEEP_CACHE
	}
	if h.appendDirect {
		fl |= fuse.FOPEN_DIRECT_IO
	}
	return fl
}

// Open opens a regular file (close-to-open: with fresh attributes).
func (fs *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.NodeId == nacreID || in.NodeId == fidDirID {
		return fuse.Status(syscall.EISDIR)
	}
	n := fs.node(in.NodeId)
	if n == nil {
		return fuse.ENOENT
	}
	names := fs.namesOf(n)
	st := fs.open(cancel, in, out, n)
	if st == staleOpen {
		return fs.staleRetry(names, in)
	}
	return st
}

func (fs *FS) open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut, n *node) fuse.Status {
	cred := fs.cred(&in.InHeader)
	ctx := client.WithCred(context.Background(), cred)
	fs.beginOpen(n.fid)
	defer fs.endOpen(n.fid)
	// The first open here tells the MDS (so that another client's
	// removal keeps the file while it is open here), which answers with
	// fresh attributes; otherwise attributes fetched moments ago (by the
	// lookup of this open) serve, and others are fetched again
	// (close-to-open).
	ino, notOpen, st := fs.registerOpen(ctx, n.fid)
	// Tests hold the open here, past another handle's last release.
	fault.Hit("fuse.open.registered")
	opened := false
	defer func() {
		if notOpen && !opened {
			// The MDS was told of an open (now, or before a close
			// still queued) that failed: take it back.
			fs.queueClose(n.fid)
		}
	}()
	if st == fuse.ENOENT && notOpen {
		return staleOpen
	}
	if !st.Ok() {
		return st
	}
	if vino, st := fs.checkName(ctx, n); !st.Ok() {
		return st
	} else if ino == nil {
		ino = vino
	}
	if ino == nil && !notOpen {
		// Open here already: the name led to it moments ago, or the
		// attributes would have been invalidated.
		_, ino = fs.cached(in.NodeId, true)
	} else if ino == nil {
		// Not open here, and the MDS still has it open here (a close
		// not told yet): attributes fetched just now serve, as the name
		// does (checkName). They are the kernel's GETATTR for this
		// open's permission check, which it sends once its attributes
		// expire.
		ino = fs.justFetched(in.NodeId)
	}
	if ino == nil {
		var err error
		if ino, err = fs.attr(ctx, n.fid); err != nil {
			if notOpen && errors.Is(err, syscall.ENOENT) {
				return staleOpen
			}
			return fs.status("open", err)
		}
	}
	if notOpen && ino.Nlink == 0 && ino.Mode&syscall.S_IFMT == syscall.S_IFREG {
		return staleOpen
	}
	switch ino.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
	case syscall.S_IFDIR:
		return fuse.Status(syscall.EISDIR)
	default:
		return fuse.Status(syscall.ENXIO)
	}
	if !fs.mayAccess(ctx, ino, cred, openMask(in.Flags)) {
		return fuse.EACCES
	}
	h, keep := fs.openHandle(n, ino, in.Flags)
	// Every way to ino above asked for the whole size (or found the
	// file open here, its size kept current): the first read need not
	// ask again.
	h.of.f.Sized()
	// O_TRUNC empties the file whatever the access mode, as Linux does
	// (openMask asked for write permission).
	if in.Flags&syscall.O_TRUNC != 0 {
		if st := fs.openTruncate(ctx, &in.InHeader, h, ino); !st.Ok() {
			fs.dropHandle(h)
			return st
		}
		keep = false
	}
	out.Fh = h.id
	out.OpenFlags = openFlags(h, keep)
	opened = true
	return fuse.OK
}

// openTruncate is O_TRUNC of an existing file (ino as opened): it is
// emptied, and one that is empty already gets new modification and change
// times, as POSIX asks of every O_TRUNC open (`: > stamp` marks a time).
// A caller without CAP_FSETID also clears the set-user-ID bit and the
// set-group-ID bit of a group-executable file, as Linux's truncate does:
// with ATOMIC_O_TRUNC the kernel leaves that to the file system.
func (fs *FS) openTruncate(ctx context.Context, hdr *fuse.InHeader, h *handle, ino *pb.Inode) fuse.Status {
	if ino.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 && !capFSETID(hdr) {
		// By the mode just fetched: "no such bits" cached before (a
		// chmod u+s elsewhere since) must not skip it.
		if err := fs.clearSetID(ctx, h.n, ino.Mode); err != nil {
			return fs.status("truncate", err)
		}
	}
	if ino.Size > 0 {
		return fs.truncateHandle(ctx, h, 0)
	}
	defer fs.forgetFIDAttrs(h.of.fid)
	// With the change time: the modification's own times, a writer's,
	// not utimensat's choice of one time, the owner's (internal/mdt).
	if _, err := fs.c.Setattr(ctx, &pb.SetattrOp{Fid: h.of.fid.PB(), Valid: modifiedNow}); err != nil {
		return fs.status("truncate", err)
	}
	if fs.sess != nil {
		fs.sess.Invalidate(ctx, []fid.FID{h.of.fid})
	}
	return fuse.OK
}

func (fs *FS) truncateHandle(ctx context.Context, h *handle, size uint64) fuse.Status {
	defer fs.forgetFIDAttrs(h.of.fid)
	h.of.wb.fence()
	err := h.of.shared(func() error { return h.of.f.Truncate(ctx, size) })
	if err != nil {
		return fs.status("truncate", err)
	}
	h.of.setEnd(size)
	if fs.sess != nil {
		fs.sess.Invalidate(ctx, []fid.FID{h.of.fid})
	}
	return fuse.OK
}

// dropHandle forgets a handle whose open failed.
func (fs *FS) dropHandle(h *handle) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.handles, h.id)
	if h.of != nil {
		h.of.refs--
		if h.of.refs == 0 && fs.files[h.of.fid] == h.of {
			delete(fs.files, h.of.fid)
		}
	}
}

// Create makes (or, without O_EXCL, opens an existing) regular file.
func (fs *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	return fs.createFile(in, name, out, 1)
}

func (fs *FS) createFile(in *fuse.CreateIn, name string, out *fuse.CreateOut, attempt int) fuse.Status {
	pf, st := fs.fidOf(in.NodeId)
	if !st.Ok() {
		return st
	}
	if in.NodeId == rootID && name == nacreDirName {
		return fuse.Status(syscall.EISDIR)
	}
	cred := fs.cred(&in.InHeader)
	ctx := client.WithCred(context.Background(), cred)
	rep, err := fs.c.CreateReply(ctx, pf, name, in.Mode, client.CreateOpts{Exclusive: in.Flags&syscall.O_EXCL != 0, Umask: in.Umask, Open: fs.sess != nil})
	fs.namesChanged(pf, name, true, err)
	if err != nil {
		return fs.status("create", err)
	}
	ino, existed := rep.Inode, rep.Existed
	if existed {
		if err := fs.c.Glimpse(ctx, ino); err != nil {
			return fs.status("create", err)
		}
		if !fs.mayAccess(ctx, ino, cred, openMask(in.Flags)) {
			return fuse.EACCES
		}
	}
	if !existed {
		fs.dirChanged(in.NodeId, 0, ino)
	}
	if rep.Opened {
		// The MDS recorded the open with the create; a close of this
		// file still queued here has nothing more to say.
		f := fid.FromPB(ino.Fid)
		fs.mu.Lock()
		delete(fs.closeq, f)
		closing := fs.closing[f]
		fs.mu.Unlock()
		if closing != nil && existed {
			// A close of this existing file was on its way to the MDS
			// as the create recorded the open, and the MDS keeps
			// whichever it heard last: say the open again once the
			// close is through. Should a removal through another
			// client come in between, the name no longer holds this
			// file: create again.
			<-closing
			if _, err := fs.sess.Opened(ctx, f); err != nil {
				if errors.Is(err, syscall.ENOENT) && attempt < 3 {
					return fs.createFile(in, name, out, attempt+1)
				}
				return fs.status("create", err)
			}
		}
	} else if fresh, _, st := fs.registerOpen(ctx, fid.FromPB(ino.Fid)); !st.Ok() {
		return st
	} else if fresh != nil && existed {
		ino = fresh
	}
	n := fs.fillNamed(ino, &out.EntryOut, pf, name)
	h, keep := fs.openHandle(n, ino, in.Flags)
	if existed && in.Flags&syscall.O_TRUNC != 0 {
		if st := fs.openTruncate(ctx, &in.InHeader, h, ino); !st.Ok() {
			fs.dropHandle(h)
			return st
		}
		keep = false
	}
	out.OpenOut.Fh = h.id
	out.OpenOut.OpenFlags = openFlags(h, keep && existed)
	return fuse.OK
}

// Tmpfile makes an unnamed file (O_TMPFILE): an orphan until it is linked
// or closed.
func (fs *FS) Tmpfile(cancel <-chan struct{}, in *fuse.CreateIn, out *fuse.CreateOut) fuse.Status {
	pf, st := fs.fidOf(in.NodeId)
	if !st.Ok() {
		return st
	}
	if fs.sess == nil {
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	ctx := fs.ctx(&in.InHeader)
	ino, err := fs.sess.Tmpfile(ctx, pf, in.Mode&0o7777, in.Umask, nil)
	if err != nil {
		return fs.status("tmpfile", err)
	}
	n := fs.fillEntry(ino, &out.EntryOut)
	h, _ := fs.openHandle(n, ino, in.Flags)
	fs.mu.Lock()
	h.of.orphan = true
	fs.mu.Unlock()
	out.OpenOut.Fh = h.id
	out.OpenOut.OpenFlags = openFlags(h, false)
	return fuse.OK
}

// Read reads from the OSTs (the kernel page cache is in front).
func (fs *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil {
		return nil, fuse.EBADF
	}
	if h.of.wb.busy() {
		h.of.wb.fence()
	}
	sz := min(int(in.Size), len(buf))
	n, err := h.of.f.ReadAt(context.Background(), buf[:sz], in.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fs.status("read", err)
	}
	return fuse.ReadResultData(buf[:n]), fuse.OK
}

// Write writes to the OSTs, in the background unless the file was opened
// O_SYNC, O_DSYNC or O_DIRECT (writeback.go).
func (fs *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil {
		return 0, fuse.EBADF
	}
	of := h.of
	ctx := fs.ctx(&in.InHeader)
	off := in.Offset // in is reused once Write returns
	if err := of.wb.errFor(h, true); err != nil {
		return 0, fs.status("write", err) // a write behind failed
	}
	if h.appendDirect && in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		if err := fs.killSetID(ctx, h.n); err != nil {
			return 0, fs.status("write", err)
		}
	}
	appended := h.appending(in)
	if appended {
		done, err := fs.holdAppendToken(ctx, of)
		if err != nil {
			return 0, fs.status("write", err)
		}
		defer done()
		if off, err = fs.appendAt(ctx, of, uint64(len(data))); err != nil {
			return 0, fs.status("write", err)
		}
	} else {
		of.grow(off + uint64(len(data)))
	}
	write := func(p []byte) error {
		of.rw.RLock()
		defer of.rw.RUnlock()
		_, err := of.f.WriteAt(ctx, p, off)
		return err
	}
	// Far out (a file offset from 1 TiB) a write may pass the largest
	// object an OST holds (EFBIG): it goes synchronously, so that the
	// error reaches write(2), not a close nobody checks.
	if !h.syncWrites() && off+uint64(len(data)) < syncWritesFrom {
		if err := fs.writeAsync(of, data, off, appended, write); err != nil {
			return 0, fs.status("write", err)
		}
		return uint32(len(data)), fuse.OK
	}
	of.wb.fence()
	if err := of.wb.errFor(h, true); err != nil {
		return 0, fs.status("write", err)
	}
	if err := write(data); err != nil {
		if appended {
			// The bytes reserved at the end were not written: the next
			// append asks where the file ends instead of leaving a hole.
			of.endStale()
		}
		return 0, fs.status("write", err)
	}
	if h.flags&(syscall.O_SYNC|syscall.O_DSYNC) != 0 {
		if err := of.f.Sync(ctx); err != nil {
			return 0, fs.status("write", err)
		}
	}
	return uint32(len(data)), fuse.OK
}

// syncWritesFrom is the file offset from which writes are not written
// behind (Write).
const syncWritesFrom = 1 << 40

// Flush is close(2): the caller's POSIX locks on the file go, and data
// this mount wrote is made durable with its size and mtime recorded, and
// other clients drop their caches of the file (close-to-open).
func (fs *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil {
		return fuse.OK
	}
	ctx := context.Background()
	of := h.of
	// The data first: a client that gets one of these locks next must
	// read it (lock.go). A handle only reading has nothing to make
	// durable, nor a failed write to hear of (the last close, Release,
	// flushes what other handles left).
	st := fuse.OK
	if h.writable() {
		st = fs.flushFile(ctx, of)
		if err := of.wb.errFor(h, false); st.Ok() && err != nil {
			st = fs.status("close", err) // a write behind failed (writeBehind.err)
		}
	}
	if of.locked.Load() && in.LockOwner != 0 && fs.sess != nil {
		fs.sess.ReleaseLocks(ctx, of.fid, in.LockOwner, 0, 0)
	}
	return st
}

func (fs *FS) flushFile(ctx context.Context, of *openFile) fuse.Status {
	of.wb.fence()
	if !of.f.Unsynced() {
		return fuse.OK // (a truncate through the handle is synced too)
	}
	of.rw.Lock()
	err := of.f.Sync(ctx)
	if err == nil {
		if cerr := of.f.Close(ctx); cerr != nil {
			// The data is durable; only the exact size and mtime are
			// not recorded: the MDT takes them from the objects while
			// the file is marked dirty, and a later close records them.
			// Not a failure of the close (it made every byte durable).
			fs.log.Warn("record the size of a closed file", "fid", of.fid, "err", cerr)
		}
	}
	of.rw.Unlock()
	fs.forgetFIDAttrs(of.fid)
	if err != nil {
		// Written data may be lost: every handle hears of it.
		of.wb.fail(err)
		return fs.status("close", err)
	}
	if fs.sess != nil {
		ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := fs.sess.Invalidate(ictx, []fid.FID{of.fid}); err != nil {
			fs.log.Warn("tell other clients of a change", "fid", of.fid, "err", err)
		}
		cancel()
	}
	return fuse.OK
}

// Fsync makes the file's written data durable (fdatasync too: the size
// needs no separate sync, the MDT takes it from the objects while dirty),
// and the changes the MDT answered before syncing them (its creation
// among them; the durability contract).
func (fs *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil {
		return fs.status("fsync", fs.c.SyncMDTs(context.Background()))
	}
	h.of.wb.fence()
	err := h.of.f.Sync(context.Background())
	if err == nil {
		err = fs.c.SyncMDTs(context.Background())
	}
	if err != nil {
		h.of.wb.fail(err) // for the other handles too (writeBehind.err)
	}
	// The failure of a write behind, or the sync's own, once.
	if werr := h.of.wb.errFor(h, true); werr != nil {
		err = werr
	}
	return fs.status("fsync", err)
}

// Release is the last close of an open file: its flock and OFD locks go,
// and at the last handle the file is flushed (mmap writes may arrive
// after close) and released if it became an orphan.
func (fs *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	fs.mu.Lock()
	h := fs.handles[in.Fh]
	delete(fs.handles, in.Fh)
	if h == nil || h.of == nil {
		fs.mu.Unlock()
		return
	}
	of := h.of
	of.refs--
	last := of.refs == 0
	if last && fs.files[of.fid] == of {
		delete(fs.files, of.fid)
	}
	orphan := of.orphan && last
	if last && fs.closedInFlight(of.fid, of.orphan) {
		orphan = false // the unlink or rename in flight decides (orphans.go)
	} else if orphan && fs.opening[of.fid] > 0 {
		// An open of it is under way: it will release the orphan.
		fs.inherit[of.fid] = true
		orphan = false
	}
	var released chan struct{}
	if orphan {
		released = make(chan struct{})
		fs.releasing[of.fid] = released
	}
	fs.mu.Unlock()
	if last && fs.sess != nil {
		// After the orphan's release (deferred calls run last first).
		defer fs.queueClose(of.fid)
	}
	if orphan {
		defer func() {
			fs.mu.Lock()
			delete(fs.releasing, of.fid)
			fs.mu.Unlock()
			close(released)
		}()
	}
	ctx, cancelCtx := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancelCtx()
	// The data reaches the OSTs before the locks go (lock.go).
	if last {
		if st := fs.flushFile(ctx, of); !st.Ok() {
			fs.log.Warn("flush at release failed", "fid", of.fid, "status", st)
		}
	} else {
		of.wb.fence()
	}
	if of.locked.Load() && fs.sess != nil {
		var flockOwner uint64
		if in.ReleaseFlags&fuse.FUSE_RELEASE_FLOCK_UNLOCK != 0 {
			flockOwner = in.LockOwner
		}
		fs.sess.ReleaseLocks(ctx, of.fid, 0, flockOwner, in.Fh)
	}
	if !last {
		return
	}
	fs.releaseAppendToken(of)
	if orphan && fs.sess != nil {
		if err := fs.sess.ReleaseOrphans(ctx, []fid.FID{of.fid}); err != nil {
			fs.log.Warn("release open-unlinked file", "fid", of.fid, "err", err)
		}
	}
}

// Fallocate supports mode 0 (extends the size; space is not reserved),
// FALLOC_FL_KEEP_SIZE (nothing to do), PUNCH_HOLE and ZERO_RANGE.
func (fs *FS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	const (
		keepSize  = 0x01
		punchHole = 0x02
		zeroRange = 0x10
	)
	h := fs.handle(in.Fh)
	if h == nil || h.of == nil {
		return fuse.EBADF
	}
	of := h.of
	ctx := fs.ctx(&in.InHeader)
	defer fs.forgetFIDAttrs(of.fid)
	of.wb.fence()
	end := in.Offset + in.Length
	// As on ext4, a successful fallocate moves mtime and ctime, also when
	// it allocated nothing new: a truncate that extends does it, else
	// touch.
	touch := func() fuse.Status {
		_, err := fs.c.Setattr(ctx, &pb.SetattrOp{Fid: of.fid.PB(), Valid: modifiedNow})
		return fs.status("fallocate", err)
	}
	extend := func() fuse.Status {
		if in.Mode&keepSize != 0 {
			return touch()
		}
		size, err := of.f.Size(ctx)
		if err != nil {
			return fs.status("fallocate", err)
		}
		if end <= size {
			return touch()
		}
		err = of.shared(func() error { return of.f.Truncate(ctx, end) })
		if err == nil {
			of.grow(end)
		}
		return fs.status("fallocate", err)
	}
	switch in.Mode &^ keepSize {
	case 0:
		return extend()
	case punchHole, zeroRange:
		if in.Mode&punchHole != 0 && in.Mode&keepSize == 0 {
			return fuse.EINVAL
		}
		err := of.shared(func() error { return of.f.Punch(ctx, in.Offset, in.Length) })
		if err != nil {
			return fs.status("punch", err)
		}
		return extend()
	}
	return fuse.Status(syscall.EOPNOTSUPP)
}

// registerOpen tells the MDS of this mount's first open of f (Session.Opened)
// and returns f's attributes as of then; nil if f is open here already, the
// mount has no session, or the MDS does not know opens, and ENOENT if a
// removal through another client came first. It also says how the file
// stood here: notOpen, it was not open here (the MDS was told now, or there is no
// session), or it was closed here moments ago and the MDS not told yet.
// Either way nothing on this mount holds it, and the open needs fresh
// attributes (close-to-open, as NFS asks the server at every open): the
// name the kernel still caches may have been removed or renamed over by
// another client since.
func (fs *FS) registerOpen(ctx context.Context, f fid.FID) (*pb.Inode, bool, fuse.Status) {
	fs.mu.Lock()
	first := fs.files[f] == nil
	notOpen := first
	if _, queued := fs.closeq[f]; first && queued {
		// Closed here moments ago and not told yet: the MDS still has
		// it as open here.
		delete(fs.closeq, f)
		first = false
	}
	fs.mu.Unlock()
	if !first || fs.sess == nil {
		return nil, notOpen, fuse.OK
	}
	ino, err := fs.sess.Opened(ctx, f)
	if err != nil {
		return nil, notOpen, fs.status("open", err)
	}
	if ino != nil && ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0 {
		return nil, notOpen, fuse.OK // its size comes from the OSTs: fetch it as before
	}
	return ino, notOpen, fuse.OK
}

// nameFresh: a name the kernel learnt this recently is the one it opens
// through (the lookup of this open's path walk); an older one it may
// have cached for the entry timeout, while another client moved it.
const nameFresh = 20 * time.Millisecond

// checkName verifies that the names the kernel knows n by still lead to
// n, unless it learnt one just now, and returns n's attributes as fetched
// with them (nil: no check was needed). A name that another client moved
// or removed meanwhile answers staleOpen, and the kernel looks it up
// again: without this, an open of "a" on one mount within a second of
// `mv a b` on another opened b and wrote into it. This is what NFS's
// close-to-open pays too (its open revalidates the name): one call to
// the MDS for an open through a name the kernel did not just look up.
// A name that failed is forgotten, so an open that reaches n without a
// name (a working directory, a /proc/PID/fd link) succeeds on the
// kernel's retry, and the retry through a name looks it up afresh.
func (fs *FS) checkName(ctx context.Context, n *node) (*pb.Inode, fuse.Status) {
	fs.mu.Lock()
	now := time.Now()
	var check []via
	fresh := now.Sub(n.checked) < nameFresh
	for _, v := range n.vias {
		switch age := now.Sub(v.at); {
		case v.locked && fs.knownPresent(v.parent, v.name):
			// No other client changed the name: it is still under the
			// lookup lock it was given under.
		case v.locked:
			// The lock is gone, and the kernel may keep the name until
			// the invalidation of its entry lands.
			check = append(check, v)
		case age >= fs.o.EntryTimeout:
			// The kernel looks it up again before using it.
		case age < nameFresh:
			fresh = true // the lookup of this open's path walk
		default:
			check = append(check, v)
		}
	}
	fs.mu.Unlock()
	if fresh || len(check) == 0 {
		return nil, fuse.OK
	}
	fs.fenceOwnWrites(n.fid)
	// Every name the kernel may have used (hard links): FUSE does not say
	// which. As root: the kernel checked the caller's search permissions
	// on the way, and an open through a working directory need not have
	// any on its parent.
	var ino *pb.Inode
	stale := false
	for _, v := range check {
		got, err := fs.c.Lookup(client.WithCred(ctx, &pb.Cred{}), v.parent, v.name)
		if err != nil && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ENOTDIR) {
			return nil, fs.status("open", err)
		}
		if err != nil || fid.FromPB(got.Fid) != n.fid {
			stale = true
			fs.unnamed(n, v.parent, v.name)
			continue
		}
		if ino == nil {
			ino = got
		}
	}
	if stale {
		return nil, staleOpen
	}
	fs.mu.Lock()
	n.checked = time.Now()
	fs.mu.Unlock()
	if err := fs.c.Glimpse(ctx, ino); err != nil {
		return nil, fs.status("open", err)
	}
	fs.ownSize(ino)
	return ino, fuse.OK
}

// staleName is a name an open came through, and the process opening.
type staleName struct {
	parent fid.FID
	name   string
	pid    uint32
}

// staleRetryWindow is how soon after a stale open the same process's
// open through the same name is taken for the kernel's retry.
const staleRetryWindow = time.Second

// namesOf returns the names the kernel may have reached n through.
func (fs *FS) namesOf(n *node) []via {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return slices.Clone(n.vias)
}

// staleRetry answers an open that found its file gone (staleOpen). The
// kernel retries an open that failed with ESTALE once, looking the name
// up afresh; if the file that lookup found goes too before the retry's
// open (a name replaced again and again, as by a writer that renames a
// new version over it), a second ESTALE would reach the application,
// which no local file system returns. So the retry, the same process's
// open through the same name within a second of a stale one, answers
// ENOENT: the file it named was removed as it was opened. (FUSE's OPEN
// does not carry O_CREAT, so an open(O_CREAT) whose retry loses the race
// fails with ENOENT too, where it failed with ESTALE.)
func (fs *FS) staleRetry(names []via, in *fuse.OpenIn) fuse.Status {
	now := time.Now()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if len(fs.staleNames) > 1024 {
		for k, at := range fs.staleNames {
			if now.Sub(at) > staleRetryWindow {
				delete(fs.staleNames, k)
			}
		}
	}
	retry := false
	for _, v := range names {
		k := staleName{v.parent, v.name, in.Caller.Pid}
		if at, ok := fs.staleNames[k]; ok && now.Sub(at) < staleRetryWindow {
			retry = true
		}
		fs.staleNames[k] = now
	}
	if retry {
		return fuse.ENOENT
	}
	return staleOpen
}

// staleOpen is the status of an open that reached, through a name the
// kernel still caches (for the entry timeout), a file that another
// client's removal or rename took the name from: its object is gone, or
// it has no name any more and is only kept for opens elsewhere. ESTALE
// makes the kernel look the name up again (LOOKUP_REVAL) and open what it
// names now, or create it (O_CREAT), as NFS's close-to-open does; opening
// the unnamed file would read old data and lose what is written.
const staleOpen = fuse.Status(syscall.ESTALE)

// closeBatchDelay is how long a last close waits to be told to the MDS,
// with the others of that moment: a file opened again meanwhile needs no
// message at all (an application that writes files and reads them back,
// or opens one file again and again, pays the open's round trip to the
// MDS once). The price: a file another client removes is kept that much
// longer after its last close here.
const closeBatchDelay = 5 * time.Second

// queueClose tells the MDS, soon, that f is closed here.
func (fs *FS) queueClose(f fid.FID) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.files[f] != nil {
		return // opened again already
	}
	fs.closeq[f] = time.Now()
	if !fs.closeTimer {
		fs.closeTimer = true
		time.AfterFunc(closeBatchDelay/5, fs.sendCloses)
	}
}

// sendCloses tells the MDS the closes queued for closeBatchDelay, and
// looks again later while others wait. An open of one being told waits
// until it is (beginOpen), so that the MDS hears the close before the
// open.
func (fs *FS) sendCloses() { fs.tellCloses(nil) }

// AskClose is the MDS asking for the closes of files that another client
// removed while the MDS counted them open here (SessionDown.ask_close):
// those closed here, their closes queued, are told now, and the MDS frees
// their space at once instead of when the batch goes; those open here
// stay open.
func (fs *FS) AskClose(fids []fid.FID) {
	asked := make(map[fid.FID]bool, len(fids))
	for _, f := range fids {
		asked[f] = true
	}
	go fs.tellCloses(asked)
}

// tellCloses tells the MDS the queued closes that are due: queued for
// closeBatchDelay, or asked for. The timer's round (asked nil) looks
// again later while others wait.
func (fs *FS) tellCloses(asked map[fid.FID]bool) {
	if fs.sess == nil {
		return
	}
	fs.mu.Lock()
	var fids []fid.FID
	done := make(chan struct{})
	for f, at := range fs.closeq {
		if fs.files[f] != nil {
			// Open again, by an open that found the file open here (so
			// told the MDS nothing) and crossed the last release of the
			// other handle, which queued this close: the MDS still has
			// the file open here, as it should. Telling it the close lost
			// the file to a removal through another client while open
			// here (TestFuseOpenCrossingTheLastReleaseKeepsTheOpen).
			delete(fs.closeq, f)
			continue
		}
		if fs.opening[f] > 0 {
			continue // such an open under way: it decides (next round)
		}
		if time.Since(at) >= closeBatchDelay || asked[f] {
			fids = append(fids, f)
			fs.closing[f] = done
			delete(fs.closeq, f)
		}
	}
	if asked == nil {
		if len(fs.closeq) > 0 {
			time.AfterFunc(closeBatchDelay/5, fs.sendCloses)
		} else {
			fs.closeTimer = false
		}
	}
	fs.mu.Unlock()
	if len(fids) == 0 {
		close(done)
		return
	}
	// Tests widen the window in which an open can cross the closes.
	fault.Hit("fuse.closes.send")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	fs.sess.Closed(ctx, fids)
	cancel()
	fs.mu.Lock()
	for _, f := range fids {
		if fs.closing[f] == done {
			delete(fs.closing, f)
		}
	}
	fs.mu.Unlock()
	close(done)
}

// flushCloses tells the MDS every queued close now (at unmount).
func (fs *FS) flushCloses() {
	if fs.sess == nil {
		return
	}
	fs.mu.Lock()
	fids := make([]fid.FID, 0, len(fs.closeq))
	for f := range fs.closeq {
		fids = append(fids, f)
	}
	clear(fs.closeq)
	fs.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	fs.sess.Closed(ctx, fids)
	cancel()
}

// openFileFIDs lists the regular files the MDS is to count as open here
// (for a new session): those open, and those whose close is not told yet
// (an open of one sends nothing, queueClose).
func (fs *FS) openFileFIDs() []fid.FID {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	out := make([]fid.FID, 0, len(fs.files)+len(fs.closeq))
	for f := range fs.files {
		out = append(out, f)
	}
	for f := range fs.closeq {
		if fs.files[f] == nil {
			out = append(out, f)
		}
	}
	return out
}
