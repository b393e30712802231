package mdt

import (
	"errors"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/layout"
)

func (x *txn) getDir(f fid.FID, access uint32, what string) (uint64, *pb.Inode, error) {
	local, ino, err := x.get(f)
	if err != nil {
		return 0, nil, err
	}
	if !isDir(ino) {
		return 0, nil, errf(syscall.ENOTDIR, "%s %s is not a directory", what, f)
	}
	if x.t.pending[f].kind == pb.DtxKind_DTX_RMDIR && access&accW != 0 {
		// An rmdir decided on another MDT may remove it any moment.
		return 0, nil, errf(syscall.ENOENT, "%s %s is being removed", what, f)
	}
	if access != 0 && !mayAccess(x.b, local, ino, x.cred, access) {
		return 0, nil, errf(syscall.EACCES, "%s %s: uid %d may not modify it", what, f, x.cred.Uid)
	}
	return local, ino, nil
}

// dirWithFreeName reads directory f (getDir) and checks that it has no
// entry name, which what ("link", "create") is to add.
func (x *txn) dirWithFreeName(f fid.FID, access uint32, name, what string) (uint64, *pb.Inode, error) {
	local, dir, err := x.getDir(f, access, "parent")
	if err != nil {
		return 0, nil, err
	}
	if _, _, found, err := lookupName(x.b, local, name); err != nil {
		return 0, nil, err
	} else if found {
		return 0, nil, errf(syscall.EEXIST, "%s %q in %s", what, name, f)
	}
	return local, dir, nil
}

func (x *txn) touch(ino *pb.Inode) {
	ino.MtimeNs = x.now
	ino.CtimeNs = x.now
}

func (x *txn) create(op *pb.CreateOp) (*pb.Reply, error) {
	if op.Remote != nil {
		return x.createRemote(op)
	}
	name := string(op.Name)
	if err := checkName(name); err != nil {
		return nil, err
	}
	pf := fid.FromPB(op.Parent)
	plocal, parent, err := x.getDir(pf, accW|accX, "parent")
	if err != nil {
		return nil, err
	}
	mode := op.Mode
	if mode&syscall.S_IFMT == 0 {
		mode |= syscall.S_IFREG
	}
	cf, _, found, err := lookupName(x.b, plocal, name)
	if err != nil {
		return nil, err
	}
	if found {
		if op.Exclusive || mode&syscall.S_IFMT != syscall.S_IFREG {
			return nil, errf(syscall.EEXIST, "create %q in %s", name, pf)
		}
		_, existing, err := x.get(cf)
		if err != nil {
			return nil, err
		}
		if isDir(existing) {
			return nil, errf(syscall.EISDIR, "open %q in %s for writing", name, pf)
		}
		existing.Links = nil
		return &pb.Reply{Inode: existing, Existed: true}, nil
	}
	switch mode & syscall.S_IFMT {
	case syscall.S_IFREG, syscall.S_IFDIR, syscall.S_IFLNK, syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
	default:
		return nil, errf(syscall.EINVAL, "create %q: unknown file type %o", name, mode&syscall.S_IFMT)
	}
	f, err := x.allocFID()
	if err != nil {
		return nil, err
	}
	ino := &pb.Inode{
		Fid: f.PB(), Mode: mode, Uid: x.cred.Uid, Gid: x.cred.Gid, Projid: op.Projid, Nlink: 1,
		AtimeNs: x.now, MtimeNs: x.now, CtimeNs: x.now, BtimeNs: x.now, Rdev: op.Rdev,
		Links: []*pb.LinkEntry{{Parent: pf.PB(), Name: op.Name}},
	}
	if op.Projid == 0 {
		ino.Projid = parent.Projid
	}
	if parent.Mode&syscall.S_ISGID != 0 {
		ino.Gid = parent.Gid
		if mode&syscall.S_IFMT == syscall.S_IFDIR {
			ino.Mode |= syscall.S_ISGID
		}
	}
	accessACL, defACL, err := x.inheritACL(plocal, parent, ino, op.Umask)
	if err != nil {
		return nil, err
	}
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		ino.Nlink = 2
		ino.Size, ino.Blocks = 4096, 8
		if parent.Layout != nil {
			ino.Layout = proto.Clone(parent.Layout).(*pb.Layout)
		}
		parent.Nlink++
	case syscall.S_IFLNK:
		if len(op.Symlink) == 0 {
			// As Linux answers symlink("", name).
			return nil, errf(syscall.ENOENT, "an empty symlink target")
		}
		if len(op.Symlink) > 4095 {
			return nil, errf(syscall.ENAMETOOLONG, "symlink target of %d bytes (1 to 4095 allowed)", len(op.Symlink))
		}
		ino.Symlink = op.Symlink
		ino.Size = uint64(len(op.Symlink))
	case syscall.S_IFREG:
		if op.DelayLayout {
			break
		}
		l, err := x.newLayout(op.Layout, parent, op.Osts)
		if err != nil {
			return nil, err
		}
		ino.Layout = l
	}
	local := x.allocLocal()
	x.b.Set(OIKey(f), putU64(local))
	x.storeACLs(local, accessACL, defACL)
	x.put(local, ino)
	x.b.Set(DirentKey(plocal, name), encodeDirent(f, DirentType(mode)))
	x.t.inodes++
	x.touch(parent)
	x.put(plocal, parent)
	out := cloneInode(ino)
	out.Links = nil
	return &pb.Reply{Inode: out}, nil
}

// defaultLayout resolves the stripe size, count and offset a new file in
// parent gets: the hint's fields, else the parent's default, else the root's
// (the file system default), else 1 MiB x 1.
func (x *txn) defaultLayout(hint *pb.Layout, parent *pb.Inode) (uint32, int32, int32) {
	ss, count, offset := uint32(layout.DefaultStripeSize), int32(layout.DefaultStripeCount), int32(-1)
	def := parent.Layout
	if def == nil {
		def = x.t.rootLayout
	}
	if def != nil {
		if def.StripeSize != 0 {
			ss = def.StripeSize
		}
		if def.StripeCount != 0 {
			count = def.StripeCount
		}
		offset = def.StripeOffset
	}
	if hint != nil {
		if hint.StripeSize != 0 {
			ss = hint.StripeSize
		}
		if hint.StripeCount != 0 {
			count = hint.StripeCount
		}
		if hint.StripeOffset >= 0 && (hint.StripeSize != 0 || hint.StripeCount != 0 || hint.StripeOffset > 0) {
			offset = hint.StripeOffset
		}
	}
	return ss, count, offset
}

// newLayout builds a regular file's layout, taking one precreated object
// from each of the first `count` OSTs of osts (the leader's order) whose
// pool is not empty.
func (x *txn) newLayout(hint *pb.Layout, parent *pb.Inode, osts []uint32) (*pb.Layout, error) {
	ss, count, offset := x.defaultLayout(hint, parent)
	return x.assignObjects(ss, count, offset, osts)
}

func (x *txn) assignObjects(ss uint32, count, offset int32, osts []uint32) (*pb.Layout, error) {
	if err := layout.CheckStripeSize(uint64(ss)); err != nil {
		return nil, errf(syscall.EINVAL, "%v", err)
	}
	want := int(count)
	if want < 0 || want > len(osts) {
		want = len(osts)
	}
	if want > layout.MaxStripeCount {
		want = layout.MaxStripeCount
	}
	l := &pb.Layout{Pattern: 1, StripeSize: ss, StripeOffset: offset, Generation: 1}
	seen := map[uint32]bool{}
	for _, o := range osts {
		if len(l.Objects) == want {
			break
		}
		p := x.t.pools[o]
		if p == nil || p.Next >= p.End || seen[o] {
			continue
		}
		seen[o] = true
		l.Objects = append(l.Objects, &pb.StripeObject{Ost: o, Seq: p.Seq, Oid: p.Next})
		p.Next++
		x.st.dirtyPools[o] = true
	}
	if len(l.Objects) == 0 && want != 0 {
		return nil, errf(syscall.ENOSPC, "no precreated OST objects available (are the OSTs up?)")
	}
	if want == 0 && len(osts) == 0 {
		return nil, errf(syscall.ENOSPC, "no OST is available to hold file data")
	}
	l.StripeCount = int32(len(l.Objects))
	return l, nil
}

func (x *txn) link(op *pb.LinkOp) (*pb.Reply, error) {
	name := string(op.Name)
	if err := checkName(name); err != nil {
		return nil, err
	}
	f := fid.FromPB(op.Fid)
	local, ino, err := x.get(f)
	if err != nil {
		return nil, err
	}
	if isDir(ino) {
		return nil, errf(syscall.EPERM, "hard link to directory %s", f)
	}
	if !x.mayHardlink(local, ino) {
		return nil, errf(syscall.EPERM, "hard link to %s: uid %d is not the owner and may not both read and write it (protected_hardlinks)", f, x.cred.Uid)
	}
	pf := fid.FromPB(op.Parent)
	plocal, parent, err := x.dirWithFreeName(pf, accW|accX, name, "link")
	if err != nil {
		return nil, err
	}
	if ino.Nlink >= maxLinks {
		return nil, errf(syscall.EMLINK, "link to %s", f)
	}
	ino.Nlink++
	addLink(ino, pf, op.Name, x.index)
	ino.CtimeNs = x.now
	x.put(local, ino)
	x.b.Set(DirentKey(plocal, name), encodeDirent(f, DirentType(ino.Mode)))
	x.touch(parent)
	x.put(plocal, parent)
	out := cloneInode(ino)
	out.Links = nil
	return &pb.Reply{Inode: out}, nil
}

// mayHardlink is Linux's protected_hardlinks rule (fs.protected_hardlinks
// = 1, the default of every distribution): root and the owner may link
// anything; anyone else only a regular file that is neither set-user-ID
// nor executable set-group-ID and that they may read and write. Else a
// user could pin another's file (a set-ID program about to be fixed, a
// file they may not even read) in a directory of their own. The kernel
// checks it only for its own mounts: the MDT for every client.
func (x *txn) mayHardlink(local uint64, ino *pb.Inode) bool {
	c := x.cred
	if c.Uid == 0 || c.Uid == ino.Uid {
		return true
	}
	if !isReg(ino) || ino.Mode&syscall.S_ISUID != 0 || ino.Mode&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP {
		return false
	}
	return mayAccess(x.b, local, ino, c, accR|accW)
}

func (x *txn) unlink(op *pb.UnlinkOp) (*pb.Reply, error) {
	if op.Remote != nil {
		return x.unlinkRemote(op)
	}
	name := string(op.Name)
	pf := fid.FromPB(op.Parent)
	plocal, parent, err := x.getDir(pf, accW|accX, "parent")
	if err != nil {
		return nil, err
	}
	cf, _, remote, found, err := lookupEntry(x.b, plocal, name)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errf(syscall.ENOENT, "remove %q from %s", name, pf)
	}
	if remote {
		// A remote directory: its MDS removes it in a transaction with
		// the other MDT; here the object would look missing and the name
		// dangling.
		if !op.Dir {
			return nil, errf(syscall.EISDIR, "unlink %q: a directory (on another MDT)", name)
		}
		return nil, errf(syscall.EXDEV, "remove %q from %s: it leads to another MDT", name, pf)
	}
	clocal, child, err := x.get(cf)
	if err != nil {
		if ErrnoOf(err) == syscall.ENOENT {
			// A dangling entry: let the user remove the name.
			x.b.Delete(DirentKey(plocal, name))
			x.touch(parent)
			x.put(plocal, parent)
			return &pb.Reply{}, nil
		}
		return nil, err
	}
	if op.Dir && !isDir(child) {
		return nil, errf(syscall.ENOTDIR, "rmdir %q", name)
	}
	if !op.Dir && isDir(child) {
		return nil, errf(syscall.EISDIR, "unlink %q", name)
	}
	if isDir(child) {
		empty, err := dirEmpty(x.b, clocal)
		if err != nil {
			return nil, err
		}
		if !empty {
			return nil, errf(syscall.ENOTEMPTY, "rmdir %q", name)
		}
	}
	if stickyDenies(parent, child, x.cred) {
		return nil, errf(syscall.EPERM, "remove %q: sticky directory", name)
	}
	x.b.Delete(DirentKey(plocal, name))
	x.dropName(clocal, child, pf, name, parent)
	x.touch(parent)
	x.put(plocal, parent)
	out := cloneInode(child)
	out.Links = nil
	return &pb.Reply{Inode: out}, nil
}

// dropName removes one name of child (whose entry is already deleted) and
// destroys it when no name is left.
func (x *txn) dropName(clocal uint64, child *pb.Inode, pf fid.FID, name string, parent *pb.Inode) {
	removeLink(child, pf, name)
	if isDir(child) {
		child.Nlink = 0
		if parent.Nlink > 2 {
			parent.Nlink--
		}
	} else if child.Nlink > 0 {
		child.Nlink--
	}
	child.CtimeNs = x.now
	if child.Nlink == 0 {
		x.destroy(clocal, child)
	} else {
		x.put(clocal, child)
	}
}

// isAncestor reports whether dir a is d or one of d's ancestors, walking up
// the linkEA of directories (their only back-reference).
func (x *txn) isAncestor(a fid.FID, d fid.FID) (bool, error) {
	cur := d
	for depth := 0; depth < 4096; depth++ {
		if cur == a {
			return true, nil
		}
		if cur == fid.Root {
			return false, nil
		}
		_, ino, err := x.get(cur)
		if ErrnoOf(err) == syscall.ENOENT {
			// The chain goes on on another MDT: this MDT cannot tell
			// whether the move would make a loop.
			return false, errf(syscall.EXDEV, "the directories above %s cross to another MDT", d)
		}
		if err != nil {
			return false, err
		}
		if len(ino.Links) == 0 {
			return false, errf(syscall.EIO, "directory %s has no parent reference (run `nacre lfsck start -t namespace`)", cur)
		}
		cur = fid.FromPB(ino.Links[0].Parent)
	}
	return false, errf(syscall.ELOOP, "directory chain above %s is too deep", d)
}

const (
	renameNoReplace = 1
	renameExchange  = 2
	// renameWhiteout leaves a whiteout (a character device 0:0, as
	// overlayfs reads one) at the old name, in the same batch.
	renameWhiteout = 4
)

// loaded is an inode read once and written once, even when two roles of a
// rename (source and destination parent) are the same directory.
type loaded struct {
	local uint64
	ino   *pb.Inode
}

func (x *txn) rename(op *pb.RenameOp) (*pb.Reply, error) {
	srcName, dstName := string(op.SrcName), string(op.DstName)
	if err := checkName(dstName); err != nil {
		return nil, err
	}
	if op.Flags&^(renameNoReplace|renameExchange|renameWhiteout) != 0 || op.Flags&(renameNoReplace|renameExchange) == renameNoReplace|renameExchange ||
		op.Flags&(renameExchange|renameWhiteout) == renameExchange|renameWhiteout {
		return nil, errf(syscall.EINVAL, "rename flags %#x", op.Flags)
	}
	spf, dpf := fid.FromPB(op.SrcParent), fid.FromPB(op.DstParent)
	var sp, dp loaded
	var err error
	if sp.local, sp.ino, err = x.getDir(spf, accW|accX, "source directory"); err != nil {
		return nil, err
	}
	if dpf == spf {
		dp = sp
	} else if dp.local, dp.ino, err = x.getDir(dpf, accW|accX, "target directory"); err != nil {
		return nil, err
	}
	sf, styp, sremote, found, err := lookupEntry(x.b, sp.local, srcName)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, errf(syscall.ENOENT, "rename %q in %s", srcName, spf)
	}
	if sremote {
		if op.Txid != 0 {
			return x.renameRemote(op, spf, dpf, &sp, &dp, sf, styp)
		}
		// Its MDS moves it in a transaction with the directory's MDT.
		return nil, errf(syscall.EXDEV, "rename %q: it is a directory on another MDT", srcName)
	}
	var s loaded
	if s.local, s.ino, err = x.get(sf); err != nil {
		return nil, err
	}
	if stickyDenies(sp.ino, s.ino, x.cred) {
		return nil, errf(syscall.EPERM, "rename %q: sticky directory", srcName)
	}
	df, dtyp, dremote, dfound, err := lookupEntry(x.b, dp.local, dstName)
	if err != nil {
		return nil, err
	}
	if dremote {
		return nil, errf(syscall.EXDEV, "rename onto %q: it is a directory on another MDT", dstName)
	}
	if op.Flags&renameExchange != 0 && !dfound {
		return nil, errf(syscall.ENOENT, "exchange with %q in %s", dstName, dpf)
	}
	if dfound && op.Flags&renameNoReplace != 0 {
		return nil, errf(syscall.EEXIST, "rename to %q in %s", dstName, dpf)
	}
	if spf == dpf && srcName == dstName {
		return &pb.Reply{Inode: stripLinks(s.ino)}, nil
	}
	if dfound && df == sf {
		// Two names of the same file: POSIX says do nothing.
		return &pb.Reply{Inode: stripLinks(s.ino)}, nil
	}
	// A directory may not move below itself.
	if isDir(s.ino) && spf != dpf {
		if in, err := x.isAncestor(sf, dpf); err != nil {
			return nil, err
		} else if in {
			return nil, errf(syscall.EINVAL, "move directory %q into itself", srcName)
		}
		if !mayAccess(x.b, s.local, s.ino, x.cred, accW) {
			return nil, errf(syscall.EACCES, "move directory %q to another parent", srcName)
		}
	}
	var d loaded
	if dfound {
		if d.local, d.ino, err = x.get(df); err != nil {
			return nil, err
		}
		if stickyDenies(dp.ino, d.ino, x.cred) {
			return nil, errf(syscall.EPERM, "replace %q: sticky directory", dstName)
		}
	}
	if op.Flags&renameExchange != 0 {
		return x.exchange(op, spf, dpf, &sp, &dp, &s, &d, sf, df, styp, dtyp)
	}
	if dfound {
		if isDir(s.ino) {
			if !isDir(d.ino) {
				return nil, errf(syscall.ENOTDIR, "rename directory onto %q", dstName)
			}
			empty, err := dirEmpty(x.b, d.local)
			if err != nil {
				return nil, err
			}
			if !empty {
				return nil, errf(syscall.ENOTEMPTY, "rename onto %q", dstName)
			}
		} else if isDir(d.ino) {
			return nil, errf(syscall.EISDIR, "rename onto directory %q", dstName)
		}
		x.dropName(d.local, d.ino, dpf, dstName, dp.ino)
	}
	x.b.Delete(DirentKey(sp.local, srcName))
	x.b.Set(DirentKey(dp.local, dstName), encodeDirent(sf, styp))
	if op.Flags&renameWhiteout != 0 {
		if err := x.whiteout(sp.local, spf, srcName); err != nil {
			return nil, err
		}
	}
	replaceLink(s.ino, spf, srcName, dpf, dstName, x.index)
	s.ino.CtimeNs = x.now
	x.put(s.local, s.ino)
	x.renamedParents(spf, dpf, &sp, &dp, isDir(s.ino))
	return &pb.Reply{Inode: stripLinks(s.ino)}, nil
}

// renamedParents writes a rename's parents back, touched: a directory
// that moved to another parent moves a link count with it.
func (x *txn) renamedParents(spf, dpf fid.FID, sp, dp *loaded, dir bool) {
	if dir && spf != dpf {
		if sp.ino.Nlink > 2 {
			sp.ino.Nlink--
		}
		dp.ino.Nlink++
	}
	x.touch(sp.ino)
	x.put(sp.local, sp.ino)
	if dpf != spf {
		x.touch(dp.ino)
		x.put(dp.local, dp.ino)
	}
}

// whiteout makes the whiteout a rename with RENAME_WHITEOUT leaves at
// the name it moved from: a character device 0:0 with no permission bits
// (Linux's WHITEOUT_MODE), owned by the caller.
func (x *txn) whiteout(plocal uint64, pf fid.FID, name string) error {
	f, err := x.allocFID()
	if err != nil {
		return err
	}
	ino := &pb.Inode{
		Fid: f.PB(), Mode: syscall.S_IFCHR, Uid: x.cred.Uid, Gid: x.cred.Gid, Nlink: 1,
		AtimeNs: x.now, MtimeNs: x.now, CtimeNs: x.now, BtimeNs: x.now,
		Links: []*pb.LinkEntry{{Parent: pf.PB(), Name: []byte(name)}},
	}
	local := x.allocLocal()
	x.b.Set(OIKey(f), putU64(local))
	x.put(local, ino)
	x.b.Set(DirentKey(plocal, name), encodeDirent(f, DirentType(syscall.S_IFCHR)))
	x.t.inodes++
	return nil
}

func (x *txn) exchange(op *pb.RenameOp, spf, dpf fid.FID, sp, dp, s, d *loaded, sf, df fid.FID, styp, dtyp uint8) (*pb.Reply, error) {
	srcName, dstName := string(op.SrcName), string(op.DstName)
	if isDir(d.ino) && spf != dpf {
		if in, err := x.isAncestor(df, spf); err != nil {
			return nil, err
		} else if in {
			return nil, errf(syscall.EINVAL, "exchange moves directory %q into itself", dstName)
		}
		// Its ".." changes, as the source's does (rename checked that):
		// Linux asks write permission on each directory that moves.
		if !mayAccess(x.b, d.local, d.ino, x.cred, accW) {
			return nil, errf(syscall.EACCES, "exchange moves directory %q to another parent: uid %d may not write it", dstName, x.cred.Uid)
		}
	}
	x.b.Set(DirentKey(sp.local, srcName), encodeDirent(df, dtyp))
	x.b.Set(DirentKey(dp.local, dstName), encodeDirent(sf, styp))
	replaceLink(s.ino, spf, srcName, dpf, dstName, x.index)
	replaceLink(d.ino, dpf, dstName, spf, srcName, x.index)
	s.ino.CtimeNs, d.ino.CtimeNs = x.now, x.now
	x.put(s.local, s.ino)
	x.put(d.local, d.ino)
	if spf != dpf {
		if isDir(s.ino) && !isDir(d.ino) {
			sp.ino.Nlink--
			dp.ino.Nlink++
		} else if isDir(d.ino) && !isDir(s.ino) {
			dp.ino.Nlink--
			sp.ino.Nlink++
		}
	}
	x.touch(sp.ino)
	x.put(sp.local, sp.ino)
	if dpf != spf {
		x.touch(dp.ino)
		x.put(dp.local, dp.ino)
	}
	return &pb.Reply{Inode: stripLinks(s.ino)}, nil
}

func stripLinks(ino *pb.Inode) *pb.Inode {
	out := cloneInode(ino)
	out.Links = nil
	return out
}

func (x *txn) setattr(op *pb.SetattrOp) (*pb.Reply, error) {
	f := fid.FromPB(op.Fid)
	local, ino, err := x.get(f)
	if err != nil {
		return nil, err
	}
	c := x.cred
	owner := c.Uid == 0 || c.Uid == ino.Uid
	v := pb.SetattrValid(op.Valid)
	has := func(bit pb.SetattrValid) bool { return v&bit != 0 }
	changed := false
	if has(pb.SetattrValid_SETATTR_MODE) {
		if !owner {
			return nil, errf(syscall.EPERM, "chmod %s: uid %d is not the owner", f, c.Uid)
		}
		mode := op.Mode & 0o7777
		if c.Uid != 0 && mode&syscall.S_ISGID != 0 && !inGroup(c, ino.Gid) {
			mode &^= syscall.S_ISGID
		}
		ino.Mode = ino.Mode&syscall.S_IFMT | mode
		if err := x.chmodACL(local, ino); err != nil {
			return nil, err
		}
		changed = true
	}
	if has(pb.SetattrValid_SETATTR_UID) || has(pb.SetattrValid_SETATTR_GID) {
		// As Linux's chown_ok and chgrp_ok: the owner may "change" the
		// owner to itself and the group to its own or one of its groups;
		// anyone else needs root, even to set what is there already.
		if has(pb.SetattrValid_SETATTR_UID) && c.Uid != 0 && !(c.Uid == ino.Uid && op.Uid == ino.Uid) {
			return nil, errf(syscall.EPERM, "chown %s: only root may change the owner", f)
		}
		if has(pb.SetattrValid_SETATTR_GID) && c.Uid != 0 && !(c.Uid == ino.Uid && (op.Gid == ino.Gid || inGroup(c, op.Gid))) {
			return nil, errf(syscall.EPERM, "chgrp %s to %d: uid %d is not the owner, or not in that group", f, op.Gid, c.Uid)
		}
		if has(pb.SetattrValid_SETATTR_UID) {
			ino.Uid = op.Uid
		}
		if has(pb.SetattrValid_SETATTR_GID) {
			ino.Gid = op.Gid
		}
		if isReg(ino) && !has(pb.SetattrValid_SETATTR_MODE) {
			ino.Mode &^= syscall.S_ISUID
			if ino.Mode&syscall.S_IXGRP != 0 {
				ino.Mode &^= syscall.S_ISGID
			}
		}
		changed = true
	}
	if has(pb.SetattrValid_SETATTR_SIZE) {
		if isDir(ino) {
			return nil, errf(syscall.EISDIR, "truncate directory %s", f)
		}
		if !isReg(ino) {
			return nil, errf(syscall.EINVAL, "truncate %s: not a regular file", f)
		}
		// As truncate(2): write access, the owner's too; ftruncate's was
		// checked at the open.
		if !has(pb.SetattrValid_SETATTR_CLEAR_DIRTY) && !has(pb.SetattrValid_SETATTR_OPENED) && c.Uid != 0 && !mayAccess(x.b, local, ino, c, accW) {
			return nil, errf(syscall.EACCES, "truncate %s: uid %d may not write it", f, c.Uid)
		}
		if ino.Size != op.Size && !has(pb.SetattrValid_SETATTR_CLEAR_DIRTY) {
			changed = true
		}
		ino.Size = op.Size
	}
	if has(pb.SetattrValid_SETATTR_ATIME) || has(pb.SetattrValid_SETATTR_MTIME) {
		if !owner && !has(pb.SetattrValid_SETATTR_CLEAR_DIRTY) {
			return nil, errf(syscall.EPERM, "set times of %s: uid %d is not the owner", f, c.Uid)
		}
		if has(pb.SetattrValid_SETATTR_ATIME) {
			ino.AtimeNs = op.AtimeNs
		}
		switch {
		case !has(pb.SetattrValid_SETATTR_MTIME):
		case !has(pb.SetattrValid_SETATTR_CLEAR_DIRTY):
			// A user's explicit time (tar x, cp -p, touch -d).
			ino.MtimeNs = op.MtimeNs
			ino.MtimeSetNs = x.now
		case op.MtimeNs > ino.MtimeSetNs:
			// A close reports the time of its last write: a write
			// changes mtime and ctime alike. Writes older than a
			// user's explicit time were made before it and must
			// not undo it.
			ino.MtimeNs = op.MtimeNs
			ino.CtimeNs = max(ino.CtimeNs, op.MtimeNs)
		}
		if !has(pb.SetattrValid_SETATTR_CLEAR_DIRTY) {
			changed = true
		}
	}
	if has(pb.SetattrValid_SETATTR_ATIME_NOW) || has(pb.SetattrValid_SETATTR_MTIME_NOW) {
		// utimensat lets a writer who is not the owner set both times
		// to now (touch), nothing less: one time now and the other
		// left (UTIME_OMIT) is a choice of times, the owner's (EPERM,
		// as Linux's setattr_prepare). A modification's own time - a
		// truncate (with the size) or an O_TRUNC open of an empty file
		// or fallocate (with SETATTR_CTIME_NOW, which no utimensat
		// sends) - is a writer's.
		one := has(pb.SetattrValid_SETATTR_ATIME_NOW) != has(pb.SetattrValid_SETATTR_MTIME_NOW)
		if one && !owner && !has(pb.SetattrValid_SETATTR_SIZE) && !has(pb.SetattrValid_SETATTR_CTIME_NOW) {
			return nil, errf(syscall.EPERM, "set one time of %s to now: uid %d is not the owner", f, c.Uid)
		}
		if !owner && !mayAccess(x.b, local, ino, c, accW) {
			return nil, errf(syscall.EACCES, "touch %s", f)
		}
		if has(pb.SetattrValid_SETATTR_ATIME_NOW) {
			ino.AtimeNs = x.now
		}
		if has(pb.SetattrValid_SETATTR_MTIME_NOW) {
			ino.MtimeNs = x.now
			ino.MtimeSetNs = x.now
		}
		changed = true
	}
	if has(pb.SetattrValid_SETATTR_PROJID) {
		if c.Uid != 0 {
			return nil, errf(syscall.EPERM, "set project id of %s: root only", f)
		}
		ino.Projid = op.Projid
		changed = true
	}
	if has(pb.SetattrValid_SETATTR_BLOCKS) {
		ino.Blocks = op.Blocks
	}
	if has(pb.SetattrValid_SETATTR_SET_DIRTY) {
		ino.Flags |= uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY)
	}
	if has(pb.SetattrValid_SETATTR_CLEAR_DIRTY) {
		ino.Flags &^= uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY)
	}
	if has(pb.SetattrValid_SETATTR_CTIME) {
		// An explicit change time is the owner's to give (only a kernel
		// caching writes sends one); anyone else would forge it.
		if !owner {
			return nil, errf(syscall.EPERM, "set the change time of %s: uid %d is not the owner", f, c.Uid)
		}
		ino.CtimeNs = op.CtimeNs
	} else if changed || has(pb.SetattrValid_SETATTR_CTIME_NOW) {
		ino.CtimeNs = x.now
	}
	x.put(local, ino)
	return &pb.Reply{Inode: stripLinks(ino)}, nil
}

// MaxXattrValue is the largest extended attribute value.
const MaxXattrValue = 64 << 10

func (x *txn) checkXattr(local uint64, ino *pb.Inode, f fid.FID, name string) error {
	if name == "" || len(name) > MaxNameLen {
		return errf(syscall.ERANGE, "xattr name of %d bytes", len(name))
	}
	switch {
	case hasPrefix(name, "user."):
		if !isReg(ino) && !isDir(ino) {
			return errf(syscall.EPERM, "user xattr on a special file %s", f)
		}
		// As Linux's xattr_permission: on a sticky directory (/tmp)
		// only its owner and root write user xattrs, not every user who
		// may write it.
		if isDir(ino) && ino.Mode&syscall.S_ISVTX != 0 && x.cred.Uid != 0 && x.cred.Uid != ino.Uid {
			return errf(syscall.EPERM, "set xattr %q on sticky directory %s: uid %d is not the owner", name, f, x.cred.Uid)
		}
		if x.cred.Uid != 0 && x.cred.Uid != ino.Uid && !mayAccess(x.b, local, ino, x.cred, accW) {
			return errf(syscall.EACCES, "set xattr %q on %s", name, f)
		}
	case hasPrefix(name, "trusted."):
		if x.cred.Uid != 0 {
			return errf(syscall.EPERM, "trusted xattr %q: root only", name)
		}
	case hasPrefix(name, "security."):
		if x.cred.Uid != 0 && x.cred.Uid != ino.Uid {
			return errf(syscall.EPERM, "security xattr %q on %s", name, f)
		}
	case isACLName(name):
		return x.checkACLChange(ino, f, name)
	default:
		return errf(syscall.EOPNOTSUPP, "xattr namespace of %q", name)
	}
	return nil
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

func (x *txn) setxattr(op *pb.SetxattrOp) (*pb.Reply, error) {
	name := string(op.Name)
	f := fid.FromPB(op.Fid)
	local, ino, err := x.get(f)
	if err != nil {
		return nil, err
	}
	if err := x.checkXattr(local, ino, f, name); err != nil {
		return nil, err
	}
	if len(op.Value) > MaxXattrValue {
		return nil, errf(syscall.E2BIG, "xattr %q value of %d bytes (limit %d)", name, len(op.Value), MaxXattrValue)
	}
	k := xattrKey(local, name)
	_, err = x.b.Get(k)
	exists := err == nil
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, errf(syscall.EIO, "read xattr: %v", err)
	}
	if op.Flags&1 != 0 && exists {
		return nil, errf(syscall.EEXIST, "xattr %q on %s", name, f)
	}
	if op.Flags&2 != 0 && !exists {
		return nil, errf(syscall.ENODATA, "xattr %q on %s", name, f)
	}
	if isACLName(name) {
		if err := x.setACL(local, ino, f, name, op.Value); err != nil {
			return nil, err
		}
	} else {
		x.b.Set(k, op.Value)
	}
	ino.CtimeNs = x.now
	x.put(local, ino)
	return &pb.Reply{Inode: stripLinks(ino)}, nil
}

func (x *txn) removexattr(op *pb.RemovexattrOp) (*pb.Reply, error) {
	name := string(op.Name)
	f := fid.FromPB(op.Fid)
	local, ino, err := x.get(f)
	if err != nil {
		return nil, err
	}
	if err := x.checkXattr(local, ino, f, name); err != nil {
		return nil, err
	}
	k := xattrKey(local, name)
	if _, err := x.b.Get(k); errors.Is(err, kv.ErrNotFound) {
		return nil, errf(syscall.ENODATA, "xattr %q on %s", name, f)
	}
	if isACLName(name) {
		x.removeACL(local, ino, name)
	} else {
		x.b.Delete(k)
	}
	ino.CtimeNs = x.now
	x.put(local, ino)
	return &pb.Reply{Inode: stripLinks(ino)}, nil
}

func (x *txn) setLayout(op *pb.SetLayoutOp) (*pb.Reply, error) {
	f := fid.FromPB(op.Fid)
	local, ino, err := x.get(f)
	if err != nil {
		return nil, err
	}
	if x.cred.Uid != 0 && x.cred.Uid != ino.Uid {
		return nil, errf(syscall.EPERM, "set layout of %s: uid %d is not the owner", f, x.cred.Uid)
	}
	l := op.Layout
	switch {
	case isDir(ino):
		if l == nil || (l.StripeSize == 0 && l.StripeCount == 0 && l.StripeOffset < 0) {
			ino.Layout = nil // back to the parent's / file system default
		} else {
			if l.StripeSize != 0 {
				if err := layout.CheckStripeSize(uint64(l.StripeSize)); err != nil {
					return nil, errf(syscall.EINVAL, "%v", err)
				}
			}
			ino.Layout = &pb.Layout{Pattern: 1, StripeSize: l.StripeSize, StripeCount: l.StripeCount, StripeOffset: l.StripeOffset}
		}
	case isReg(ino):
		if ino.Size > 0 || ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0 {
			return nil, errf(syscall.EEXIST, "set layout of %s: the file already has data; a layout can only be set on an empty file", f)
		}
		if l == nil {
			return nil, errf(syscall.EINVAL, "set layout of %s: no layout given", f)
		}
		// Unset fields come from the file's directory, as at create (a
		// file with a delayed layout gets its directory's default here).
		parent := &pb.Inode{}
		if len(ino.Links) > 0 {
			if _, p, err := x.get(fid.FromPB(ino.Links[0].Parent)); err == nil {
				parent = p
			}
		}
		ss, count, offset := x.defaultLayout(l, parent)
		if ino.Layout != nil && l.StripeSize == 0 {
			ss = ino.Layout.StripeSize
		}
		nl, err := x.assignObjects(ss, count, offset, op.Osts)
		if err != nil {
			return nil, err
		}
		x.queueDestroy(ino.Layout)
		if ino.Layout != nil {
			nl.Generation = ino.Layout.Generation + 1
		}
		ino.Layout = nl
	default:
		return nil, errf(syscall.EINVAL, "set layout of %s: not a regular file or directory", f)
	}
	ino.CtimeNs = x.now
	x.put(local, ino)
	return &pb.Reply{Inode: stripLinks(ino)}, nil
}
