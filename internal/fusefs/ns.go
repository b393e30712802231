package fusefs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

const virtTimeout = time.Hour

// Lookup resolves a name; .nacre in the root and .nacre/fid/<FID> are
// virtual (Lustre's .lustre/fid).
func (fs *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	switch h.NodeId {
	case nacreID:
		if name == lostFoundName {
			ino, err := fs.attr(fs.ctx(h), fid.LostFound)
			if err != nil {
				return fs.status("lookup lost+found", err)
			}
			fs.fillEntry(ino, out)
			return fuse.OK
		}
		if name != fidDirName {
			return fuse.ENOENT
		}
		out.NodeId = fidDirID
		out.SetEntryTimeout(virtTimeout)
		out.SetAttrTimeout(virtTimeout)
		virtAttr(fidDirID, &out.Attr)
		return fuse.OK
	case fidDirID:
		// Opening by FID skips the search permissions of every
		// directory on the object's path: root's only, as Lustre's
		// .lustre/fid needs CAP_DAC_READ_SEARCH. Not a root that the
		// client's nodemap squashes.
		if fs.c.LocalCred(fs.cred(h)).Uid != 0 {
			return fuse.EPERM
		}
		f, err := fid.Parse(name)
		if err != nil {
			return fuse.ENOENT
		}
		ino, err := fs.attr(fs.ctx(h), f)
		if err != nil {
			return fs.status("lookup fid", err)
		}
		fs.fillEntry(ino, out)
		// Not cached: another user's walk through the name root looked
		// up would not come here to be refused.
		out.SetEntryTimeout(0)
		return fuse.OK
	case rootID:
		if name == nacreDirName {
			out.NodeId = nacreID
			out.SetEntryTimeout(virtTimeout)
			out.SetAttrTimeout(virtTimeout)
			virtAttr(nacreID, &out.Attr)
			return fuse.OK
		}
	}
	pf, st := fs.fidOf(h.NodeId)
	if !st.Ok() {
		return st
	}
	if fs.knownMissing(pf, name) {
		return fs.missing(out)
	}
	ctx := fs.ctx(h)
	ino, err := fs.c.Lookup(ctx, pf, name)
	if err != nil {
		st := fs.status("lookup", err)
		if st == fuse.ENOENT {
			fs.lookupMissed(pf)
			return fs.missing(out)
		}
		return st
	}
	fs.fenceOwnWrites(fid.FromPB(ino.Fid))
	if err := fs.c.Glimpse(ctx, ino); err != nil {
		return fs.status("lookup", err)
	}
	fs.ownSize(ino)
	fs.fillNamed(ino, out, pf, name)
	return fuse.OK
}

// missing answers a lookup of a missing name (cached by the kernel for
// the negative_timeout mount option).
func (fs *FS) missing(out *fuse.EntryOut) fuse.Status {
	if fs.o.NegativeTimeout > 0 {
		out.NodeId = 0
		out.SetEntryTimeout(fs.o.NegativeTimeout)
		return fuse.OK
	}
	return fuse.ENOENT
}

// GetAttr returns fresh attributes (exact size).
func (fs *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if in.NodeId == nacreID || in.NodeId == fidDirID {
		virtAttr(in.NodeId, &out.Attr)
		out.SetTimeout(virtTimeout)
		return fuse.OK
	}
	n, ino := fs.cached(in.NodeId, false)
	if n == nil {
		return fuse.ENOENT
	}
	if ino != nil && ino.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		// The kernel drops a directory's attributes whenever a name in
		// it changes, and asks again before the next permission check:
		// within the attribute timeout the MDT need not be asked.
		fs.fillAttr(nil, ino, &out.Attr)
		out.SetTimeout(fs.o.AttrTimeout - time.Since(n.at))
		return fuse.OK
	}
	fs.fenceFID(n.fid)
	ino, err := fs.attr(fs.ctx(&in.InHeader), n.fid)
	if err != nil {
		if last := fs.lastAttrs(n); last != nil && errors.Is(err, syscall.ENOENT) {
			// Gone from the MDT (removed here or through another client)
			// while the kernel still holds it: its last attributes with
			// no links, as fstat of a removed file and stat of a removed
			// working directory answer on a local file system.
			fs.fillAttr(nil, last, &out.Attr)
			out.SetTimeout(fs.o.AttrTimeout)
			return fuse.OK
		}
		return fs.status("getattr", err)
	}
	fs.fillAttr(n, ino, &out.Attr)
	fs.mu.Lock()
	if n.ino == ino {
		n.exact = true // fs.attr asked the OSTs for its size
	}
	fs.mu.Unlock()
	out.SetTimeout(fs.o.AttrTimeout)
	return fuse.OK
}

// SetAttr changes attributes; a size change truncates the file's objects.
func (fs *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	n := fs.node(in.NodeId)
	if n == nil || in.NodeId == nacreID || in.NodeId == fidDirID {
		return fuse.EPERM
	}
	ctx := fs.ctx(&in.InHeader)
	f := n.fid
	op := &pb.SetattrOp{Fid: f.PB()}
	v := in.Valid
	if v&fuse.FATTR_MODE != 0 {
		op.Valid |= uint32(pb.SetattrValid_SETATTR_MODE)
		op.Mode = in.Mode & 0o7777
	}
	if v&fuse.FATTR_UID != 0 {
		op.Valid |= uint32(pb.SetattrValid_SETATTR_UID)
		op.Uid = in.Uid
	}
	if v&fuse.FATTR_GID != 0 {
		op.Valid |= uint32(pb.SetattrValid_SETATTR_GID)
		op.Gid = in.Gid
	}
	if v&fuse.FATTR_ATIME != 0 {
		if v&fuse.FATTR_ATIME_NOW != 0 {
			op.Valid |= uint32(pb.SetattrValid_SETATTR_ATIME_NOW)
		} else {
			op.Valid |= uint32(pb.SetattrValid_SETATTR_ATIME)
			op.AtimeNs = nsOf(in.Atime, in.Atimensec)
		}
	}
	if v&fuse.FATTR_MTIME != 0 {
		if v&fuse.FATTR_MTIME_NOW != 0 {
			op.Valid |= uint32(pb.SetattrValid_SETATTR_MTIME_NOW)
		} else {
			op.Valid |= uint32(pb.SetattrValid_SETATTR_MTIME)
			op.MtimeNs = nsOf(in.Mtime, in.Mtimensec)
		}
	}
	if v&fuse.FATTR_CTIME != 0 {
		op.Valid |= uint32(pb.SetattrValid_SETATTR_CTIME)
		op.CtimeNs = nsOf(in.Ctime, in.Ctimensec)
	}
	if v&fuse.FATTR_SIZE != 0 && op.Valid&uint32(pb.SetattrValid_SETATTR_MTIME_NOW) != 0 {
		// truncate(2)'s own times (the kernel sends them as "mtime
		// now"): a writer's, not utimensat's choice of one time, which
		// the MDT leaves to the owner.
		op.Valid |= uint32(pb.SetattrValid_SETATTR_CTIME_NOW)
	}
	if op.Valid == 0 && v&fuse.FATTR_SIZE == 0 {
		// Nothing to change: chown(f, -1, -1), which moves the change
		// time on Linux file systems (the kernel sends no time).
		op.Valid = uint32(pb.SetattrValid_SETATTR_CTIME_NOW)
	}
	if v&(fuse.FATTR_ATIME|fuse.FATTR_MTIME) != 0 {
		// Writes still in flight would reach the OSTs after the new
		// times and count as newer (tar x and cp -p write, then set
		// mtime, then close): let them land first.
		fs.mu.Lock()
		of := fs.files[f]
		fs.mu.Unlock()
		if of != nil {
			of.wb.fence()
		}
	}
	var ino *pb.Inode
	var err error
	if v&fuse.FATTR_SIZE != 0 {
		if err = fs.truncate(ctx, &in.InHeader, f, in.Size, v&fuse.FATTR_FH != 0); err != nil {
			return fs.status("truncate", err)
		}
		if fs.sess != nil {
			fs.sess.Invalidate(ctx, []fid.FID{f})
		}
	}
	if op.Valid != 0 {
		ino, err = fs.c.Setattr(ctx, op)
		if err != nil && op.Valid == uint32(pb.SetattrValid_SETATTR_MODE) && errnoIs(err, syscall.EPERM) {
			// The kernel clears set-user-ID and set-group-ID bits when a
			// non-owner writes or truncates; the MDT lets only owners
			// chmod, so such a pure clearing is done with root's rights,
			// for a caller who may write the file (and so could clear
			// them by writing). A chmod by a non-owner looks the same
			// here when the kernel does not check permissions
			// (no_default_permissions): one who may not write is refused.
			if cur, gerr := fs.c.Getattr(ctx, f); gerr == nil && cur.Mode&0o7777&^(syscall.S_ISUID|syscall.S_ISGID) == op.Mode &&
				cur.Mode&0o7777 != op.Mode && fs.mayAccess(ctx, cur, fs.cred(&in.InHeader), 2) {
				ino, err = fs.c.Setattr(client.WithCred(ctx, &pb.Cred{}), op)
			}
		}
		if err != nil {
			if gone := fs.setGoneSpecial(n, op, err); gone != nil {
				fs.fillAttr(nil, gone, &out.Attr)
				out.SetTimeout(fs.o.AttrTimeout)
				return fuse.OK
			}
			return fs.status("setattr", err)
		}
	}
	if ino == nil || ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0 {
		if ino, err = fs.attr(ctx, f); err != nil {
			return fs.status("setattr", err)
		}
	}
	fs.fillAttr(n, ino, &out.Attr)
	out.SetTimeout(fs.o.AttrTimeout)
	return fuse.OK
}

// setGoneSpecial applies op to a FIFO, socket or device whose object is
// gone from the MDT (err ENOENT) while the kernel still holds it open:
// their opens never reach the daemon, so the MDT destroyed the object at
// its last unlink, and fchmod, fchown or futimens on the open descriptor
// would fail where a local file system changes the open inode. Nobody
// else can reach it, so the change lives in the attributes this mount
// answers for it. nil if that is not the case.
func (fs *FS) setGoneSpecial(n *node, op *pb.SetattrOp, err error) *pb.Inode {
	if !errnoIs(err, syscall.ENOENT) {
		return nil
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n.last == nil {
		return nil
	}
	switch n.last.Mode & syscall.S_IFMT {
	case syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
	default:
		return nil
	}
	ino := proto.Clone(n.last).(*pb.Inode)
	now := time.Now().UnixNano()
	v := op.Valid
	if v&uint32(pb.SetattrValid_SETATTR_MODE) != 0 {
		ino.Mode = ino.Mode&syscall.S_IFMT | op.Mode&0o7777
	}
	if v&uint32(pb.SetattrValid_SETATTR_UID) != 0 {
		ino.Uid = op.Uid
	}
	if v&uint32(pb.SetattrValid_SETATTR_GID) != 0 {
		ino.Gid = op.Gid
	}
	switch {
	case v&uint32(pb.SetattrValid_SETATTR_ATIME_NOW) != 0:
		ino.AtimeNs = now
	case v&uint32(pb.SetattrValid_SETATTR_ATIME) != 0:
		ino.AtimeNs = op.AtimeNs
	}
	switch {
	case v&uint32(pb.SetattrValid_SETATTR_MTIME_NOW) != 0:
		ino.MtimeNs = now
	case v&uint32(pb.SetattrValid_SETATTR_MTIME) != 0:
		ino.MtimeNs = op.MtimeNs
	}
	ino.CtimeNs = now
	ino.Nlink = 0
	n.last = ino
	return proto.Clone(ino).(*pb.Inode)
}

// nsOf converts a time from the kernel (seconds since 1970, two's
// complement before it) to the nanoseconds the MDT keeps, clamped to what
// an int64 holds (years 1677 to 2262) instead of wrapping around.
func nsOf(sec uint64, nsec uint32) int64 {
	const g = int64(1e9)
	s := int64(sec)
	switch {
	case s > (math.MaxInt64-int64(nsec))/g:
		return math.MaxInt64
	case s < math.MinInt64/g:
		return math.MinInt64
	}
	return s*g + int64(nsec)
}

func errnoIs(err error, e syscall.Errno) bool {
	var x syscall.Errno
	return asErrno(err, &x) && x == e
}

// truncate sets a file's size, through its open file if this mount has
// one (so that file knows its new size). viaHandle: ftruncate(2), through
// a file the caller opened for writing; else truncate(2), which needs
// write access (the kernel checks it, unless no_default_permissions).
func (fs *FS) truncate(ctx context.Context, hdr *fuse.InHeader, f fid.FID, size uint64, viaHandle bool) error {
	defer fs.forgetFIDAttrs(f)
	fs.mu.Lock()
	of := fs.files[f]
	fs.mu.Unlock()
	if of != nil && !viaHandle && !fs.kernelChecks {
		// The open file here is not necessarily the caller's, nor open
		// for writing: its truncate would pass as an ftruncate.
		cred := fs.cred(hdr)
		ino, err := fs.c.Getattr(ctx, f)
		if err != nil {
			return err
		}
		if fs.c.LocalCred(cred).Uid != 0 && !fs.mayAccess(ctx, ino, cred, 2) {
			return &errno.Errno{Op: "truncate", Errno: syscall.EACCES, Msg: fmt.Sprintf("uid %d may not write %s", cred.Uid, f)}
		}
	}
	if of != nil {
		of.wb.fence()
		of.rw.RLock()
		defer of.rw.RUnlock()
		if err := of.f.Truncate(ctx, size); err != nil {
			return err
		}
		of.setEnd(size)
		return nil
	}
	_, err := fs.c.Setattr(ctx, &pb.SetattrOp{Fid: f.PB(), Valid: uint32(pb.SetattrValid_SETATTR_SIZE), Size: size})
	return err
}

func (fs *FS) create(h *fuse.InHeader, name string, mode uint32, o client.CreateOpts, out *fuse.EntryOut) fuse.Status {
	pf, st := fs.fidOf(h.NodeId)
	if !st.Ok() {
		return st
	}
	if h.NodeId == rootID && name == nacreDirName {
		return fuse.Status(syscall.EEXIST)
	}
	o.Exclusive = true
	ino, _, err := fs.c.Create(fs.ctx(h), pf, name, mode, o)
	fs.namesChanged(pf, name, true, err)
	if err != nil {
		return fs.status("create", err)
	}
	delta := 0
	if mode&syscall.S_IFMT == syscall.S_IFDIR {
		delta = 1
	}
	fs.dirChanged(h.NodeId, delta, ino)
	fs.fillNamed(ino, out, pf, name)
	return fuse.OK
}

// Mknod makes a regular file, FIFO, socket or device node.
func (fs *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	return fs.create(&in.InHeader, name, in.Mode, client.CreateOpts{Rdev: in.Rdev, Umask: in.Umask}, out)
}

// Mkdir makes a directory.
func (fs *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	return fs.create(&in.InHeader, name, syscall.S_IFDIR|in.Mode&0o7777, client.CreateOpts{Umask: in.Umask}, out)
}

// Symlink makes a symbolic link.
func (fs *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	return fs.create(h, name, syscall.S_IFLNK|0o777, client.CreateOpts{Symlink: target}, out)
}

// Readlink returns a symlink's target.
func (fs *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	f, st := fs.fidOf(h.NodeId)
	if !st.Ok() {
		return nil, st
	}
	t, err := fs.c.Readlink(fs.ctx(h), f)
	if err != nil {
		return nil, fs.status("readlink", err)
	}
	return []byte(t), fuse.OK
}

// Link adds a hard link.
func (fs *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	pf, st := fs.fidOf(in.NodeId)
	if !st.Ok() {
		return st
	}
	f, st := fs.fidOf(in.Oldnodeid)
	if !st.Ok() {
		return st
	}
	ctx := fs.ctx(&in.InHeader)
	ino, err := fs.c.Link(ctx, f, pf, name)
	fs.namesChanged(pf, name, true, err)
	if err != nil {
		return fs.status("link", err)
	}
	if err := fs.c.Glimpse(ctx, ino); err != nil {
		return fs.status("link", err)
	}
	fs.dirChanged(in.NodeId, 0, ino)
	fs.fillNamed(ino, out, pf, name)
	return fuse.OK
}

// Unlink removes a name. While files are open here, the MDT is told which,
// so that a file losing its last name stays until its last close.
func (fs *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return fs.remove(h, name, false)
}

// Rmdir removes an empty directory (kept like a file while open here).
func (fs *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	return fs.remove(h, name, true)
}

func (fs *FS) remove(h *fuse.InHeader, name string, dir bool) fuse.Status {
	op := "unlink"
	if dir {
		op = "rmdir"
	}
	pf, st := fs.fidOf(h.NodeId)
	if !st.Ok() {
		return st
	}
	ctx := fs.ctx(h)
	fs.nsGate.RLock()
	defer fs.nsGate.RUnlock()
	defer fs.removed()
	delta := 0
	if dir {
		delta = -1
	}
	flown := fs.openForFlight() // released by endFlight below (orphans.go)
	open := flown
	if len(open) == 0 || fs.sess == nil {
		fs.endFlight(flown, nil)
		ino, err := fs.c.Remove(ctx, pf, name, dir)
		fs.namesChanged(pf, name, false, err)
		if err == nil {
			fs.dirChanged(h.NodeId, delta, ino)
			fs.unlinked(ino)
		}
		return fs.status(op, err)
	}
	if len(open) > maxOpenList {
		// Send only the file the name names, if it is open here.
		ino, err := fs.c.Lookup(ctx, pf, name)
		if err != nil {
			fs.endFlight(flown, nil)
			return fs.status(op, err)
		}
		open = fs.filterOpen(open, fid.FromPB(ino.Fid))
	}
	ino, err := fs.sess.Unlink(ctx, pf, name, dir, open)
	fs.namesChanged(pf, name, false, err)
	var made []fid.FID
	if err == nil && ino != nil && ino.Nlink == 0 {
		made = []fid.FID{fid.FromPB(ino.Fid)}
	}
	fs.endFlight(flown, made) // marks or releases what it made an orphan
	if err != nil {
		return fs.status(op, err)
	}
	fs.dirChanged(h.NodeId, delta, ino)
	fs.unlinked(ino)
	return fuse.OK
}

// maxOpenList bounds the open FIDs sent with an unlink or rename.
const maxOpenList = 1024

func (fs *FS) filterOpen(open []fid.FID, f fid.FID) []fid.FID {
	for _, o := range open {
		if o == f {
			return []fid.FID{f}
		}
	}
	return nil
}

// Rename moves a name (RENAME_NOREPLACE and RENAME_EXCHANGE too).
func (fs *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	sp, st := fs.fidOf(in.NodeId)
	if !st.Ok() {
		return st
	}
	dp, st := fs.fidOf(in.Newdir)
	if !st.Ok() {
		return st
	}
	if in.Flags&^uint32(client.RenameNoReplace|client.RenameExchange|client.RenameWhiteout) != 0 {
		return fuse.EINVAL
	}
	if in.Newdir == rootID && newName == nacreDirName {
		return fuse.EPERM
	}
	ctx := fs.ctx(&in.InHeader)
	fs.nsGate.RLock()
	defer fs.nsGate.RUnlock()
	defer fs.removed()
	// A rename that may replace a name may change the parents' link
	// counts: their attributes are then fetched again rather than
	// guessed. One that replaces nothing (the new name known missing)
	// changes them as a create and a removal through this mount do.
	replaces := in.Flags&client.RenameExchange != 0 ||
		in.Flags&client.RenameNoReplace == 0 && !fs.knownMissing(dp, newName)
	var moved *pb.Inode
	var err error
	defer func() { fs.parentsAfterRename(in.NodeId, in.Newdir, moved, replaces || err != nil) }()
	flown := fs.openForFlight() // released by endFlight below (orphans.go)
	open := flown
	if len(open) == 0 || fs.sess == nil || in.Flags&client.RenameExchange != 0 {
		var other *pb.Inode
		if in.Flags&client.RenameExchange != 0 {
			// The object at the new name moves too (and gets a new change
			// time); the reply names only the other one.
			other, _ = fs.c.Lookup(ctx, dp, newName)
		}
		moved, err = fs.c.Move(ctx, sp, oldName, dp, newName, in.Flags)
		fs.renamed(sp, oldName, dp, newName, in.Flags, err)
		fs.endFlight(flown, nil)
		fs.moved(moved, sp, oldName, dp, newName)
		if err == nil {
			fs.moved(other, dp, newName, sp, oldName)
		}
		return fs.status("rename", err)
	}
	if len(open) > maxOpenList {
		ino, err := fs.c.Lookup(ctx, dp, newName)
		if err != nil {
			open = nil
		} else {
			open = fs.filterOpen(open, fid.FromPB(ino.Fid))
		}
	}
	moved, err = fs.sess.Rename(ctx, sp, oldName, dp, newName, in.Flags, open)
	fs.renamed(sp, oldName, dp, newName, in.Flags, err)
	var made []fid.FID
	if err == nil {
		made = open // the reply does not say which file it replaced
	}
	fs.endFlight(flown, made)
	fs.moved(moved, sp, oldName, dp, newName)
	return fs.status("rename", err)
}

// parentsAfterRename updates the cached attributes of a rename's parents
// (forget: drops them) after the rename moved the object moved.
func (fs *FS) parentsAfterRename(from, to uint64, moved *pb.Inode, forget bool) {
	if forget || moved == nil {
		fs.forgetAttrs(from)
		fs.forgetAttrs(to)
		return
	}
	if from == to {
		fs.dirChanged(from, 0, moved)
		return
	}
	delta := 0
	if moved.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		delta = 1
	}
	fs.dirChanged(from, -delta, moved)
	fs.dirChanged(to, delta, moved)
}

// moved drops the cached attributes of an object a rename through this
// mount moved (nil: none) to parent/name: its change time is new, and a
// directory's attributes are otherwise answered from the cache
// (GetAttr). The kernel moves its entry: the object's name is the new one.
func (fs *FS) moved(ino *pb.Inode, fromParent fid.FID, fromName string, parent fid.FID, name string) {
	if ino == nil || ino.Fid == nil {
		return
	}
	f := fid.FromPB(ino.Fid)
	fs.forgetFIDAttrs(f)
	fs.mu.Lock()
	n := fs.byFID[f]
	fs.mu.Unlock()
	if n == nil {
		return
	}
	fs.mu.Lock()
	wasLocked := slices.ContainsFunc(n.vias, func(v via) bool { return v.locked && v.parent == fromParent && v.name == fromName })
	fs.mu.Unlock()
	fs.unnamed(n, fromParent, fromName)
	// The kernel moves its entry with the timeout it had: one given
	// under a lookup lock stays only under the new directory's.
	locked := wasLocked && fs.entryLocked(parent, name)
	fs.named(n, parent, name, locked)
	if wasLocked && !locked {
		fs.invalidateEntries([]entryRef{{dir: parent, names: []string{name}}}, 0)
	}
}

// Access checks permissions (without default_permissions the kernel asks).
func (fs *FS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if in.NodeId == nacreID || in.NodeId == fidDirID {
		if in.Mask&fuse.W_OK != 0 {
			return fuse.EACCES
		}
		return fuse.OK
	}
	f, st := fs.fidOf(in.NodeId)
	if !st.Ok() {
		return st
	}
	cred := fs.cred(&in.InHeader)
	ctx := client.WithCred(context.Background(), cred)
	ino, err := fs.c.Getattr(ctx, f)
	if err != nil {
		return fs.status("access", err)
	}
	if !fs.mayAccess(ctx, ino, cred, in.Mask) {
		return fuse.EACCES
	}
	return fuse.OK
}

// StatFs sums the OSTs' space and the MDTs' inodes (cached for a second).
func (fs *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	fs.statfsMu.Lock()
	defer fs.statfsMu.Unlock()
	if fs.statfs == nil || time.Since(fs.statfsAt) > time.Second {
		s, err := fs.c.Statfs(context.Background())
		if err != nil {
			return fs.status("statfs", err)
		}
		fs.statfs, fs.statfsAt = s, time.Now()
	}
	s := fs.statfs
	const bs = 4096
	out.Bsize = bs
	out.Frsize = bs
	out.Blocks = s.BytesTotal / bs
	out.Bfree = s.BytesFree / bs
	out.Bavail = s.BytesAvail / bs
	out.Files = s.InodesTotal
	out.Ffree = s.InodesFree
	out.NameLen = 255
	return fuse.OK
}
