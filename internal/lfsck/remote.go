package lfsck

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/mdt"
)

// The namespace check across MDTs. A remote directory's name is an entry
// here (flagged remote) whose object is on another MDT, or an object here
// whose linkEA names a parent on another MDT: phase 1 traces each such
// half, and phase 2 asks the other MDT for the other half (Env.Remote).
//
//   - A remote entry whose directory the other MDT does not have is
//     remote_dangling: the entry goes (the parent's nlink follows), as
//     nothing can be read through it; what the lost directory held is the
//     other MDT's orphans.
//   - A directory whose entry on the parent's MDT is gone (or names
//     something else) is remote_lost_dirent: the entry is put back on the
//     parent's MDT (RemoteEntryOp) if the name is free, else reported.
//
// A name a cross-MDT transaction is changing (a record of it here) is
// left alone: it is not damage, and the transaction finishes it.

func (ns *nsCheck) verifyRemote(it *pb.LfsckTraceItem) error {
	r := ns.r
	rm := r.env.Remote
	if rm == nil {
		return nil // one MDT: a remote name is the checker of a later release's
	}
	db := r.env.Target.DB()
	child, parent, name := fid.FromPB(it.Child), fid.FromPB(it.Parent), string(it.Name)
	ctx, cancel := context.WithTimeout(r.ctx, r.env.RPCTimeout)
	defer cancel()
	switch it.Kind {
	case itemRemoteEntry:
		k := mdt.DirentKey(it.Local, name)
		v, err := db.Get(k)
		if err != nil {
			return nil // gone since the scan
		}
		if cf, _, ok := mdt.DecodeDirent(v); !ok || cf != child || !mdt.DirentRemote(v) {
			return nil
		}
		_, err = rm.Getattr(ctx, child)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("remote entry %q of %s: read %s on its MDT: %w", name, parent, child, err)
		}
		if mdt.DtxInvolves(db, child) {
			return nil
		}
		r.found(Namespace)
		r.log.Info("remote entry names a directory its MDT does not have; removing the entry", "parent", parent, "name", name, "fid", child)
		r.rep.add(Namespace, nil, &pb.LfsckRepair{Component: Namespace, Kinds: []uint32{KNsRemoteDangling},
			Conds: []*pb.LfsckCond{condVal(k, v)},
			Muts:  []*pb.LfsckMut{delMut(k), {M: &pb.LfsckMut_DirNlink{DirNlink: parent.PB()}}}})
	case itemRemoteClaim:
		ok := mdt.ObjKey(it.Local)
		v, err := db.Get(ok)
		if err != nil {
			return nil
		}
		got, remote, err := rm.Lookup(ctx, parent, name)
		if err == nil && remote && got == child {
			return nil
		}
		if err != nil && !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("remote directory %s: read its entry %q in %s: %w", child, name, parent, err)
		}
		if mdt.DtxInvolves(db, child) {
			return nil
		}
		r.found(Namespace)
		if r.dry {
			r.rep.add(Namespace, nil, &pb.LfsckRepair{Component: Namespace, Kinds: []uint32{KNsRemoteLost}, Conds: []*pb.LfsckCond{condVal(ok, v)}})
			return nil
		}
		if err == nil {
			// The name is there, naming something else: not ours to
			// replace.
			r.log.Warn("remote directory's name is taken on the parent's MDT; reported, not repaired", "fid", child, "parent", parent, "name", name, "names", got)
			r.report(Namespace, KNsRemoteLost, ok, v)
			return nil
		}
		if err := rm.Relink(ctx, parent, name, child, it.Type); err != nil {
			r.log.Warn("remote directory's lost entry not put back", "fid", child, "parent", parent, "name", name, "err", err)
			r.report(Namespace, KNsRemoteLost, ok, v)
			return nil
		}
		r.log.Info("put back a remote directory's lost entry on the parent's MDT", "fid", child, "parent", parent, "name", name)
		r.rep.add(Namespace, nil, &pb.LfsckRepair{Component: Namespace, Kinds: []uint32{KNsRemoteLost}, RepairedElsewhere: true})
	}
	return nil
}
