package mdt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// Open-unlinked files (Lustre's PENDING directory).
//
// POSIX lets a process keep using a file after its last name is gone. A
// client that has files open sends its unlinks and renames as
// OpenUnlinkOp / OpenRenameOp with the FIDs it holds open; when such a
// command removes the last name of one of them, apply keeps the object
// (OI entry, inode with nlink 0, xattrs, layout and OST objects) and
// records it as an orphan of that client:
//
//	"P" FID(16)  ->  client id (8) + local key (8)
//
// O_TMPFILE files (TmpfileOp) are orphans from birth. OrphanReleaseOp,
// sent by the client at the last close, destroys an orphan whose link
// count is still zero (a tmpfile may have been linked meanwhile; then only
// the record goes). The MDS reaps the orphans of clients whose session
// with it has been gone for a grace period (internal/mds/open.go), which
// also covers a client that crashed or an MDS that restarted while files
// were open. The checker must treat an object with a "P" record as
// referenced (see PendingOrphan).
//
// The commands reuse the unlink and rename code paths unchanged: the
// object to keep is pinned (its link count raised by one) before the
// ordinary operation runs, so the ordinary operation never drops it to
// zero; afterwards the pin is removed and, if no name is left, the object
// becomes an orphan. Everything happens in the command's one batch.

const pfxPending = 'P'

// SharedOrphanOwner owns the orphans that no one client keeps: files
// removed through one client while others had them open (OpenUnlinkOp's
// shared). The leader destroys them once no client has them open.
const SharedOrphanOwner = ^uint64(0)

// PendingPrefix is the key prefix of the open-unlinked orphan records.
var PendingPrefix = []byte{pfxPending}

// PendingKey is the orphan record key of f.
func PendingKey(f fid.FID) []byte {
	k := make([]byte, 1+fid.Size)
	k[0] = pfxPending
	f.Put(k[1:])
	return k
}

func encodePending(client, local uint64) []byte {
	return binary.BigEndian.AppendUint64(putU64(client), local)
}

// Orphan is one open-unlinked object.
type Orphan struct {
	FID    fid.FID
	Client uint64
	Local  uint64
}

// PendingOrphan reports whether f is recorded as an open-unlinked orphan
// (an object with nlink 0 that a client still has open).
func PendingOrphan(r kv.Reader, f fid.FID) bool {
	_, err := r.Get(PendingKey(f))
	return err == nil
}

// Orphans lists the open-unlinked orphans (at most max; 0: all).
func (t *Target) Orphans(max int) ([]Orphan, error) {
	it, err := t.db.NewIter(PendingPrefix, kv.PrefixEnd(PendingPrefix))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []Orphan
	for ok := it.First(); ok; ok = it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != 1+fid.Size || len(v) != 16 {
			continue
		}
		f, err := fid.FromBytes(k[1:])
		if err != nil {
			continue
		}
		out = append(out, Orphan{FID: f, Client: binary.BigEndian.Uint64(v), Local: binary.BigEndian.Uint64(v[8:])})
		if max > 0 && len(out) >= max {
			break
		}
	}
	return out, it.Error()
}

// openFiles applies the open-file commands (Command fields 50-59).
func (x *txn) openFiles() (*pb.Reply, error) {
	switch op := x.cmd.Op.(type) {
	case *pb.Command_OpenUnlink:
		return x.openUnlink(op.OpenUnlink)
	case *pb.Command_OpenRename:
		return x.openRename(op.OpenRename)
	case *pb.Command_Tmpfile:
		return x.tmpfile(op.Tmpfile)
	case *pb.Command_OrphanRelease:
		return x.orphanRelease(op.OrphanRelease)
	}
	return nil, errf(syscall.EINVAL, "unknown open-file command")
}

// pin is an object whose link count was raised by one so that an
// ordinary unlink or rename does not destroy it. A directory cannot be
// pinned that way (its last name always destroys it), so it is restored
// afterwards instead, from the state and xattrs saved here.
type pin struct {
	local  uint64
	f      fid.FID
	owner  uint64 // whose orphan it becomes
	orig   *pb.Inode
	dir    bool
	xattrs [][2][]byte
}

// pinName pins what parent/name names if it is one of open (for the
// client), or, with shared, if it is a regular file (for no client in
// particular). Failures are left for the ordinary operation to report.
func (x *txn) pinName(parent *pb.FID, name string, open []*pb.FID, shared bool) *pin {
	if parent == nil || (len(open) == 0 && !shared) {
		return nil
	}
	plocal, dir, err := x.get(fid.FromPB(parent))
	if err != nil || !isDir(dir) {
		return nil
	}
	cf, _, found, err := lookupName(x.b, plocal, name)
	if err != nil || !found {
		return nil
	}
	held := false
	for _, o := range open {
		if fid.FromPB(o) == cf {
			held = true
			break
		}
	}
	local, child, err := x.get(cf)
	if err != nil {
		return nil
	}
	owner := x.cmd.ClientId
	if !held {
		if !shared || !isReg(child) {
			return nil
		}
		owner = SharedOrphanOwner
	}
	if isDir(child) {
		p := &pin{local: local, f: cf, owner: owner, orig: child, dir: true}
		pfx := xattrPrefix(local)
		if it, err := x.b.NewIter(pfx, kv.PrefixEnd(pfx)); err == nil {
			for it.First(); it.Valid(); it.Next() {
				p.xattrs = append(p.xattrs, [2][]byte{append([]byte(nil), it.Key()...), append([]byte(nil), it.Value()...)})
			}
			it.Close()
		}
		return p
	}
	orig := cloneInode(child)
	child.Nlink++
	x.put(local, child)
	return &pin{local: local, f: cf, owner: owner, orig: orig}
}

// settle removes the pin after the operation: on failure the object is
// put back as it was; otherwise the pin's link goes and an object left
// without names becomes an orphan of the client. It returns the object's
// final state (nil if there was no pin).
func (x *txn) settle(p *pin, opErr error) *pb.Inode {
	if p == nil {
		return nil
	}
	if p.dir {
		return x.settleDir(p, opErr)
	}
	if opErr != nil {
		x.put(p.local, p.orig)
		return nil
	}
	local, ino, err := x.get(p.f)
	if err != nil {
		return nil
	}
	if ino.Nlink > 0 {
		ino.Nlink--
	}
	x.put(local, ino)
	if ino.Nlink == 0 {
		x.b.Set(PendingKey(p.f), encodePending(p.owner, local))
	}
	return stripLinks(ino)
}

// settleDir brings back a pinned directory that the operation destroyed,
// with no name, as an orphan.
func (x *txn) settleDir(p *pin, opErr error) *pb.Inode {
	if opErr != nil {
		return nil
	}
	if _, _, err := x.get(p.f); err == nil {
		return nil // still there (not the last name, or an exchange)
	}
	ino := p.orig
	ino.Nlink = 0
	ino.Links = nil
	ino.CtimeNs = x.now
	x.b.Set(OIKey(p.f), putU64(p.local))
	x.put(p.local, ino)
	for _, kv := range p.xattrs {
		x.b.Set(kv[0], kv[1])
	}
	x.t.inodes++
	x.b.Set(PendingKey(p.f), encodePending(p.owner, p.local))
	return stripLinks(ino)
}

func (x *txn) openUnlink(op *pb.OpenUnlinkOp) (*pb.Reply, error) {
	if op.Unlink == nil {
		return nil, errf(syscall.EINVAL, "open unlink without an unlink")
	}
	p := x.pinName(op.Unlink.Parent, string(op.Unlink.Name), op.Open, op.Shared)
	r, err := x.unlink(op.Unlink)
	kept := x.settle(p, err)
	if err != nil {
		return nil, err
	}
	if kept != nil {
		r.Inode = kept
	}
	return r, nil
}

func (x *txn) openRename(op *pb.OpenRenameOp) (*pb.Reply, error) {
	rn := op.Rename
	if rn == nil {
		return nil, errf(syscall.EINVAL, "open rename without a rename")
	}
	var p *pin
	if rn.Flags&renameExchange == 0 && !(proto.Equal(rn.SrcParent, rn.DstParent) && bytes.Equal(rn.SrcName, rn.DstName)) {
		p = x.pinName(rn.DstParent, string(rn.DstName), op.Open, op.Shared)
	}
	r, err := x.rename(rn)
	x.settle(p, err)
	return r, err
}

// tmpfile creates the file under a name no client can know and removes
// that name again in the same batch, keeping the object as an orphan.
func (x *txn) tmpfile(op *pb.TmpfileOp) (*pb.Reply, error) {
	name := fmt.Sprintf(".nacre-tmpfile.%x.%x", x.cmd.ClientId, x.cmd.RequestId)
	cr, err := x.create(&pb.CreateOp{Parent: op.Parent, Name: []byte(name), Mode: syscall.S_IFREG | op.Mode&0o7777,
		Exclusive: true, Layout: op.Layout, Projid: op.Projid, Osts: op.Osts, Umask: op.Umask})
	if err != nil {
		return nil, err
	}
	p := x.pinName(op.Parent, name, []*pb.FID{cr.Inode.Fid}, false)
	_, err = x.unlink(&pb.UnlinkOp{Parent: op.Parent, Name: []byte(name)})
	kept := x.settle(p, err)
	if err != nil || kept == nil {
		return nil, errf(syscall.EIO, "tmpfile: remove the temporary name: %v", err)
	}
	return &pb.Reply{Inode: kept}, nil
}

// OpensSeen reports whether clients have told this MDT of open files
// (OrphanReleaseOp.opens_seen).
func (t *Target) OpensSeen() bool {
	_, err := t.db.Get(keyOpensSeen)
	return err == nil
}

// pending reads f's orphan record (nil if it has none).
func (x *txn) pending(f fid.FID) ([]byte, error) {
	v, err := x.b.Get(PendingKey(f))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, errf(syscall.EIO, "read orphan record of %s: %v", f, err)
	}
	return v, nil
}

func (x *txn) orphanRelease(op *pb.OrphanReleaseOp) (*pb.Reply, error) {
	if op.OpensSeen {
		x.b.Set(keyOpensSeen, []byte{1})
	}
	for _, pf := range op.Share {
		f := fid.FromPB(pf)
		v, err := x.pending(f)
		if err != nil {
			return nil, err
		}
		if len(v) != 16 || binary.BigEndian.Uint64(v) != x.cmd.ClientId {
			continue // none, or not this client's (any more)
		}
		x.b.Set(PendingKey(f), encodePending(SharedOrphanOwner, binary.BigEndian.Uint64(v[8:])))
	}
	for _, pf := range op.Fids {
		f := fid.FromPB(pf)
		k := PendingKey(f)
		v, err := x.pending(f)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		if x.cmd.ClientId != 0 && len(v) >= 8 && binary.BigEndian.Uint64(v) != x.cmd.ClientId {
			continue // another client's orphan now
		}
		x.b.Delete(k)
		local, ino, err := x.get(f)
		if err != nil {
			continue // already gone (removed through another client)
		}
		if ino.Nlink != 0 {
			continue // linked again (a tmpfile given a name)
		}
		if isDir(ino) {
			if empty, err := dirEmpty(x.b, local); err != nil || !empty {
				continue // left for the checker
			}
		}
		x.destroy(local, ino)
	}
	return &pb.Reply{}, nil
}
