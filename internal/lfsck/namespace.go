package lfsck

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
	"sync/atomic"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
)

// The namespace check. Phase 1 pairs every directory entry with the
// linkEA entry of the object it names (a name pair: parent, name, child,
// type), as the scan reads each directory's entries and each object's
// linkEA, and checks what one object shows by itself (its nlink against
// its names, a directory's nlink against its subdirectories). What is left
// unpaired at the end, and the objects that need a look, are the trace.
//
// Phase 2 re-verifies every item of the trace on fresh state, object by
// object (the trace is ordered by the FID of the object concerned), and
// repairs it by the rules of docs/lfsck.md (Lustre's trust rules, lessons
// §9.5): reconcile.go.

// Trace item kinds and flags.
const (
	itemEntry  = 1 // a directory entry names child (its linkEA did not match)
	itemClaim  = 2 // child's linkEA names parent/name (no entry matched)
	itemObject = 3 // child needs a look: flags say why
	// The names that cross MDTs, paired in phase 2 by asking the other
	// MDT (remote.go).
	itemRemoteEntry = 4 // a remote entry here names child on another MDT
	itemRemoteClaim = 5 // child's linkEA names parent/name on another MDT

	flagGarbage = 1 // the entry does not decode or names no sane FID
	flagNames   = 2 // a directory with no or several names
	flagNoNames = 4 // an object with no name
	flagNlink   = 8 // nlink below the number of names
	// an object whose linkEA is marked overflowed since before the run:
	// if every name is recorded by now, the mark goes
	flagOverflow = 16
	// a linkEA marked overflowed without room for some of the names left
	// out: their entries were not traced
	flagFull = 32
)

type nameKey struct {
	parent fid.FID
	name   string
}

// traceKey orders items by child, then kind, parent and name.
func traceKey(it *pb.LfsckTraceItem) []byte {
	k := mdt.LfsckTracePrefix(Namespace)
	var b [fid.Size]byte
	fid.FromPB(it.Child).Put(b[:])
	k = append(k, b[:]...)
	k = append(k, byte(it.Kind))
	fid.FromPB(it.Parent).Put(b[:])
	k = append(k, b[:]...)
	return append(k, it.Name...)
}

// nsCheck is the namespace component.
type nsCheck struct {
	r          *run
	names      *nameMatch             // phase 1's name pairs
	items      []*pb.LfsckTraceItem   // phase 1's trace items besides the pairs
	overflowed map[fid.FID]overflowed // objects whose linkEA is marked overflowed (resolveNames)
	unread     atomic.Bool            // entries of a directory were passed over (LfsckState.dirents_unread)
	dirents    *kv.Iter               // the window's entries
	trace      []*pb.LfsckTraceItem   // the trace, between post and phase 2 (a dry run's, until the end)
	// Phase 2: the items of objects found missing, to look at again once
	// the run's own creations are applied (settle), and the names their
	// linkEAs claim.
	dangling map[fid.FID][]*pb.LfsckTraceItem
	claims   map[nameKey][]fid.FID
}

// overflowed is an object whose linkEA is marked overflowed: the bytes of
// names it has room for, and its local key.
type overflowed struct {
	room  int
	local uint64
}

func newNsCheck(r *run) *nsCheck {
	ns := &nsCheck{r: r, names: newNameMatch()}
	ns.unread.Store(r.st.DirentsUnread)
	return ns
}

func (ns *nsCheck) id() uint32 { return Namespace }
func (ns *nsCheck) prep()      {}

func (ns *nsCheck) openWindow(w *window) error {
	it, err := w.snap.NewIter(mdt.DirentPrefix(w.pos), direntUpper)
	if err != nil {
		return err
	}
	it.First()
	ns.dirents = it
	return nil
}

// closeWindow ends the window's entries; after the last object, the
// entries left have no directory.
func (ns *nsCheck) closeWindow(last bool) {
	if ns.dirents == nil {
		return
	}
	if last {
		for ; ns.dirents.Valid(); ns.dirents.Next() {
			ns.orphanDirent(ns.dirents.Key(), ns.dirents.Value())
		}
	}
	ns.dirents.Close()
	ns.dirents = nil
}

func (ns *nsCheck) object(so *scanned) error {
	if so.skipped() {
		// The entries of an object passed over are not read; those of
		// one whose record does not decode have no directory.
		ns.skipDirents(so.local, so.rebuild, so.garbage)
		return nil
	}
	ns.scanObject(so)
	return nil
}

func (ns *nsCheck) endScan() error { return nil }

// post turns the pairs left unmatched into the trace.
func (ns *nsCheck) post() error {
	items, err := ns.resolveNames()
	ns.trace = items
	return err
}

// enterPhase2 records the trace (a real run's in the store; a dry run
// keeps it in memory).
func (ns *nsCheck) enterPhase2() error {
	if ns.r.dry {
		return nil
	}
	err := ns.writeTrace(ns.trace)
	ns.trace = nil
	return err
}

// phase2 re-verifies the trace, object by object (step 0 of phase 2).
func (ns *nsCheck) phase2() error {
	r := ns.r
	if step, _ := r.phase2At(); step != 0 {
		return nil
	}
	if err := ns.traceScan(); err != nil {
		return err
	}
	r.setPhase2(1, nil)
	return r.checkpoint()
}

func (ns *nsCheck) checkpoint(st *pb.LfsckState) {
	st.DirentsUnread = st.DirentsUnread || ns.unread.Load()
}

func (ns *nsCheck) quit() {}

// scanObject derives the name pairs of one object: its entries (a
// directory) and its linkEA, and checks what it can locally.
func (ns *nsCheck) scanObject(so *scanned) {
	r, snap, local, o, itD, rebuild := ns.r, so.snap, so.local, so.o, ns.dirents, so.rebuild
	isDir := o.mode&syscall.S_IFMT == syscall.S_IFDIR
	typ := mdt.DirentType(o.mode)
	subdirs, dirents := uint32(0), uint64(0)
	for ; itD.Valid(); itD.Next() {
		k := itD.Key()
		p, ok := direntParent(k)
		if ok && p > local {
			break
		}
		if !ok || p < local || !isDir {
			if !rebuild {
				ns.orphanDirent(k, itD.Value())
			}
			continue
		}
		dirents++
		name := k[17:]
		cf, ctyp, ok := mdt.DecodeDirent(itD.Value())
		if corruptEntry(o.fid, name, cf, ok) {
			// Phase 2 rewrites it from a linkEA that claims its name, or
			// removes it. Not counted as a subdirectory: the parent's
			// nlink is right once it is gone.
			ns.items = append(ns.items, &pb.LfsckTraceItem{Kind: itemEntry, Child: cf.PB(), Parent: o.fid.PB(), Name: append([]byte(nil), name...),
				Type: uint32(ctyp), Local: local, Flags: flagGarbage})
			continue
		}
		if ctyp == dtDir {
			subdirs++
		}
		if mdt.DirentRemote(itD.Value()) {
			// Its linkEA is on the other MDT: phase 2 asks it.
			r.led.add(Namespace, tStat+sRemote, 1)
			if !rebuild {
				ns.items = append(ns.items, &pb.LfsckTraceItem{Kind: itemRemoteEntry, Child: cf.PB(), Parent: o.fid.PB(), Name: append([]byte(nil), name...),
					Type: uint32(ctyp), Local: local})
			}
			continue
		}
		ns.names.entry(ns.names.hash(o.fid, name, cf, ctyp), local)
	}
	if o.fid != fid.Root {
		for _, l := range o.links {
			if l.remote {
				// Its entry is on the other MDT: phase 2 asks it.
				if !rebuild {
					ns.items = append(ns.items, &pb.LfsckTraceItem{Kind: itemRemoteClaim, Child: o.fid.PB(), Parent: l.parent.PB(), Name: append([]byte(nil), l.name...),
						Type: uint32(typ), Local: local})
				}
				continue
			}
			ns.names.claim(ns.names.hash(l.parent, l.name, o.fid, typ), local)
		}
		flags := traceFlags(isDir, o.nlink, o.links, o.linksOverflow, r.st.RunStartIndex)
		if !isDir && o.linksOverflow != 0 {
			// The room its linkEA has: resolveNames does not trace the
			// entries of names that cannot be recorded (a tree of
			// hard-linked snapshots traced every name past the bound, on
			// every run).
			if ns.overflowed == nil {
				ns.overflowed = map[fid.FID]overflowed{}
			}
			ns.overflowed[o.fid] = overflowed{room: mdt.LinksMaxBytes - linksBytes(o.links), local: local}
		}
		if flags != 0 {
			ns.items = append(ns.items, &pb.LfsckTraceItem{Kind: itemObject, Child: o.fid.PB(), Local: local, Flags: flags})
		}
	}
	if rebuild {
		return
	}
	r.led.add(Namespace, tChecked, 1+dirents)
	r.led.add(Namespace, tStat+sObjects, 1)
	r.led.add(Namespace, tStat+sDirents, dirents)
	if isDir {
		r.led.add(Namespace, tStat+sDirectories, 1)
		if dirCountWrong(o.nlink, subdirs, func() bool { return mdt.PendingOrphan(snap, o.fid) }) {
			// Conditioned on the directory being there, not on its
			// record: apply recounts the entries of the moment (and
			// refuses if the count is right by then), whereas on a
			// directory clients keep changing, a record from the scan
			// was always stale and the wrong count stayed, unreported.
			r.found(Namespace)
			oiv, _ := snap.Get(mdt.OIKey(o.fid))
			r.rep.add(Namespace, nil, &pb.LfsckRepair{Component: Namespace, Kinds: []uint32{KNsNlinks},
				Conds: []*pb.LfsckCond{condVal(mdt.OIKey(o.fid), oiv)},
				Muts:  []*pb.LfsckMut{{M: &pb.LfsckMut_DirNlink{DirNlink: o.fid.PB()}}}})
		}
	} else if o.nlink > 1 {
		r.led.add(Namespace, tStat+sMultiLinked, 1)
	}
}

// corruptEntry says whether an entry of directory parent, name naming cf
// (ok: it decodes) is corrupt: it names no sane FID, has a name create
// refuses, or makes a loop (it names the root, or .nacre other than as
// /.nacre).
func corruptEntry(parent fid.FID, name []byte, cf fid.FID, ok bool) bool {
	return !ok || cf.IsZero() || cf.Ver != 0 || badName(name) ||
		((cf == fid.Root || cf == fid.DotNacre) && loopEntry(parent, string(name), cf))
}

// traceFlags says why phase 2 must look at an object (0: it need not),
// from its type, nlink and linkEA (links, and the index of the command
// that marked it overflowed) as phase 1 read them: a directory with no or
// several names, an object with no name, nlink below the names, a linkEA
// marked overflowed before the run began (every name may be recorded by
// now), or one past the bound.
func traceFlags(isDir bool, nlink uint32, links []link, overflowMark, runStart uint64) uint32 {
	switch {
	case isDir && nlink > 0 && len(links) != 1:
		return flagNames
	case !isDir && nlink > 0 && len(links) == 0:
		return flagNoNames
	case !isDir && nlink < uint32(len(links)):
		return flagNlink
	case !isDir && overflowMark != 0 && overflowMark < runStart:
		return flagOverflow
	case !isDir && len(links) > 1 && linksBytes(links) > mdt.LinksMaxBytes:
		return flagOverflow
	}
	return 0
}

// dirCountWrong says whether a directory's nlink is not 2 plus its
// subdirectories. A directory removed while a client has it open is kept,
// with no name and no links, until that client closes it (pendingOrphan,
// read only then): not an inconsistency.
func dirCountWrong(nlink, subdirs uint32, pendingOrphan func() bool) bool {
	return nlink != 2+subdirs && !(nlink == 0 && pendingOrphan())
}

// linksBytes is mdt.LinksBytes of a decoded linkEA.
func linksBytes(ls []link) int {
	n := 0
	for _, l := range ls {
		n += mdt.LinkBytes(l.name)
	}
	return n
}

// badName says whether create would refuse a name (mdt.ValidName),
// converting it to a string only when a cheap look says it may: the scan
// reads every entry.
func badName(name []byte) bool {
	if len(name) > 2 && len(name) <= mdt.MaxNameLen && bytes.IndexByte(name, '/') < 0 && bytes.IndexByte(name, 0) < 0 {
		return false
	}
	return mdt.ValidName(string(name)) != nil
}

func direntParent(k []byte) (uint64, bool) {
	if len(k) < 17 || k[0] != 'D' {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// skipDirents passes the entries up to and including directory local's.
// The names it passes over are names the run does not see.
func (ns *nsCheck) skipDirents(local uint64, rebuild, report bool) {
	itD := ns.dirents
	for ; itD.Valid(); itD.Next() {
		p, ok := direntParent(itD.Key())
		if ok && p > local {
			return
		}
		if ok && p == local && !ns.unread.Load() {
			ns.unread.Store(true)
		}
		if !rebuild && (report || !ok || p < local) {
			ns.orphanDirent(itD.Key(), itD.Value())
		}
	}
}

func (ns *nsCheck) orphanDirent(k, v []byte) {
	ns.r.led.add(Namespace, tStat+sDirents, 1)
	ns.r.report(Namespace, KNsOrphanDirent, k, v)
}

// resolveNames turns the pairs left unmatched into trace items, reading
// the names again from fresh state (a pair whose name is gone was a change
// in flight and is dropped).
func (ns *nsCheck) resolveNames() ([]*pb.LfsckTraceItem, error) {
	r := ns.r
	items := ns.items
	ns.items = nil
	full := map[fid.FID]uint64{} // objects whose names left out were not traced -> local key
	if ns.names.pending() > 0 {
		type want struct{ entries, claims map[uint64]bool }
		bySrc := map[uint64]*want{}
		ns.names.each(func(h uint64, p pend) {
			w := bySrc[p.src]
			if w == nil {
				w = &want{map[uint64]bool{}, map[uint64]bool{}}
				bySrc[p.src] = w
			}
			if p.n > 0 {
				w.entries[h] = true
			} else {
				w.claims[h] = true
			}
		})
		srcs := make([]uint64, 0, len(bySrc))
		for s := range bySrc {
			srcs = append(srcs, s)
		}
		sort.Slice(srcs, func(i, j int) bool { return srcs[i] < srcs[j] })
		snap := r.env.Target.DB().NewSnapshot()
		defer snap.Close()
		var o object
		for _, src := range srcs {
			if r.stopping() {
				return nil, errHalted
			}
			w := bySrc[src]
			v, err := snap.Get(mdt.ObjKey(src))
			if err != nil || o.decode(v) != nil {
				continue
			}
			typ := mdt.DirentType(o.mode)
			for _, l := range o.links {
				if w.claims[ns.names.hash(l.parent, l.name, o.fid, typ)] {
					items = append(items, &pb.LfsckTraceItem{Kind: itemClaim, Child: o.fid.PB(), Parent: l.parent.PB(),
						Name: append([]byte(nil), l.name...), Type: uint32(typ), Local: src})
				}
			}
			if len(w.entries) == 0 {
				continue
			}
			p := mdt.DirentPrefix(src)
			it, err := snap.NewIter(p, kv.PrefixEnd(p))
			if err != nil {
				return nil, err
			}
			for it.First(); it.Valid(); it.Next() {
				name := it.Key()[17:]
				cf, ctyp, ok := mdt.DecodeDirent(it.Value())
				if ok && w.entries[ns.names.hash(o.fid, name, cf, ctyp)] {
					if ov, marked := ns.overflowed[cf]; marked && mdt.LinkBytes(name) > ov.room {
						full[cf] = ov.local // left out, and no room to record it
						continue
					}
					items = append(items, &pb.LfsckTraceItem{Kind: itemEntry, Child: cf.PB(), Parent: o.fid.PB(),
						Name: append([]byte(nil), name...), Type: uint32(ctyp), Local: src})
				}
			}
			err = it.Error()
			it.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	for f, local := range full {
		// Merged below with the object's own item, if it has one.
		items = append(items, &pb.LfsckTraceItem{Kind: itemObject, Child: f.PB(), Local: local, Flags: flagFull})
	}
	ns.names = newNameMatch()
	sort.Slice(items, func(i, j int) bool { return bytes.Compare(traceKey(items[i]), traceKey(items[j])) < 0 })
	out := items[:0]
	for i, it := range items {
		if i > 0 && bytes.Equal(traceKey(it), traceKey(out[len(out)-1])) {
			out[len(out)-1].Flags |= it.Flags
			continue
		}
		out = append(out, it)
	}
	return out, nil
}

// writeTrace records the trace in the store (a real run), in batches.
func (ns *nsCheck) writeTrace(items []*pb.LfsckTraceItem) error {
	r := ns.r
	for len(items) > 0 {
		n := min(len(items), 512)
		op := &pb.LfsckStateOp{}
		for _, it := range items[:n] {
			op.Set = append(op.Set, &pb.LfsckKV{Key: traceKey(it), Value: mustMarshal(it)})
		}
		if err := r.c.proposeState(r.ctx, op); err != nil {
			return fmt.Errorf("record the trace: %w", err)
		}
		items = items[n:]
	}
	return nil
}

// loadTrace reads the trace (a real run's from the store).
func (ns *nsCheck) loadTrace() ([]*pb.LfsckTraceItem, error) {
	r := ns.r
	if r.dry {
		return ns.trace, nil
	}
	p := mdt.LfsckTracePrefix(Namespace)
	it, err := r.env.Target.DB().NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*pb.LfsckTraceItem
	for it.First(); it.Valid(); it.Next() {
		t := &pb.LfsckTraceItem{}
		if proto.Unmarshal(it.Value(), t) != nil {
			continue // a damaged trace item is dropped (LU-9764)
		}
		out = append(out, t)
	}
	return out, it.Error()
}

// settle looks again at the objects phase 2 found missing that exist
// now: made by this run (-C from a directory entry, or from the OST
// objects that point back to it, in lost+found) they have one name in
// their linkEA and nlink 1, while other entries may name them too (a file
// with hard links). Reconciled now, they get every name and the right
// nlink in this run, so that removing one name (the lost+found one an
// admin cleans up) does not destroy the data the others still name. A
// dry run makes nothing: nothing is found here.
func (ns *nsCheck) settle() error {
	r := ns.r
	dangling, claims := ns.dangling, ns.claims
	ns.dangling = nil
	if len(dangling) == 0 {
		return nil
	}
	children := make([]fid.FID, 0, len(dangling))
	for c := range dangling {
		children = append(children, c)
	}
	sort.Slice(children, func(i, j int) bool { return bytes.Compare(children[i].Bytes(), children[j].Bytes()) < 0 })
	planned := map[nameKey]fid.FID{}
	for _, c := range children {
		snap := r.env.Target.DB().NewSnapshot()
		local, _, err := r.lookup(snap, c)
		snap.Close()
		if err != nil || r.isLoser(local) {
			continue // still missing: reported in phase 2
		}
		if err := ns.reconcile(c, dangling[c], claims, planned); err != nil {
			if err := r.failed(Namespace, 2, err); err != nil {
				return err
			}
		}
	}
	return r.rep.flush()
}

// traceScan reconciles the trace, object by object, from where a resumed
// run left off; the names the trace's linkEA entries claim are kept for
// settle.
func (ns *nsCheck) traceScan() error {
	r := ns.r
	items, err := ns.loadTrace()
	if err != nil {
		return err
	}
	claims := map[nameKey][]fid.FID{}
	for _, it := range items {
		if it.Kind == itemClaim {
			nk := nameKey{fid.FromPB(it.Parent), string(it.Name)}
			claims[nk] = append(claims[nk], fid.FromPB(it.Child))
		}
	}
	ns.claims = claims
	planned := map[nameKey]fid.FID{}
	_, start := r.phase2At()
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && fid.FromPB(items[j].Child) == fid.FromPB(items[i].Child) {
			j++
		}
		group := items[i:j]
		i = j
		if start != nil && bytes.Compare(traceKey(group[0]), start) < 0 {
			continue
		}
		if r.stopping() {
			return errHalted
		}
		if err := r.lim.wait(r.ctx, uint64(len(group))); err != nil {
			return err
		}
		if err := r.pac.pace(r.ctx); err != nil {
			return err
		}
		if err := fault.Hit("lfsck.phase2.item"); err != nil {
			if err := r.failed(Namespace, 2, err); err != nil {
				return err
			}
			continue
		}
		local := group[:0:0]
		for _, it := range group {
			if it.Kind != itemRemoteEntry && it.Kind != itemRemoteClaim {
				local = append(local, it)
				continue
			}
			if err := ns.verifyRemote(it); err != nil {
				if err := r.failed(Namespace, 2, err); err != nil {
					return err
				}
			}
		}
		if len(local) > 0 {
			if err := ns.reconcile(fid.FromPB(group[0].Child), local, claims, planned); err != nil {
				if err := r.failed(Namespace, 2, err); err != nil {
					return err
				}
			}
		}
		if err := r.rep.flush(); err != nil {
			return err
		}
		r.led.add2(Namespace, tChecked, uint64(len(group)))
		if i < len(items) {
			r.setPhase2(0, traceKey(items[i]))
		} else {
			r.setPhase2(0, []byte{0xff})
		}
		if err := r.maybeCheckpoint(); err != nil {
			return err
		}
	}
	return nil
}
