package lfsck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
	"nacre/internal/objrec"
)

// Phase 1: one sequential iteration of the object range in local-key
// order, with the directory entries of each directory read in the same
// pass (entries are keyed by their directory's local key, so a second
// iterator advances in step). Each window of the scan reads one pebble
// snapshot, refreshed every second, so that everything decided within a
// window is consistent; what spans windows (an entry and the linkEA of its
// child) is matched by hash and re-verified on fresh state in phase 2.

const (
	windowTime    = time.Second
	windowObjects = 1 << 16
)

var (
	direntUpper = kv.PrefixEnd(mdt.DirentLower)
	objUpper    = kv.PrefixEnd(mdt.ObjLower)
	oiUpper     = kv.PrefixEnd(mdt.OILower)
)

const dtDir = uint8(syscall.S_IFDIR >> 12)

// scan checks the objects with local keys in [from, to) (to 0: all the
// rest). With rebuild it only re-derives what phase 1 keeps in memory (a
// resumed run's part before its checkpoint): no checks, no figures.
func (r *run) scan(from, to uint64, rebuild bool) error {
	db := r.env.Target.DB()
	pos := from
	o := object{ostSeq: newSeqField(r.ost)}
	for {
		if r.stopping() {
			return errHalted
		}
		snap := db.NewSnapshot()
		next, done, err := r.scanWindow(snap, pos, to, rebuild, &o)
		snap.Close()
		if err != nil {
			return err
		}
		pos = next
		if done {
			if !rebuild {
				r.lay.advance(pos, true)
			}
			return nil
		}
	}
}

func (r *run) scanWindow(snap *kv.Snapshot, pos, to uint64, rebuild bool, o *object) (uint64, bool, error) {
	upper := objUpper
	if to != 0 {
		upper = mdt.ObjKey(to)
	}
	itO, err := snap.NewIter(mdt.ObjKey(pos), upper)
	if err != nil {
		return pos, false, err
	}
	defer itO.Close()
	var itD *kv.Iter
	if r.on(Namespace) {
		if itD, err = snap.NewIter(mdt.DirentPrefix(pos), direntUpper); err != nil {
			return pos, false, err
		}
		defer itD.Close()
		itD.First()
	}
	var itI *oiReaders
	if r.on(Scrub) && !rebuild {
		itI = &oiReaders{snap: snap, its: map[uint64]*oiReader{}}
		defer itI.close()
	}
	r.readBoundaries(snap)
	t0 := time.Now()
	n := 0
	for valid := itO.First(); valid; valid = itO.Next() {
		local, ok := mdt.ObjLocal(itO.Key())
		if !ok {
			continue
		}
		if !rebuild {
			r.pos.Store(local)
			r.lay.begin(local)
		}
		err := r.object(snap, local, itO.Value(), itD, itI, rebuild, o)
		if !rebuild {
			r.lay.end()
		}
		if err != nil {
			return local, false, err
		}
		pos = local + 1
		if !rebuild {
			r.lay.advance(pos, false)
		}
		n++
		if n&63 == 0 {
			if !rebuild {
				if err := r.lim.wait(r.ctx, 64); err != nil {
					return pos, false, err
				}
			}
			if err := r.pac.pace(r.ctx); err != nil {
				return pos, false, err
			}
			if r.stopping() {
				return pos, false, errHalted
			}
			if !rebuild {
				if err := r.maybeCheckpoint(); err != nil {
					return pos, false, err
				}
			}
			if n >= windowObjects || time.Since(t0) >= windowTime {
				return pos, false, nil
			}
		}
	}
	if err := itO.Error(); err != nil {
		return pos, false, err
	}
	// Entries of directories beyond the last object have no directory.
	if itD != nil && !rebuild && to == 0 {
		for ; itD.Valid(); itD.Next() {
			r.orphanDirent(itD.Key(), itD.Value())
		}
	}
	return pos, true, nil
}

// readBoundaries records every OST's first unassigned object as of snap:
// objects from there on are precreated, not orphans.
func (r *run) readBoundaries(snap kv.Reader) {
	lo := mdt.PoolKey(0)
	lo = lo[:len(lo)-4]
	it, err := snap.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		return
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != len(lo)+4 {
			continue
		}
		p, ok := mdt.DecodePool(it.Value())
		if !ok || p.Seq != r.ost {
			continue
		}
		r.mu.Lock()
		r.boundary[binary.BigEndian.Uint32(k[len(lo):])] = p.Next
		r.mu.Unlock()
	}
}

func direntParent(k []byte) (uint64, bool) {
	if len(k) < 17 || k[0] != 'D' {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// object checks one object (and, for a directory, its entries).
func (r *run) object(snap *kv.Snapshot, local uint64, v []byte, itD *kv.Iter, itI *oiReaders, rebuild bool, o *object) error {
	if !rebuild {
		if err := fault.Hit("lfsck.scan.object"); err != nil {
			comp := uint32(Scrub)
			for _, c := range Components {
				if r.on(c) {
					comp = c
					break
				}
			}
			if err := r.failed(comp, 1, err); err != nil {
				return err
			}
			// With -e continue the next object follows; this one's
			// entries are passed over, not taken for orphans.
			if itD != nil {
				r.skipDirents(itD, local, rebuild, false)
			}
			return nil
		}
	}
	// The OI scrub reports an object whose layout does not decode, so it
	// needs the stripes as much as the layout check does.
	derr := o.decodeSome(v, r.on(Layout) || r.on(Scrub))
	if derr != nil {
		if !rebuild {
			r.bump1(Scrub, tChecked, 1)
			r.bump1(Scrub, tStat+sObjects, 1)
			if r.on(Scrub) {
				r.report(Scrub, KOIGarbage, mdt.ObjKey(local), v)
			}
		}
		if itD != nil {
			r.skipDirents(itD, local, rebuild, true)
		}
		return nil
	}
	loser := len(r.losers) > 0 && r.losers[local]
	if r.on(Scrub) && !rebuild {
		r.bump1(Scrub, tChecked, 1)
		r.bump1(Scrub, tStat+sObjects, 1)
		l, err := r.checkOI(snap, local, v, o, itI)
		if err != nil {
			if err := r.failed(Scrub, 1, err); err != nil {
				return err
			}
		}
		loser = l
	} else if len(r.overlay) > 0 {
		if m, ok := r.overlay[o.fid]; ok && m != local {
			loser = true
		}
	}
	if rebuild && r.on(Scrub) && !loser {
		// Checked before the checkpoint: its OI entry was confirmed (or
		// repaired) then, so the OI range scan need not read it again.
		r.confirmed.set(o.fid)
	}
	if loser {
		if itD != nil {
			r.skipDirents(itD, local, rebuild, false)
		}
		return nil
	}
	if itD != nil {
		r.nsObject(snap, local, v, o, itD, rebuild)
	}
	if r.on(Layout) {
		r.layoutObject(local, v, o, rebuild)
	}
	return nil
}

// skipDirents passes the entries up to and including directory local's.
// The names it passes over are names the run does not see.
func (r *run) skipDirents(itD *kv.Iter, local uint64, rebuild, report bool) {
	for ; itD.Valid(); itD.Next() {
		p, ok := direntParent(itD.Key())
		if ok && p > local {
			return
		}
		if ok && p == local && !r.direntsUnread.Load() {
			r.direntsUnread.Store(true)
		}
		if !rebuild && (report || !ok || p < local) {
			r.orphanDirent(itD.Key(), itD.Value())
		}
	}
}

func (r *run) orphanDirent(k, v []byte) {
	if !r.on(Namespace) {
		return
	}
	r.bump1(Namespace, tStat+sDirents, 1)
	r.report(Namespace, KNsOrphanDirent, k, v)
}

// ---- OI scrub --------------------------------------------------------

// checkOI checks that the OI maps o's FID to local, repairing it if not.
// It reports whether this object lost a conflict over its FID (another
// object with the same FID is the one to keep).
func (r *run) checkOI(snap *kv.Snapshot, local uint64, v []byte, o *object, ois *oiReaders) (bool, error) {
	f := o.fid
	if len(r.overlay) > 0 {
		if w, ok := r.overlay[f]; ok {
			// Decided earlier in this run (a conflict seen from the other side).
			return w != local, nil
		}
	}
	key := mdt.OIKey(f)
	ovKey := mdt.ObjKey(local)
	oi, err := ois.get(f.Seq)
	if err != nil {
		return false, err
	}
	itI := oi.it
	if !oi.find(key) {
		if err := itI.Error(); err != nil {
			return false, err
		}
		r.found(Scrub)
		r.rep.add(Scrub, nil, &pb.LfsckRepair{Component: Scrub, Kinds: []uint32{KOIMissing},
			Conds: []*pb.LfsckCond{condVal(ovKey, v), condAbsent(key)},
			Muts:  []*pb.LfsckMut{setMut(key, be64(local))}})
		r.setOverlay(f, local)
		r.confirmed.set(f)
		return false, nil
	}
	cur := itI.Value()
	other := binary.BigEndian.Uint64(pad8(cur))
	if len(cur) == 8 && other == local {
		r.confirmed.set(f)
		return false, nil
	}
	ov, err := snap.Get(mdt.ObjKey(other))
	var oo object
	otherClaims := err == nil && len(cur) == 8 && oo.decode(ov) == nil && oo.fid == f
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return false, err
	}
	r.found(Scrub)
	if !otherClaims {
		conds := []*pb.LfsckCond{condVal(ovKey, v), condVal(key, cur)}
		r.rep.add(Scrub, nil, &pb.LfsckRepair{Component: Scrub, Kinds: []uint32{KOIStale}, Conds: conds,
			Muts: []*pb.LfsckMut{setMut(key, be64(local))}})
		r.setOverlay(f, local)
		r.confirmed.set(f)
		return false, nil
	}
	// Two objects claim f: keep the later-modified one (then the one with
	// names, then the OI's choice). A loser that holds nothing the winner
	// does not (a stale copy) is removed; one that differs is reported.
	win, lose, wv, lv := other, local, ov, v
	if o.mtime > oo.mtime || (o.mtime == oo.mtime && len(o.links) > len(oo.links)) {
		win, lose, wv, lv = local, other, v, ov
	}
	r.setOverlay(f, win)
	r.losers[lose] = true
	r.confirmed.set(f)
	rep := &pb.LfsckRepair{Component: Scrub, Kinds: []uint32{KOIConflict},
		Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(win), wv), condVal(mdt.ObjKey(lose), lv), condVal(key, cur)}}
	if sameContent(wv, lv) {
		if win != other {
			rep.Muts = append(rep.Muts, setMut(key, be64(win)))
		}
		rep.Muts = append(rep.Muts, delMut(mdt.ObjKey(lose)))
		rep.InodesDelta = -1
		// Its extended attributes go with it.
		p := mdt.XattrPrefix(lose)
		if it, err := snap.NewIter(p, kv.PrefixEnd(p)); err == nil {
			for it.First(); it.Valid(); it.Next() {
				rep.Muts = append(rep.Muts, delMut(append([]byte(nil), it.Key()...)))
			}
			it.Close()
		}
	} else {
		if win != other {
			rep.Muts = append(rep.Muts, setMut(key, be64(win)))
		} else {
			rep.ReportKey = mdt.ObjKey(lose)
		}
	}
	r.rep.add(Scrub, nil, rep)
	return lose == local, nil
}

func pad8(b []byte) []byte {
	if len(b) >= 8 {
		return b[:8]
	}
	return append(make([]byte, 8-len(b)), b...)
}

// sameContent reports whether two object records differ only in times.
func sameContent(a, b []byte) bool {
	ia, ib := &pb.Inode{}, &pb.Inode{}
	if proto.Unmarshal(a, ia) != nil || proto.Unmarshal(b, ib) != nil {
		return false
	}
	for _, i := range []*pb.Inode{ia, ib} {
		i.AtimeNs, i.MtimeNs, i.CtimeNs = 0, 0, 0
	}
	return proto.Equal(ia, ib)
}

// scanOI checks the OI range for entries that name no object: every entry
// the object scan did not confirm is looked up.
func (r *run) scanOI() error {
	db := r.env.Target.DB()
	var pos []byte = mdt.OILower
	for {
		snap := db.NewSnapshot()
		next, done, err := r.scanOIWindow(snap, pos)
		snap.Close()
		if err != nil || done {
			return err
		}
		pos = next
	}
}

func (r *run) scanOIWindow(snap *kv.Snapshot, pos []byte) ([]byte, bool, error) {
	it, err := snap.NewIter(pos, oiUpper)
	if err != nil {
		return nil, false, err
	}
	defer it.Close()
	t0 := time.Now()
	n, looked := 0, 0
	var o object
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		n++
		if n&255 == 0 {
			if r.stopping() {
				return nil, false, errHalted
			}
			if time.Since(t0) >= windowTime {
				return append([]byte(nil), k...), false, nil
			}
		}
		if len(k) != 1+fid.Size {
			continue
		}
		f, _ := fid.FromBytes(k[1:])
		if r.confirmed.has(f) {
			continue
		}
		if _, ok := r.overlay[f]; ok {
			continue
		}
		v := it.Value()
		// Entries the object scan did not confirm cost a read of the
		// store each: they keep to the speed limit (-s) as objects do.
		looked++
		if looked&63 == 0 {
			if err := r.lim.wait(r.ctx, 64); err != nil {
				return nil, false, err
			}
		}
		if len(v) == 8 {
			ov, err := snap.Get(mdt.ObjKey(binary.BigEndian.Uint64(v)))
			if err == nil && o.decode(ov) == nil && o.fid == f {
				continue // created after the object scan passed
			}
			if err != nil && !errors.Is(err, kv.ErrNotFound) {
				return nil, false, err
			}
		}
		r.found(Scrub)
		conds := []*pb.LfsckCond{condVal(k, v)}
		if len(v) == 8 {
			ok := mdt.ObjKey(binary.BigEndian.Uint64(v))
			if ov, err := snap.Get(ok); err == nil {
				conds = append(conds, condVal(ok, ov))
			} else {
				conds = append(conds, condAbsent(ok))
			}
		}
		r.rep.add(Scrub, nil, &pb.LfsckRepair{Component: Scrub, Kinds: []uint32{KOIDangling}, Conds: conds,
			Muts: []*pb.LfsckMut{delMut(append([]byte(nil), k...))}})
	}
	return nil, true, it.Error()
}

// ---- namespace -------------------------------------------------------

// nsObject derives the name pairs of one object: its entries (a
// directory) and its linkEA, and checks what it can locally.
func (r *run) nsObject(snap *kv.Snapshot, local uint64, v []byte, o *object, itD *kv.Iter, rebuild bool) {
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
				r.orphanDirent(k, itD.Value())
			}
			continue
		}
		dirents++
		name := k[17:]
		cf, ctyp, ok := mdt.DecodeDirent(itD.Value())
		if !ok || cf.IsZero() || cf.Ver != 0 || badName(name) ||
			((cf == fid.Root || cf == fid.DotNacre) && loopEntry(o.fid, string(name), cf)) {
			// A corrupt entry: phase 2 rewrites it from a linkEA that
			// claims its name, or removes it. One with an invalid name
			// or one that makes a loop (naming the root or .nacre) is
			// removed; not counted as a subdirectory, the parent's nlink
			// is right once it is gone.
			r.items = append(r.items, &pb.LfsckTraceItem{Kind: itemEntry, Child: cf.PB(), Parent: o.fid.PB(), Name: append([]byte(nil), name...),
				Type: uint32(ctyp), Local: local, Flags: flagGarbage})
			continue
		}
		if ctyp == dtDir {
			subdirs++
		}
		r.names.entry(r.names.hash(o.fid, name, cf, ctyp), local)
	}
	if o.fid != fid.Root {
		for _, l := range o.links {
			r.names.claim(r.names.hash(l.parent, l.name, o.fid, typ), local)
		}
		flags := uint32(0)
		switch {
		case isDir && o.nlink > 0 && len(o.links) != 1:
			flags = flagNames
		case !isDir && o.nlink > 0 && len(o.links) == 0:
			flags = flagNoNames
		case !isDir && o.nlink < uint32(len(o.links)):
			flags = flagNlink
		case !isDir && o.linksOverflow != 0 && o.linksOverflow < r.st.RunStartIndex:
			flags = flagOverflow
		case !isDir && len(o.links) > 1 && linksBytes(o.links) > mdt.LinksMaxBytes:
			flags = flagOverflow
		}
		if !isDir && o.linksOverflow != 0 {
			// The room its linkEA has: resolveNames does not trace the
			// entries of names that cannot be recorded (a tree of
			// hard-linked snapshots traced every name past the bound, on
			// every run).
			if r.overflowed == nil {
				r.overflowed = map[fid.FID]overflowed{}
			}
			r.overflowed[o.fid] = overflowed{room: mdt.LinksMaxBytes - linksBytes(o.links), local: local}
		}
		if flags != 0 {
			r.items = append(r.items, &pb.LfsckTraceItem{Kind: itemObject, Child: o.fid.PB(), Local: local, Flags: flags})
		}
	}
	if rebuild {
		return
	}
	r.bump1(Namespace, tChecked, 1+dirents)
	r.bump1(Namespace, tStat+sObjects, 1)
	r.bump1(Namespace, tStat+sDirents, dirents)
	if isDir {
		r.bump1(Namespace, tStat+sDirectories, 1)
		// A directory removed while a client has it open is kept, with no
		// name and no links, until that client closes it: not an
		// inconsistency.
		if o.nlink != 2+subdirs && !(o.nlink == 0 && mdt.PendingOrphan(snap, o.fid)) {
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
		r.bump1(Namespace, tStat+sMultiLinked, 1)
	}
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

// ---- layout (MDT side) -----------------------------------------------

func (r *run) layoutObject(local uint64, v []byte, o *object, rebuild bool) {
	if o.mode&syscall.S_IFMT != syscall.S_IFREG || !o.hasLayout {
		return
	}
	l := &o.layout
	if !rebuild {
		r.bump1(Layout, tStat+sFiles, 1)
	}
	bad := (l.pattern != 0 && l.pattern != 1) || l.stripeSize == 0 || l.stripeSize%(64<<10) != 0 || len(l.objs) > 2000
	for _, s := range l.objs {
		if s.seq != r.ost && (s.seq != 0 || s.oid != 0) {
			bad = true
		}
	}
	// In phase 1 (not the rebuild before a phase-2 resume), every stripe
	// is recorded in the table of expectations (summary.go) or, without
	// room or when named twice, queued object by object.
	exp := r.exp
	if r.st.Phase > 1 {
		exp = nil
	}
	checks := r.checkBuf[:0]
	encoded, summed, filed := false, false, false
	var shared, seqPart uint64
	var file uint32
	recorded := uint64(0)
	rec := objrec.Rec{Parent: o.fid, StripeSize: l.stripeSize, StripeCount: uint32(len(l.objs)), Gen: l.gen,
		UID: o.uid, GID: o.gid, ProjID: o.projid}
	for i, s := range l.objs {
		if s.seq == 0 && s.oid == 0 {
			continue // a hole
		}
		dup := false
		if s.seq == r.ost {
			ref := r.refsOf(s.ost)
			var in bool
			if dup, in = ref.testSetIn(s.oid); !in {
				dup = ref.testSet(s.oid)
			}
			if dup {
				r.dups[s] = true
			}
		}
		if bad || (rebuild && exp == nil) {
			continue
		}
		if exp != nil {
			if dup {
				exp.markDup(s.ost, s.oid)
			} else {
				if !summed {
					// Every stripe recorded has our sequence (bad
					// otherwise).
					shared, seqPart, summed = objrec.SumShared(&rec), objrec.SumSeq(r.ost), true
					file, filed = exp.fileOf(local)
				}
				if filed {
					dig := objrec.SumDigestSeq(shared, seqPart, s.oid, uint32(i))
					if p := exp.page(s.ost, s.oid); p != nil && p.setNew(s.oid, dig, file) {
						recorded++
						continue
					}
					if exp.record(s.ost, s.oid, dig, file) {
						recorded++
						continue
					}
				}
			}
		}
		if rebuild {
			continue
		}
		if !encoded {
			r.enc.Reset(&rec)
			encoded = true
		}
		checks = append(checks, checkItem{ost: s.ost, seq: s.seq, oid: s.oid, digest: r.enc.Digest(s.seq, s.oid, uint32(i)), slot: uint32(i)})
	}
	if rebuild {
		return
	}
	if bad {
		r.found(Layout)
		r.report(Layout, KLyBadLayout, mdt.ObjKey(local), v)
		return
	}
	if recorded > 0 {
		// Counted as checked when recorded, as queued checks are when
		// queued; verify counts nothing again.
		r.bump1(Layout, tChecked, recorded)
		r.bump1(Layout, tStat+sStripes, recorded)
	}
	if len(checks) > 0 {
		r.lay.add(local, o.fid, checks)
	}
	r.checkBuf = checks[:0]
}

// ---- helpers ---------------------------------------------------------

func condVal(k, v []byte) *pb.LfsckCond {
	return &pb.LfsckCond{Key: append([]byte(nil), k...), Digest: mdt.Digest(v)}
}

func condAbsent(k []byte) *pb.LfsckCond {
	return &pb.LfsckCond{Key: append([]byte(nil), k...), Absent: true}
}

func setMut(k, v []byte) *pb.LfsckMut {
	return &pb.LfsckMut{M: &pb.LfsckMut_Set{Set: &pb.LfsckKV{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)}}}
}

func delMut(k []byte) *pb.LfsckMut {
	return &pb.LfsckMut{M: &pb.LfsckMut_Del{Del: append([]byte(nil), k...)}}
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// refsOf is OST ost's bitmap of named objects, created on first use (a
// slice indexed by OST in front of the map: one lookup per stripe).
func (r *run) refsOf(ost uint32) *bitmap {
	if int(ost) < len(r.refsIdx) {
		if bm := r.refsIdx[ost]; bm != nil {
			return bm
		}
	}
	bm := r.refs[ost]
	if bm == nil {
		bm = &bitmap{}
		r.refs[ost] = bm
	}
	if ost < 1<<16 {
		for int(ost) >= len(r.refsIdx) {
			r.refsIdx = append(r.refsIdx, nil)
		}
		r.refsIdx[ost] = bm
	}
	return bm
}

// bump1 adds to a phase-1 figure (attributed to the work in flight, see
// layoutChecker.bump).
func (r *run) bump1(comp uint32, slot int, n uint64) { r.lay.bump(comp, slot, n) }

// report counts an inconsistency that is not repaired, once per run and
// key, if key still holds v (the value it was found in).
func (r *run) report(comp, kind uint32, key, v []byte) {
	r.found(comp)
	rk := append([]byte{byte(kind)}, key...)
	rep := &pb.LfsckRepair{Component: comp, Kinds: []uint32{kind}, ReportKey: rk}
	if v != nil {
		rep.Conds = []*pb.LfsckCond{condVal(key, v)}
	}
	r.rep.add(comp, nil, rep)
}

// ---- OI readers ------------------------------------------------------

// oiReaders reads the OI for the scrub, one iterator per FID sequence.
// The object scan goes in local-key order and the OI is keyed by FID. A
// seek per object cost 40 % of the scrub at a million files (each seek
// goes through every level), while FIDs of a sequence are allocated in
// the order their objects are created: the next object's OI entry is
// nearly always the next key of its sequence's iterator, one step away
// (find). An iterator per sequence keeps that true when several
// sequences are created at once.
type oiReaders struct {
	snap *kv.Snapshot
	its  map[uint64]*oiReader
	tick uint64
}

type oiReader struct {
	it         *kv.Iter
	used       uint64
	positioned bool
}

// find positions the iterator at key if it exists: by a few steps forward
// when key is just ahead, by a seek otherwise.
func (r *oiReader) find(key []byte) bool {
	it := r.it
	if r.positioned && it.Valid() {
		c := bytes.Compare(it.Key(), key)
		if c == 0 {
			return true
		}
		// Only forward: from a key before key, the first key at or after
		// it decides.
		for steps := 0; c < 0 && steps < 4; steps++ {
			if !it.Next() {
				return false // nothing at or after key in this sequence
			}
			if c = bytes.Compare(it.Key(), key); c >= 0 {
				return c == 0
			}
		}
	}
	r.positioned = true
	return it.SeekGE(key) && bytes.Equal(it.Key(), key)
}

// maxOIReaders bounds the open iterators (each holds a few blocks).
const maxOIReaders = 32

func (o *oiReaders) get(seq uint64) (*oiReader, error) {
	o.tick++
	if r := o.its[seq]; r != nil {
		r.used = o.tick
		return r, nil
	}
	if len(o.its) >= maxOIReaders {
		var old uint64
		oldest := o.tick
		for s, r := range o.its {
			if r.used < oldest {
				old, oldest = s, r.used
			}
		}
		o.its[old].it.Close()
		delete(o.its, old)
	}
	upper := oiUpper
	if seq != ^uint64(0) {
		upper = mdt.OIKey(fid.FID{Seq: seq + 1})
	}
	it, err := o.snap.NewIter(mdt.OIKey(fid.FID{Seq: seq}), upper)
	if err != nil {
		return nil, err
	}
	r := &oiReader{it: it, used: o.tick}
	o.its[seq] = r
	return r, nil
}

func (o *oiReaders) close() {
	for _, r := range o.its {
		r.it.Close()
	}
	clear(o.its)
}

// ---- name matching ---------------------------------------------------

// nameMatch pairs directory entries with linkEA entries: an entry adds
// +1 under the hash of (parent, name, child, type), a linkEA entry -1; what
// is left at the end is uncertain and goes to the trace. Each pending hash
// keeps the local key of the object it came from, so phase 2 can find the
// name again.
//
// Matching in one table slowed the scan as the tree grew (-27 % from 0.1M
// to 2M files, docs/benchmarks.md): a PopD tree's directories come first
// in key order, so nearly every pair waits for its other half, the table
// outgrows the CPU caches and each name costs two cache misses. Instead
// the pairs are appended, in order, to one of 256 partitions by hash and
// folded a partition at a time, through one scratch table small enough to
// stay in cache; what a partition leaves pending is kept as a short list
// until the next fold. Order within a hash is kept, so the result is the
// same as folding one at a time. Buffers are fixed-size chunks, reused
// after a fold: growing slices and one table per partition had allocated
// 587 MB per run at 2 million files.
type nameMatch struct {
	parts    [nameParts]namePart
	buffered int
	foldAt   int
	left     int // pairs left pending by the last fold
	folds    int
	scratch  pendTable
	free     [][]nameOp
	seed     maphash.Seed
	buf      []byte
}

const (
	namePartShift = 56
	nameParts     = 1 << (64 - namePartShift)
	// nameFoldAt is the fewest buffered pairs (16 bytes each: 64 MiB) that
	// make a fold before the end of the scan; a fold also waits until
	// there are at least as many as it must re-read pending, so that a
	// huge tree with most pairs pending costs no more than twice the
	// appends (not one re-read of everything pending per 4 million).
	nameFoldAt = 1 << 22
	nameChunk  = 2048 // pairs per buffer chunk (32 KiB)
)

// namePart is one partition: the chunks of pairs not yet folded (the last
// one being filled) and the pairs left pending by the folds so far.
type namePart struct {
	chunks [][]nameOp
	left   []pendEntry
}

type pendEntry struct {
	h uint64
	p pend
}

// nameOp is a buffered pair; the low bit of h (always set in a hash) is
// cleared for a linkEA entry (-1).
type nameOp struct{ h, src uint64 }

type pend struct {
	src uint64
	n   int32
}

func newNameMatch() *nameMatch {
	return &nameMatch{seed: maphash.MakeSeed(), foldAt: nameFoldAt}
}

func (nm *nameMatch) hash(parent fid.FID, name []byte, child fid.FID, typ uint8) uint64 {
	b := nm.buf[:0]
	var f [fid.Size]byte
	parent.Put(f[:])
	b = append(b, f[:]...)
	child.Put(f[:])
	b = append(b, f[:]...)
	b = append(b, typ)
	b = append(b, name...)
	nm.buf = b
	return maphash.Bytes(nm.seed, b) | 1 // 0 marks a free slot
}

// entry records a directory entry with hash h, found in object src.
func (nm *nameMatch) entry(h, src uint64) { nm.push(nameOp{h, src}) }

// claim records a linkEA entry with hash h, found in object src.
func (nm *nameMatch) claim(h, src uint64) { nm.push(nameOp{h &^ 1, src}) }

func (nm *nameMatch) push(op nameOp) {
	p := &nm.parts[op.h>>namePartShift]
	n := len(p.chunks)
	if n == 0 || len(p.chunks[n-1]) == nameChunk {
		var c []nameOp
		if k := len(nm.free); k > 0 {
			c, nm.free = nm.free[k-1], nm.free[:k-1]
		} else {
			c = make([]nameOp, 0, nameChunk)
		}
		p.chunks = append(p.chunks, c)
		n++
	}
	p.chunks[n-1] = append(p.chunks[n-1], op)
	if nm.buffered++; nm.buffered >= nm.foldAt && nm.buffered >= nm.left {
		nm.fold()
	}
}

// fold applies every buffered pair to what its partition left pending.
func (nm *nameMatch) fold() {
	if nm.buffered == 0 {
		return
	}
	t := &nm.scratch
	for i := range nm.parts {
		p := &nm.parts[i]
		if len(p.chunks) == 0 {
			continue
		}
		for _, e := range p.left {
			*t.find(e.h) = e.p
		}
		for _, c := range p.chunks {
			for _, op := range c {
				d := int32(-1)
				if op.h&1 != 0 {
					d = 1
				}
				t.add(op.h|1, d, op.src)
			}
			nm.free = append(nm.free, c[:0])
		}
		clear(p.chunks)
		p.chunks = p.chunks[:0]
		p.left = p.left[:0]
		t.drain(func(h uint64, v pend) { p.left = append(p.left, pendEntry{h, v}) })
	}
	nm.folds++
	nm.left = 0
	for i := range nm.parts {
		nm.left += len(nm.parts[i].left)
	}
	nm.buffered = 0
}

// pending is the number of pairs still waiting for their other half.
func (nm *nameMatch) pending() int {
	nm.fold()
	return nm.left
}

// each calls fn for every pending pair.
func (nm *nameMatch) each(fn func(h uint64, p pend)) {
	nm.fold()
	for i := range nm.parts {
		for _, e := range nm.parts[i].left {
			fn(e.h, e.p)
		}
	}
}

// add folds d into the pending count of h; src is the object it came from.
func (t *pendTable) add(h uint64, d int32, src uint64) {
	p := t.find(h)
	if p.n == 0 {
		p.src, p.n = src, d
		return
	}
	p.n += d
	if p.n == 0 {
		t.remove(h)
		return
	}
	if (p.n > 0) == (d > 0) {
		p.src = src
	}
}

// pendTable is an open-addressing hash table of pending pairs (linear
// probing, backward-shift deletion): cheaper than a Go map for the one
// insert and one delete every name costs.
type pendTable struct {
	keys []uint64
	vals []pend
	n    int
}

func (t *pendTable) slot(h uint64) int { return int(h>>7) & (len(t.keys) - 1) }

// find returns the entry of h, inserting an empty one if absent.
func (t *pendTable) find(h uint64) *pend {
	if (t.n+1)*2 > len(t.keys) {
		t.grow()
	}
	i := t.slot(h)
	for {
		switch t.keys[i] {
		case h:
			return &t.vals[i]
		case 0:
			t.keys[i] = h
			t.vals[i] = pend{}
			t.n++
			return &t.vals[i]
		}
		i = (i + 1) & (len(t.keys) - 1)
	}
}

func (t *pendTable) remove(h uint64) {
	if len(t.keys) == 0 {
		return
	}
	mask := len(t.keys) - 1
	i := t.slot(h)
	for t.keys[i] != h {
		if t.keys[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	// Shift back the entries of the run that follows.
	for j := (i + 1) & mask; t.keys[j] != 0; j = (j + 1) & mask {
		home := t.slot(t.keys[j])
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.keys[i] = 0
	t.n--
}

func (t *pendTable) grow() {
	old, oldv := t.keys, t.vals
	size := max(1024, 2*len(old))
	t.keys, t.vals, t.n = make([]uint64, size), make([]pend, size), 0
	for i, k := range old {
		if k != 0 {
			*t.find(k) = oldv[i]
		}
	}
}

// drain calls fn for every pending pair and empties the table, keeping
// its size.
func (t *pendTable) drain(fn func(h uint64, p pend)) {
	if t.n == 0 {
		return
	}
	for i, k := range t.keys {
		if k != 0 {
			fn(k, t.vals[i])
			t.keys[i] = 0
		}
	}
	t.n = 0
}

// ---- bitmaps ---------------------------------------------------------

// bitmap is a growable bit set of object ids.
type bitmap struct{ w []uint64 }

const maxBitmapOid = 1 << 32

func (b *bitmap) set(i uint64) {
	if i >= maxBitmapOid {
		return
	}
	for uint64(len(b.w)) <= i/64 {
		b.w = append(b.w, make([]uint64, len(b.w)+1)...)
	}
	b.w[i/64] |= 1 << (i % 64)
}

// testSet sets bit i and reports whether it was set already.
func (b *bitmap) testSet(i uint64) bool {
	was := b.test(i)
	b.set(i)
	return was
}

// testSetIn is testSet for an i within the bitmap's words (ok false:
// beyond them, call testSet), small enough to be inlined into the layout
// check's loop over stripes.
func (b *bitmap) testSetIn(i uint64) (was, ok bool) {
	if w := i / 64; w < uint64(len(b.w)) {
		old := b.w[w]
		b.w[w] = old | 1<<(i%64)
		return old>>(i%64)&1 != 0, true
	}
	return false, false
}

func (b *bitmap) test(i uint64) bool {
	if i/64 >= uint64(len(b.w)) {
		return false
	}
	return b.w[i/64]&(1<<(i%64)) != 0
}

// bytes returns bits [from, to) as bytes, LSB first (LfsckOrphansRequest).
func (b *bitmap) bytes(from, to uint64) []byte {
	out := make([]byte, (to-from+7)/8)
	for i := from; i < to; i++ {
		if b.test(i) {
			out[(i-from)/8] |= 1 << ((i - from) % 8)
		}
	}
	return out
}

// fidBitmap is a bit set of FIDs of normal sequences.
type fidBitmap map[uint64]*bitmap

func (m fidBitmap) set(f fid.FID) {
	if f.Ver != 0 || f.Oid >= fid.Width {
		return
	}
	b := m[f.Seq]
	if b == nil {
		b = &bitmap{}
		m[f.Seq] = b
	}
	b.set(uint64(f.Oid))
}

func (m fidBitmap) has(f fid.FID) bool {
	b := m[f.Seq]
	return b != nil && f.Ver == 0 && b.test(uint64(f.Oid))
}

func (r *run) setOverlay(f fid.FID, local uint64) {
	r.omu.Lock()
	r.overlay[f] = local
	r.omu.Unlock()
}
