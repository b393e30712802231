package mdt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// Cross-MDT transactions (docs/architecture.md, "Several MDTs").
//
// A remote directory is a name on one MDT (the coordinator: the parent's)
// that leads to a directory object on another (the participant). Making
// or removing one changes both MDTs, each through its own Raft log:
//
//  1. the participant applies DtxPrepareOp: mkdir makes the directory and
//     keeps an intent; rmdir checks it is empty and keeps an intent that
//     refuses new names in it;
//  2. the coordinator applies the client's command (CreateOp or UnlinkOp
//     with txid set), which inserts or removes the name and records the
//     outcome, committed or aborted, in the same batch: this entry is the
//     decision;
//  3. the participant applies DtxFinishOp with the outcome (an aborted
//     mkdir destroys the directory, a committed rmdir removes it), and
//     the coordinator forgets the outcome (DtxForgetOp).
//
// A participant whose intent stays pending (the coordinator's MDS died
// between the steps) asks the coordinator with DtxResolveOp; a coordinator
// with no outcome yet records "aborted" then, so that a late step 2 fails
// and both sides agree. A coordinator keeps an outcome until the
// participant says (DtxStatusOp) that the intent is gone.

// DtxID makes a transaction id: a unique part (from the coordinator's MDS)
// and the two MDT indexes, so that either side knows the other from the
// id alone.
func DtxID(unique uint32, coordinator, participant uint16) uint64 {
	return uint64(unique)<<32 | uint64(coordinator)<<16 | uint64(participant)
}

// DtxCoordinator is the MDT index that decides transaction txid.
func DtxCoordinator(txid uint64) uint32 { return uint32(txid>>16) & 0xffff }

// DtxParticipant is the MDT index that takes part in transaction txid.
func DtxParticipant(txid uint64) uint32 { return uint32(txid) & 0xffff }

func dtxKey(txid uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pfxDtx}, txid)
}

// direntFlagRemote marks a directory entry whose object lives on another
// MDT. It is a byte after the type, so that readers that know nothing of
// it read the entry as before.
const direntFlagRemote = 1

func encodeRemoteDirent(f fid.FID, typ uint8) []byte {
	return append(encodeDirent(f, typ), direntFlagRemote)
}

func direntRemote(v []byte) bool {
	return len(v) > fid.Size+1 && v[fid.Size+1]&direntFlagRemote != 0
}

// DirentRemote reports whether an entry value leads to another MDT
// (checker use).
func DirentRemote(v []byte) bool { return direntRemote(v) }

// lookupEntry is lookupName that also says whether the entry is remote.
func lookupEntry(r kv.Reader, parentLocal uint64, name string) (f fid.FID, typ uint8, remote, found bool, err error) {
	v, err := r.Get(DirentKey(parentLocal, name))
	if errors.Is(err, kv.ErrNotFound) {
		return fid.FID{}, 0, false, false, nil
	}
	if err != nil {
		return fid.FID{}, 0, false, false, errf(syscall.EIO, "read entry %q: %v", name, err)
	}
	f, typ, ok := decodeDirent(v)
	if !ok {
		return fid.FID{}, 0, false, false, errf(syscall.EIO, "corrupt entry %q", name)
	}
	return f, typ, direntRemote(v), true, nil
}

func readDtx(r kv.Reader, txid uint64) (*pb.DtxRecord, error) {
	v, err := r.Get(dtxKey(txid))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, errf(syscall.EIO, "read transaction %#x: %v", txid, err)
	}
	rec := &pb.DtxRecord{}
	if err := proto.Unmarshal(v, rec); err != nil {
		return nil, errf(syscall.EIO, "transaction record %#x is corrupt: %v", txid, err)
	}
	return rec, nil
}

func (x *txn) putDtx(rec *pb.DtxRecord) {
	x.b.Set(dtxKey(rec.Txid), mustMarshal(rec))
}

// dtxOf is the transaction a client command decides (0: none).
func dtxOf(cmd *pb.Command) (txid uint64, kind pb.DtxKind, remote *pb.Inode, parent *pb.FID, name []byte) {
	switch o := cmd.Op.(type) {
	case *pb.Command_Create:
		if o.Create.Txid != 0 {
			return o.Create.Txid, pb.DtxKind_DTX_MKDIR, o.Create.Remote, o.Create.Parent, o.Create.Name
		}
	case *pb.Command_Unlink:
		if o.Unlink.Txid != 0 {
			return o.Unlink.Txid, pb.DtxKind_DTX_RMDIR, o.Unlink.Remote, o.Unlink.Parent, o.Unlink.Name
		}
	case *pb.Command_Rename:
		if o.Rename.Txid != 0 {
			return o.Rename.Txid, pb.DtxKind_DTX_RENAME, o.Rename.Remote, o.Rename.DstParent, o.Rename.DstName
		}
	}
	return 0, 0, nil, nil, nil
}

// decided checks, before a command decides txid, that nothing decided it
// before (a participant's resolve that found no outcome aborted it).
func (x *txn) decided(txid uint64) error {
	rec, err := readDtx(x.b, txid)
	if err != nil {
		return err
	}
	if rec != nil {
		return errf(syscall.EIO, "cross-MDT transaction %#x was already %s (its participant gave up waiting); nothing was changed, try again", txid, outcomeWord(rec.Committed))
	}
	return nil
}

func outcomeWord(committed bool) string {
	if committed {
		return "committed"
	}
	return "aborted"
}

// recordOutcome writes the coordinator's decision on txid in the batch of
// the command that decided it, unless an outcome is there already.
func (x *txn) recordOutcome(cmd *pb.Command, committed bool) {
	txid, kind, remote, parent, name := dtxOf(cmd)
	if txid == 0 {
		return
	}
	if rec, err := readDtx(x.b, txid); err != nil || rec != nil {
		return
	}
	x.putDtx(&pb.DtxRecord{Txid: txid, Kind: kind, Coordinator: true, Peer: DtxParticipant(txid),
		Fid: remote.GetFid(), Parent: parent, Name: name, TimeNs: x.now, Committed: committed})
}

// createRemote inserts the name of a directory that another MDT made in
// transaction op.Txid (step 2 for mkdir).
func (x *txn) createRemote(op *pb.CreateOp) (*pb.Reply, error) {
	name := string(op.Name)
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := x.decided(op.Txid); err != nil {
		return nil, err
	}
	if !isDir(op.Remote) || op.Remote.Fid == nil {
		return nil, errf(syscall.EINVAL, "a remote entry must name a directory with a FID")
	}
	plocal, parent, err := x.dirWithFreeName(fid.FromPB(op.Parent), accW|accX, name, "create")
	if err != nil {
		return nil, err
	}
	x.b.Set(DirentKey(plocal, name), encodeRemoteDirent(fid.FromPB(op.Remote.Fid), DirentType(op.Remote.Mode)))
	parent.Nlink++
	x.touch(parent)
	x.put(plocal, parent)
	out := cloneInode(op.Remote)
	out.Links = nil
	return &pb.Reply{Inode: out}, nil
}

// unlinkRemote removes the name of a remote directory whose MDT checked
// it is empty in transaction op.Txid (step 2 for rmdir).
func (x *txn) unlinkRemote(op *pb.UnlinkOp) (*pb.Reply, error) {
	name := string(op.Name)
	if err := x.decided(op.Txid); err != nil {
		return nil, err
	}
	pf := fid.FromPB(op.Parent)
	plocal, parent, err := x.getDir(pf, accW|accX, "parent")
	if err != nil {
		return nil, err
	}
	cf, _, remote, found, err := lookupEntry(x.b, plocal, name)
	if err != nil {
		return nil, err
	}
	if !found || !remote || cf != fid.FromPB(op.Remote.GetFid()) {
		return nil, errf(syscall.ENOENT, "rmdir %q in %s: the name no longer leads to %s", name, pf, fid.FromPB(op.Remote.GetFid()))
	}
	if stickyDenies(parent, op.Remote, x.cred) {
		return nil, errf(syscall.EPERM, "remove %q: sticky directory", name)
	}
	x.b.Delete(DirentKey(plocal, name))
	if parent.Nlink > 2 {
		parent.Nlink--
	}
	x.touch(parent)
	x.put(plocal, parent)
	out := cloneInode(op.Remote)
	out.Links, out.Nlink, out.CtimeNs = nil, 0, x.now
	return &pb.Reply{Inode: out}, nil
}

// dtxPrepare is the participant's step 1.
func (x *txn) dtxPrepare(op *pb.DtxPrepareOp) (*pb.Reply, error) {
	if DtxParticipant(op.Txid) != x.t.id.Index {
		return nil, errf(syscall.EINVAL, "transaction %#x names MDT%04x as its participant, not %s", op.Txid, DtxParticipant(op.Txid), x.t.id.Label())
	}
	rec, err := readDtx(x.b, op.Txid)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		// A retried prepare (the answer was lost): answer as the first
		// time, with the directory.
		_, ino, err := x.get(fid.FromPB(rec.Fid))
		if err != nil {
			return nil, err
		}
		return &pb.Reply{Inode: stripLinks(ino)}, nil
	}
	rec = &pb.DtxRecord{Txid: op.Txid, Kind: op.Kind, Peer: op.Coordinator, Parent: op.Parent, Name: op.Name, TimeNs: x.now}
	switch op.Kind {
	case pb.DtxKind_DTX_MKDIR:
		if op.Inode == nil || !isDir(op.Inode) {
			return nil, errf(syscall.EINVAL, "prepare of a remote mkdir without a directory")
		}
		f, err := x.allocFID()
		if err != nil {
			return nil, err
		}
		ino := cloneInode(op.Inode)
		ino.Fid = f.PB()
		ino.Nlink = 2
		ino.Links = []*pb.LinkEntry{{Parent: op.Parent, Name: op.Name, Remote: true}}
		local := x.allocLocal()
		x.b.Set(OIKey(f), putU64(local))
		x.storeACLs(local, op.AclAccess, op.AclDefault)
		x.put(local, ino)
		x.t.inodes++
		rec.Fid = f.PB()
		x.putDtx(rec)
		x.t.pending[f] = pendingIntent{op.Txid, op.Kind}
		out := cloneInode(ino)
		out.Links = nil
		return &pb.Reply{Inode: out}, nil
	}
	// A directory takes part in one transaction at a time: the one
	// before may be finishing (its finish follows its answer) or wait
	// for its coordinator's outcome after a crash. Its coordinator tries
	// again shortly.
	f := fid.FromPB(op.Fid)
	if p, busy := x.t.pending[f]; busy {
		return nil, errf(syscall.EAGAIN, "%s takes part in cross-MDT transaction %#x still (%v); try again", f, p.txid, p.kind)
	}
	switch op.Kind {
	case pb.DtxKind_DTX_RMDIR:
		local, ino, err := x.get(f)
		if err != nil {
			return nil, err
		}
		if !isDir(ino) {
			return nil, errf(syscall.ENOTDIR, "rmdir %q: %s is not a directory", op.Name, f)
		}
		empty, err := dirEmpty(x.b, local)
		if err != nil {
			return nil, err
		}
		if !empty {
			return nil, errf(syscall.ENOTEMPTY, "rmdir %q", op.Name)
		}
		rec.Fid = op.Fid
		x.putDtx(rec)
		x.t.pending[f] = pendingIntent{op.Txid, op.Kind}
		out := cloneInode(ino)
		out.Links = nil
		return &pb.Reply{Inode: out}, nil
	case pb.DtxKind_DTX_RENAME:
		_, ino, err := x.get(f)
		if err != nil {
			return nil, err
		}
		if !isDir(ino) || !hasLink(ino, fid.FromPB(op.OldParent), string(op.OldName)) {
			return nil, errf(syscall.ENOENT, "rename %q: %s is not the directory named so", op.OldName, f)
		}
		rec.Fid, rec.OldParent, rec.OldName = op.Fid, op.OldParent, op.OldName
		x.putDtx(rec)
		x.t.pending[f] = pendingIntent{op.Txid, op.Kind}
		out := cloneInode(ino)
		out.Links = nil
		return &pb.Reply{Inode: out}, nil
	}
	return nil, errf(syscall.EINVAL, "transaction %#x of unknown kind %v", op.Txid, op.Kind)
}

// dtxFinish is the participant's step 3.
func (x *txn) dtxFinish(op *pb.DtxFinishOp) (*pb.Reply, error) {
	rec, err := readDtx(x.b, op.Txid)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.Coordinator {
		return &pb.Reply{}, nil // finished before
	}
	f := fid.FromPB(rec.Fid)
	if rec.Kind == pb.DtxKind_DTX_RENAME && op.Committed {
		// The name moved on the coordinator: the linkEA follows.
		local, ino, err := x.get(f)
		switch {
		case err == nil:
			for _, l := range ino.Links {
				if fid.FromPB(l.Parent) == fid.FromPB(rec.OldParent) && string(l.Name) == string(rec.OldName) {
					l.Parent, l.Name, l.Remote = rec.Parent, rec.Name, true
				}
			}
			ino.CtimeNs = x.now
			x.put(local, ino)
		case ErrnoOf(err) != syscall.ENOENT:
			return nil, err
		}
	}
	destroy := (rec.Kind == pb.DtxKind_DTX_MKDIR && !op.Committed) || (rec.Kind == pb.DtxKind_DTX_RMDIR && op.Committed)
	if destroy {
		local, ino, err := x.get(f)
		switch {
		case err == nil:
			ino.Nlink = 0
			x.destroy(local, ino)
		case ErrnoOf(err) != syscall.ENOENT:
			return nil, err
		}
	}
	if x.t.pending[f].txid == op.Txid {
		delete(x.t.pending, f)
	}
	x.b.Delete(dtxKey(op.Txid))
	return &pb.Reply{}, nil
}

// dtxResolve answers a participant that waited too long: the outcome, or
// "aborted", recorded now, if there is none.
func (x *txn) dtxResolve(op *pb.DtxResolveOp) (*pb.Reply, error) {
	if DtxCoordinator(op.Txid) != x.t.id.Index {
		return nil, errf(syscall.EINVAL, "transaction %#x names MDT%04x as its coordinator, not %s", op.Txid, DtxCoordinator(op.Txid), x.t.id.Label())
	}
	rec, err := readDtx(x.b, op.Txid)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		rec = &pb.DtxRecord{Txid: op.Txid, Coordinator: true, Peer: op.Participant, TimeNs: x.now}
		x.putDtx(rec)
	}
	if !rec.Committed {
		return &pb.Reply{Errno: int32(syscall.ECANCELED), Message: fmt.Sprintf("transaction %#x aborted", op.Txid)}, nil
	}
	return &pb.Reply{}, nil
}

// dtxForget drops the coordinator's outcome once the participant finished.
func (x *txn) dtxForget(op *pb.DtxForgetOp) (*pb.Reply, error) {
	rec, err := readDtx(x.b, op.Txid)
	if err != nil {
		return nil, err
	}
	if rec != nil && rec.Coordinator {
		x.b.Delete(dtxKey(op.Txid))
	}
	return &pb.Reply{}, nil
}

// pendingIntent is a participant's intent on a directory (Target.pending).
type pendingIntent struct {
	txid uint64
	kind pb.DtxKind
}

// loadPending rebuilds Target.pending, the directories a pending intent
// holds, from the records.
func (t *Target) loadPending() error {
	t.pending = map[fid.FID]pendingIntent{}
	var holds []*pb.DtxRecord
	err := t.scanDtx(t.db, func(rec *pb.DtxRecord) {
		if !rec.Coordinator && rec.Fid != nil {
			holds = append(holds, rec)
		}
	})
	// The newest intent on a directory holds it, as when they were
	// prepared.
	sort.SliceStable(holds, func(i, j int) bool { return holds[i].TimeNs < holds[j].TimeNs })
	for _, rec := range holds {
		t.pending[fid.FromPB(rec.Fid)] = pendingIntent{rec.Txid, rec.Kind}
	}
	return err
}

func (t *Target) scanDtx(r kv.Reader, fn func(*pb.DtxRecord)) error {
	lo := []byte{pfxDtx}
	it, err := r.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		rec := &pb.DtxRecord{}
		if err := proto.Unmarshal(it.Value(), rec); err != nil {
			return fmt.Errorf("transaction record %x is corrupt: %w", bytes.Clone(it.Key()), err)
		}
		fn(rec)
	}
	return it.Error()
}

// DtxRecords lists the cross-MDT transactions this MDT keeps: intents
// pending here, and outcomes its participants have not finished.
func (t *Target) DtxRecords() ([]*pb.DtxRecord, error) {
	var out []*pb.DtxRecord
	err := t.scanDtx(t.db, func(r *pb.DtxRecord) { out = append(out, r) })
	return out, err
}

// DtxPending reports whether a participant's intent for txid is pending.
func (t *Target) DtxPending(txid uint64) (bool, error) {
	rec, err := readDtx(t.db, txid)
	if err != nil {
		return false, err
	}
	return rec != nil && !rec.Coordinator, nil
}

// Entry reads one name of a directory: the FID it leads to and whether
// that object is on another MDT (no permission check: the MDS routes with
// it, and the command it then proposes checks).
func (t *Target) Entry(parent fid.FID, name string) (f fid.FID, remote bool, err error) {
	plocal, p, err := t.readInode(parent)
	if err != nil {
		return fid.FID{}, false, err
	}
	if !isDir(p) {
		return fid.FID{}, false, errf(syscall.ENOTDIR, "%s is not a directory", parent)
	}
	f, _, remote, found, err := lookupEntry(t.db, plocal, name)
	if err != nil {
		return fid.FID{}, false, err
	}
	if !found {
		return fid.FID{}, false, errf(syscall.ENOENT, "no entry %q in %s", name, parent)
	}
	return f, remote, nil
}

// RemoteDir is what a directory made on another MDT inherits from its
// parent here: owner, mode after umask or default ACL, group and project,
// default layout, and the ACLs to store with it.
func (t *Target) RemoteDir(parent fid.FID, name string, mode, umask uint32, cred *pb.Cred, now int64) (ino *pb.Inode, access, def []byte, err error) {
	if err := checkName(name); err != nil {
		return nil, nil, nil, err
	}
	cred = credOr(cred)
	plocal, p, err := t.readInode(parent)
	if err != nil {
		return nil, nil, nil, err
	}
	if !isDir(p) {
		return nil, nil, nil, errf(syscall.ENOTDIR, "parent %s is not a directory", parent)
	}
	if !mayAccess(t.db, plocal, p, cred, accW|accX) {
		return nil, nil, nil, errf(syscall.EACCES, "parent %s: uid %d may not modify it", parent, cred.Uid)
	}
	if _, _, found, err := lookupName(t.db, plocal, name); err != nil {
		return nil, nil, nil, err
	} else if found {
		return nil, nil, nil, errf(syscall.EEXIST, "create %q in %s", name, parent)
	}
	ino = &pb.Inode{
		Mode: syscall.S_IFDIR | mode&0o7777, Uid: cred.Uid, Gid: cred.Gid, Projid: p.Projid, Nlink: 2,
		AtimeNs: now, MtimeNs: now, CtimeNs: now, BtimeNs: now, Size: 4096, Blocks: 8,
	}
	if p.Mode&syscall.S_ISGID != 0 {
		ino.Gid = p.Gid
		ino.Mode |= syscall.S_ISGID
	}
	if p.Layout != nil {
		ino.Layout = proto.Clone(p.Layout).(*pb.Layout)
	}
	access, def, err = inheritACLFrom(t.db, plocal, p, ino, umask)
	if err != nil {
		return nil, nil, nil, err
	}
	return ino, access, def, nil
}

// remoteEntry puts back a remote directory's entry that the checker of
// the directory's MDT found lost.
func (x *txn) remoteEntry(op *pb.RemoteEntryOp) (*pb.Reply, error) {
	name := string(op.Name)
	if err := checkName(name); err != nil {
		return nil, err
	}
	plocal, parent, err := x.dirWithFreeName(fid.FromPB(op.Parent), 0, name, "put back")
	if err != nil {
		return nil, err
	}
	typ := uint8(op.Type)
	x.b.Set(DirentKey(plocal, name), encodeRemoteDirent(fid.FromPB(op.Fid), typ))
	if uint32(typ) == syscall.S_IFDIR>>12 {
		parent.Nlink++
	}
	x.touch(parent)
	x.put(plocal, parent)
	return &pb.Reply{}, nil
}

// DtxInvolves reports whether a cross-MDT transaction this MDT keeps a
// record of concerns f (the checker leaves such names alone: they are
// changing).
func DtxInvolves(r kv.Reader, f fid.FID) bool {
	lo := []byte{pfxDtx}
	it, err := r.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		return true
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		rec := &pb.DtxRecord{}
		if proto.Unmarshal(it.Value(), rec) == nil && fid.FromPB(rec.Fid) == f {
			return true
		}
	}
	return false
}

func hasLink(ino *pb.Inode, parent fid.FID, name string) bool {
	for _, l := range ino.Links {
		if fid.FromPB(l.Parent) == parent && string(l.Name) == name {
			return true
		}
	}
	return false
}

// renameRemote moves the name of a directory of another MDT between two
// directories of this one (or within one), in transaction op.Txid: the
// participant's linkEA follows at its finish. Called by rename once the
// parents are read and the source entry found remote.
func (x *txn) renameRemote(op *pb.RenameOp, spf, dpf fid.FID, sp, dp *loaded, sf fid.FID, styp uint8) (*pb.Reply, error) {
	srcName, dstName := string(op.SrcName), string(op.DstName)
	if err := x.decided(op.Txid); err != nil {
		return nil, err
	}
	if op.Remote == nil || fid.FromPB(op.Remote.Fid) != sf {
		return nil, errf(syscall.ENOENT, "rename %q: the name no longer leads to %s", srcName, fid.FromPB(op.Remote.GetFid()))
	}
	if op.Flags&^renameNoReplace != 0 {
		return nil, errf(syscall.EXDEV, "rename %q: exchanging or leaving a whiteout for a directory on another MDT is not supported", srcName)
	}
	if stickyDenies(sp.ino, op.Remote, x.cred) {
		return nil, errf(syscall.EPERM, "rename %q: sticky directory", srcName)
	}
	if spf == dpf && srcName == dstName {
		return &pb.Reply{Inode: stripLinks(op.Remote)}, nil
	}
	if _, _, found, err := lookupName(x.b, dp.local, dstName); err != nil {
		return nil, err
	} else if found {
		if op.Flags&renameNoReplace != 0 {
			return nil, errf(syscall.EEXIST, "rename to %q in %s", dstName, dpf)
		}
		return nil, errf(syscall.EXDEV, "rename %q onto %q: replacing a name by a directory of another MDT is not supported", srcName, dstName)
	}
	if spf != dpf {
		if in, err := x.isAncestor(sf, dpf); err != nil {
			return nil, err
		} else if in {
			return nil, errf(syscall.EINVAL, "move directory %q into itself", srcName)
		}
		if x.cred.Uid != 0 && !(op.Remote.Uid == x.cred.Uid && op.Remote.Mode&0o200 != 0) && op.Remote.Mode&0o002 == 0 {
			// Its ".." changes: write access to it, by its mode bits (its
			// ACL is on its own MDT).
			return nil, errf(syscall.EACCES, "move directory %q to another parent", srcName)
		}
	}
	x.b.Delete(DirentKey(sp.local, srcName))
	x.b.Set(DirentKey(dp.local, dstName), encodeRemoteDirent(sf, styp))
	x.renamedParents(spf, dpf, sp, dp, true)
	out := stripLinks(op.Remote)
	out.CtimeNs = x.now
	return &pb.Reply{Inode: out}, nil
}
