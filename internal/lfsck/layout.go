package lfsck

import (
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
	"nacre/internal/objrec"
)

// The layout check: every layout slot of every regular file is compared
// with its OST object's record (PFID, stripe, owner; internal/objrec). In
// phase 1 the scan records, for every stripe, the digest of the record
// its object should hold in a table that the OSTs' summaries settle
// (summary.go); what they do not settle is checked object by object
// (queue.go). With -o, phase 2 looks for the OST objects no layout names
// and adopts them (orphan.go), after giving back the slots whose object
// is missing to the orphans that claim them (lost.go).

// layoutCheck is the layout component.
type layoutCheck struct {
	r   *run
	q   *checkQueue   // object-by-object checks in flight
	exp *expectations // phase 1's table and the OSTs' summaries (nil: off)
	// refs: the OST objects of our sequence a layout names, a bitmap per
	// OST (refsIdx: the same by OST index, in front of the map; refsOf).
	refs     map[uint32]*bitmap
	refsIdx  []*bitmap
	dups     map[stripe]bool   // OST objects named twice, no PFID known (resolveDups)
	boundary map[uint32]uint64 // first unassigned object per OST (pool next)
	enc      objrec.Encoder    // the scan's record digests
	checkBuf []checkItem
	orphanAt atomic.Uint64 // phase 2: OST index << 48 | object id the orphan scan asks about (reports)

	mu sync.Mutex // guards lost
	// lost: with -o, dangling slots left for after the orphan step (lost.go).
	lost map[lostSlot]stripe
}

func newLayoutCheck(r *run) *layoutCheck {
	ly := &layoutCheck{r: r, refs: map[uint32]*bitmap{}, dups: map[stripe]bool{}, boundary: map[uint32]uint64{},
		lost: map[lostSlot]stripe{}}
	ly.q = newCheckQueue(ly, int(r.st.Params.Window))
	if r.on(Layout) && r.st.Phase <= 1 {
		ly.exp = newExpectations(ly)
	}
	return ly
}

func (ly *layoutCheck) id() uint32 { return Layout }

// prep has the OSTs summarise their objects while the MDT scans.
func (ly *layoutCheck) prep() {
	if ly.exp != nil {
		ly.exp.fetch()
	}
}

func (ly *layoutCheck) openWindow(w *window) error {
	ly.readBoundaries(w.snap)
	return nil
}

// closeWindow sends the checks queued when the scan has read every object.
func (ly *layoutCheck) closeWindow(last bool) {
	if last {
		ly.q.flush()
	}
}

func (ly *layoutCheck) object(so *scanned) error {
	if !so.skipped() {
		ly.file(so)
	}
	if !so.rebuild {
		ly.q.tick()
	}
	return nil
}

// endScan waits for the checks in flight, and compares the table with the
// OSTs' summaries.
func (ly *layoutCheck) endScan() error {
	if err := ly.q.drain(); err != nil {
		return err
	}
	if ly.exp == nil {
		return nil
	}
	if err := ly.exp.verify(); err != nil {
		return err
	}
	ly.r.led.thaw()
	ly.exp.stop()
	ly.exp = nil // the table's memory goes
	return nil
}

// post settles the objects two layouts name that the OSTs cannot tell
// apart.
func (ly *layoutCheck) post() error { return ly.resolveDups() }

// enterPhase2 records the dangling slots deferred for the orphan step (a
// real run).
func (ly *layoutCheck) enterPhase2() error {
	if ly.r.dry {
		return nil
	}
	return ly.saveLost()
}

// phase2 adopts the orphan OST objects, and settles the dangling slots no
// orphan filled (-o).
func (ly *layoutCheck) phase2() error {
	r := ly.r
	if !r.st.Params.Orphan {
		return nil
	}
	ly.mu.Lock()
	none := len(ly.lost) == 0
	ly.mu.Unlock()
	if none && !r.dry {
		// Resumed in phase 2: the dangling slots phase 1 left.
		if err := ly.loadLost(); err != nil {
			return fmt.Errorf("read the dangling slots: %w", err)
		}
	}
	if err := ly.orphans(); err != nil {
		return err
	}
	return ly.settleLost()
}

func (ly *layoutCheck) settle() error                { return nil }
func (ly *layoutCheck) checkpoint(st *pb.LfsckState) {}

// quit waits for the checks in flight and the summaries' fetchers.
func (ly *layoutCheck) quit() {
	ly.q.wait()
	if ly.exp != nil {
		ly.exp.stop()
	}
}

// expected is the record the slot's object should hold, from the file's
// current record.
func expected(f fid.FID, ino *pb.Inode, it *checkItem) objrec.Rec {
	l := ino.Layout
	return objrec.Rec{Seq: it.seq, Oid: it.oid, Parent: f, StripeIndex: it.slot, StripeSize: l.StripeSize,
		StripeCount: uint32(len(l.Objects)), Gen: l.Generation, UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid}
}

// file records or queues the checks of one file's stripes, and notes the
// objects its layout names.
func (ly *layoutCheck) file(so *scanned) {
	r, local, v, o, rebuild := ly.r, so.local, so.v, so.o, so.rebuild
	if o.mode&syscall.S_IFMT != syscall.S_IFREG || !o.hasLayout {
		return
	}
	l := &o.layout
	if !rebuild {
		r.led.add(Layout, tStat+sFiles, 1)
	}
	bad := (l.pattern != 0 && l.pattern != 1) || l.stripeSize == 0 || l.stripeSize%(64<<10) != 0 || len(l.objs) > 2000
	for _, s := range l.objs {
		if s.seq != r.seq && (s.seq != 0 || s.oid != 0) {
			bad = true
		}
	}
	// In phase 1 (not the rebuild before a phase-2 resume), every stripe
	// is recorded in the table of expectations (summary.go) or, without
	// room or when named twice, queued object by object.
	exp := ly.exp
	if r.st.Phase > 1 {
		exp = nil
	}
	checks := ly.checkBuf[:0]
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
		if s.seq == r.seq {
			ref := ly.refsOf(s.ost)
			var in bool
			if dup, in = ref.testSetIn(s.oid); !in {
				dup = ref.testSet(s.oid)
			}
			if dup {
				ly.dups[s] = true
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
					shared, seqPart, summed = objrec.SumShared(&rec), objrec.SumSeq(r.seq), true
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
			ly.enc.Reset(&rec)
			encoded = true
		}
		checks = append(checks, checkItem{ost: s.ost, seq: s.seq, oid: s.oid, digest: ly.enc.Digest(s.seq, s.oid, uint32(i)), slot: uint32(i)})
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
		r.led.add(Layout, tChecked, recorded)
		r.led.add(Layout, tStat+sStripes, recorded)
	}
	if len(checks) > 0 {
		ly.q.add(local, o.fid, checks)
	}
	ly.checkBuf = checks[:0]
}

// refsOf is OST ost's bitmap of named objects, created on first use (a
// slice indexed by OST in front of the map: one lookup per stripe).
func (ly *layoutCheck) refsOf(ost uint32) *bitmap {
	if int(ost) < len(ly.refsIdx) {
		if bm := ly.refsIdx[ost]; bm != nil {
			return bm
		}
	}
	bm := ly.refs[ost]
	if bm == nil {
		bm = &bitmap{}
		ly.refs[ost] = bm
	}
	if ost < 1<<16 {
		for int(ost) >= len(ly.refsIdx) {
			ly.refsIdx = append(ly.refsIdx, nil)
		}
		ly.refsIdx[ost] = bm
	}
	return bm
}

// readBoundaries records every OST's first unassigned object as of snap:
// objects from there on are precreated, not orphans.
func (ly *layoutCheck) readBoundaries(snap kv.Reader) {
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
		if !ok || p.Seq != ly.r.seq {
			continue
		}
		ly.boundary[binary.BigEndian.Uint32(k[len(lo):])] = p.Next
	}
}

// freshSlot re-reads the file: it returns its record if slot still names
// the checked object (else the finding was a change in flight).
func (ly *layoutCheck) freshSlot(it *checkItem) (uint64, []byte, *pb.Inode, bool) {
	r := ly.r
	db := r.env.Target.DB()
	local, ino, err := r.lookup(db, it.ent.fid)
	if err != nil || ino.Layout == nil || int(it.slot) >= len(ino.Layout.Objects) {
		return 0, nil, nil, false
	}
	v, err := db.Get(mdt.ObjKey(local))
	if err != nil {
		return 0, nil, nil, false
	}
	s := ino.Layout.Objects[it.slot]
	if s.Ost != it.ost || s.Seq != it.seq || s.Oid != it.oid {
		return 0, nil, nil, false
	}
	return local, v, ino, true
}

// stripeMissing: a layout slot names an object the OST does not have.
func (ly *layoutCheck) stripeMissing(it *checkItem) {
	r := ly.r
	if r.st.Params.Orphan && r.st.Phase == 1 {
		if _, _, _, ok := ly.freshSlot(it); ok {
			ly.deferLost(it) // an orphan may claim the slot (lost.go)
		}
		return
	}
	ly.danglingSlot(it, r.st.Params.CreateOstobj)
}

// danglingSlot reports a slot whose object is missing, or with create
// gives it a new, empty object.
func (ly *layoutCheck) danglingSlot(it *checkItem, create bool) {
	r := ly.r
	local, v, ino, ok := ly.freshSlot(it)
	if !ok {
		return
	}
	r.found(Layout)
	key := stripeKey(it.ost, it.seq, it.oid)
	if !create {
		r.rep.add(Layout, it.ent, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{KLyDangling},
			Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(local), v)}, ReportKey: append([]byte{KLyDangling}, key...)})
		return
	}
	if r.dry {
		r.countFound(it.ent, Layout, KLyDangling)
		return
	}
	rec := expected(it.ent.fid, ino, it)
	done, err := r.ostRepair(it.ost, &pb.LfsckObjRepair{Seq: rec.Seq, Oid: rec.Oid, Create: true, Record: rec.Attr()})
	if err != nil {
		r.failed(Layout, 1, err)
		return
	}
	if done {
		r.rep.now(Layout, it.ent, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{KLyDangling}, RepairedElsewhere: true})
		r.rep.dataChanged(it.ent.fid) // the stripe reads as zeros now
	}
}

// stripeMismatch: the OST object's record differs from what the layout
// says. The MDT is trusted (owner, PFID), unless another file's layout
// names the object too (multiply referenced).
func (ly *layoutCheck) stripeMismatch(it *checkItem, a *pb.ObjectAttr) {
	r := ly.r
	local, v, ino, ok := ly.freshSlot(it)
	if !ok {
		return
	}
	got := objrec.FromAttr(a)
	want := expected(it.ent.fid, ino, it)
	otherNames := got.Parent != want.Parent && ly.otherReferences(got.Parent, it)
	kind := mismatchKind(got, want, otherNames)
	r.found(Layout)
	if kind == KLyMultiRef {
		// The object belongs to the file its PFID names; this file gets a
		// new, empty object in the slot (Lustre's rule; no data copy).
		r.rep.add(Layout, it.ent, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{KLyMultiRef},
			Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(local), v)},
			Muts:  []*pb.LfsckMut{{M: &pb.LfsckMut_NewStripe{NewStripe: &pb.LfsckNewStripe{Fid: it.ent.fid.PB(), Index: it.slot, Ost: it.ost}}}}})
		r.rep.dataChanged(it.ent.fid)
		return
	}
	if r.dry {
		r.countFound(it.ent, Layout, kind)
		return
	}
	var buf [96]byte
	expect := objrec.Digest(got.Append(buf[:0]))
	done, err := r.ostRepair(it.ost, &pb.LfsckObjRepair{Seq: want.Seq, Oid: want.Oid, Expect: expect, Record: want.Attr()})
	if err != nil {
		r.failed(Layout, 1, err)
		return
	}
	if done {
		r.rep.now(Layout, it.ent, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{kind}, RepairedElsewhere: true})
		return
	}
	// A client wrote the object after its check: the next run looks again.
	r.led.addTo(it.ent, Layout, tStat+sChanged, 1)
	r.log.Info("layout repair refused by the OST: the object changed since its check", "fid", it.ent.fid, "ost", it.ost, "object", want.Oid, "kind", KindNames[Layout][kind])
}

// mismatchKind names what differs between the record an OST object holds
// (got) and the one its slot wants (want). otherNames: the file got's
// PFID names exists and its layout names the object too (read only when
// the PFIDs differ).
func mismatchKind(got, want objrec.Rec, otherNames bool) uint32 {
	switch {
	case got.Parent == want.Parent:
		return sameParentKind(got, want)
	case otherNames:
		return KLyMultiRef
	}
	return KLyUnmatched
}

// sameParentKind names what differs between an object's record and the
// one its slot wants, when both name the same file.
func sameParentKind(got, want objrec.Rec) uint32 {
	switch {
	case got.StripeIndex != want.StripeIndex:
		return KLyStripeIdx
	case got.UID != want.UID || got.GID != want.GID || got.ProjID != want.ProjID:
		return KLyOwner
	}
	return KLyOthers
}

// otherReferences reports whether file f exists and its layout names the
// object of it (then the object is referenced twice).
func (ly *layoutCheck) otherReferences(f fid.FID, it *checkItem) bool {
	r := ly.r
	if f.IsZero() || f == it.ent.fid {
		return false
	}
	_, ino, err := r.lookup(r.env.Target.DB(), f)
	if err != nil || ino.Layout == nil {
		return false
	}
	for _, s := range ino.Layout.Objects {
		if s.Ost == it.ost && s.Seq == it.seq && s.Oid == it.oid {
			return true
		}
	}
	return false
}

func stripeKey(ostIdx uint32, seq, oid uint64) []byte {
	k := binary.BigEndian.AppendUint32(nil, ostIdx)
	k = binary.BigEndian.AppendUint64(k, seq)
	return binary.BigEndian.AppendUint64(k, oid)
}

// resolveDups settles OST objects that two layouts name and whose record
// has no PFID (never written), which the OST checks cannot see: the file
// with the lowest local key keeps the object, the others get new ones.
// Objects with a PFID were settled by the checks (multiply referenced).
func (ly *layoutCheck) resolveDups() error {
	r := ly.r
	if len(ly.dups) == 0 {
		return nil
	}
	db := r.env.Target.DB()
	snap := db.NewSnapshot()
	defer snap.Close()
	type ref struct {
		local uint64
		f     fid.FID
		slot  uint32
		v     []byte
	}
	holders := map[stripe][]ref{}
	it, err := snap.NewIter(mdt.ObjLower, objUpper)
	if err != nil {
		return err
	}
	var o object
	for it.First(); it.Valid(); it.Next() {
		local, ok := mdt.ObjLocal(it.Key())
		if !ok || o.decode(it.Value()) != nil || !o.hasLayout || r.isLoser(local) {
			continue
		}
		for i, s := range o.layout.objs {
			if ly.dups[s] {
				holders[s] = append(holders[s], ref{local, o.fid, uint32(i), append([]byte(nil), it.Value()...)})
			}
		}
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return err
	}
	var keys []stripe
	for s := range holders {
		keys = append(keys, s)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ost != keys[j].ost {
			return keys[i].ost < keys[j].ost
		}
		return keys[i].oid < keys[j].oid
	})
	for _, s := range keys {
		hs := holders[s]
		if len(hs) < 2 {
			continue
		}
		a, ok, err := r.askOST(s)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if a != nil && a.Parent != nil && !fid.FromPB(a.Parent).IsZero() {
			continue // the checks settled it
		}
		for _, h := range hs[1:] {
			r.found(Layout)
			r.rep.add(Layout, nil, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{KLyMultiRef},
				Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(h.local), h.v)},
				Muts:  []*pb.LfsckMut{{M: &pb.LfsckMut_NewStripe{NewStripe: &pb.LfsckNewStripe{Fid: h.f.PB(), Index: h.slot, Ost: s.ost}}}}})
			r.rep.dataChanged(h.f)
		}
	}
	return r.rep.flush()
}
