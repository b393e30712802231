package lfsck

import (
	"context"
	"encoding/binary"
	"sort"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/layout"
	"nacre/internal/mdt"
	"nacre/internal/objrec"
)

// Phase 2 of the layout check (-o): OST objects of this MDT's sequence
// that no layout names. Each OST gets, range by range, the bitmap of the
// objects phase 1 found named, and returns the others below the first
// object its precreate pool still holds (those are unassigned, not
// orphans). An object queued for destruction is not an orphan either. An
// OST that did not answer in phase 1 is skipped (incomplete: no risky
// decisions on partial knowledge, Lustre's LF_INCOMPLETE).
//
// Orphans are adopted by the PFID they carry (lost+found names, §5.4):
//
//	parent missing        re-create it with that FID and the stripes found   <FID>-R-n
//	parent lacks the slot fill the slot (or rebuild a lost layout)
//	slot taken            a new file holding the object                      <FID>-C-n
//	no PFID               a new file holding the object                      <newFID>-N-n

const orphanChunk = 1 << 18

type orphanObj struct {
	ost  uint32
	attr *pb.ObjectAttr
	size uint64 // bytes of data, read right before the adoption (stillOnOST)
}

func (ly *layoutCheck) orphans() error {
	r := ly.r
	var idxs []uint32
	for idx := range r.env.OSTs() {
		idxs = append(idxs, idx)
	}
	sort.Slice(idxs, func(i, j int) bool { return idxs[i] < idxs[j] })
	// Resume where a checkpoint of this step left off: the chunks before
	// it are adopted (a chunk adopted again finds nothing: its objects
	// are named now).
	step, at := r.phase2At()
	if step == 0 {
		r.setPhase2(1, nil)
		at = nil
	}
	resumeOST, resumeFrom, resuming := decodeOrphanPos(at)
	for _, idx := range idxs {
		if resuming && idx < resumeOST {
			continue
		}
		if r.incomplete(idx) {
			r.log.Warn("orphan scan skips an OST that did not answer", "ost", idx)
			continue
		}
		bound := ly.boundary[idx]
		bm := ly.refs[idx]
		if bm == nil {
			bm = &bitmap{}
		}
		cli := r.env.OSTs()[idx]
		from := uint64(1)
		if resuming && idx == resumeOST {
			from = max(from, resumeFrom)
		}
		for from < bound {
			if r.stopping() {
				return errHalted
			}
			to := min(from+orphanChunk, bound)
			ly.orphanAt.Store(uint64(idx)<<48 | from&(1<<48-1))
			if err := fault.Hit("lfsck.orphans.send"); err != nil {
				r.markIncomplete(idx)
				break
			}
			ctx, cancel := context.WithTimeout(r.ctx, r.env.RPCTimeout)
			rep, err := cli.Orphans(ctx, &pb.LfsckOrphansRequest{Seq: r.seq, From: from, To: to, Referenced: bm.bytes(from, to), Max: 4096})
			cancel()
			if err != nil {
				if r.stopping() {
					return errHalted
				}
				r.log.Warn("orphan scan: OST did not answer; skipping it", "ost", idx, "err", err)
				r.markIncomplete(idx)
				break
			}
			cands := make([]orphanObj, 0, len(rep.Objects))
			for _, a := range rep.Objects {
				cands = append(cands, orphanObj{ost: idx, attr: a})
			}
			// Adopted chunk by chunk, so that memory stays bounded and a
			// checkpoint can follow each chunk. A lost file's stripes on
			// other OSTs (or in later chunks) join the file re-created
			// for the first ones: it has their PFID's FID.
			if err := ly.adoptChunk(cands); err != nil {
				return err
			}
			next := rep.Next
			if next <= from {
				next = bound
			}
			r.setPhase2(1, encodeOrphanPos(idx, next))
			if err := r.maybeCheckpoint(); err != nil {
				return err
			}
			from = next
		}
	}
	r.setPhase2(1, encodeOrphanPos(1<<32-1, 0))
	return r.rep.flush()
}

// adoptChunk adopts the orphans of one listing, grouped by the PFID they
// carry (objects without one each alone), in the order they came.
func (ly *layoutCheck) adoptChunk(cands []orphanObj) error {
	groups := map[fid.FID][]orphanObj{}
	var order []fid.FID
	var lone []orphanObj
	for _, c := range cands {
		pf := fid.FromPB(c.attr.Parent)
		if pf.IsZero() {
			lone = append(lone, c)
			continue
		}
		if _, ok := groups[pf]; !ok {
			order = append(order, pf)
		}
		groups[pf] = append(groups[pf], c)
	}
	for _, pf := range order {
		if err := ly.adopt(pf, groups[pf]); err != nil {
			return err
		}
	}
	for _, c := range lone {
		if err := ly.adopt(fid.FID{}, []orphanObj{c}); err != nil {
			return err
		}
	}
	return nil
}

// The orphan scan's resume position (Phase2Position at Phase2Step 1; the
// namespace's trace positions are used at step 0 only): the OST index and
// the next object id to list there.
func encodeOrphanPos(ost uint32, from uint64) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 12), ost)
	return binary.BigEndian.AppendUint64(b, from)
}

func decodeOrphanPos(b []byte) (ost uint32, from uint64, ok bool) {
	if len(b) != 12 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint32(b), binary.BigEndian.Uint64(b[4:]), true
}

func slotOf(o orphanObj) *pb.StripeObject {
	return &pb.StripeObject{Ost: o.ost, Seq: o.attr.Seq, Oid: o.attr.Oid}
}

func stripeOf(s *pb.StripeObject) stripe { return stripe{s.Ost, s.Seq, s.Oid} }

func isDummy(s *pb.StripeObject) bool { return s == nil || (s.Seq == 0 && s.Oid == 0) }

// slotCase is how the slot an orphan claims (its stripe index) stands in
// its parent's layout.
type slotCase uint8

const (
	slotHole   slotCase = iota // a hole: the orphan fills it
	slotSame                   // it names the orphan already (a change in flight)
	slotTaken                  // it names another object: the orphan takes it only if that one is missing or was made empty for it
	slotBeyond                 // past the layout's stripes, within the count the orphan's record gives: the layout grows to it
	slotNone                   // past the layout and any count it may grow to: the orphan goes to a file of its own
)

// orphanSlot says how the slot orphan m claims stands in a layout whose
// stripes are objs.
func orphanSlot(objs []*pb.StripeObject, m orphanObj) slotCase {
	i, want := int(m.attr.StripeIndex), int(m.attr.StripeCount)
	switch {
	case i < len(objs) && isDummy(objs[i]):
		return slotHole
	case i < len(objs) && objs[i].Ost == m.ost && objs[i].Seq == m.attr.Seq && objs[i].Oid == m.attr.Oid:
		return slotSame
	case i < len(objs):
		return slotTaken
	case i < want && want <= layout.MaxStripeCount:
		return slotBeyond
	}
	return slotNone
}

// orphanLayout builds a layout holding members at their stripe indexes,
// holes elsewhere.
func orphanLayout(members []orphanObj) *pb.Layout {
	a := members[0].attr
	count := int(a.StripeCount)
	for _, m := range members {
		count = max(count, int(m.attr.StripeIndex)+1)
	}
	count = min(max(count, 1), layout.MaxStripeCount)
	ss := a.StripeSize
	if ss == 0 || layout.CheckStripeSize(uint64(ss)) != nil {
		ss = layout.DefaultStripeSize
	}
	l := &pb.Layout{Pattern: 1, StripeSize: ss, StripeCount: int32(count), StripeOffset: -1, Generation: max(a.LayoutGen, 1)}
	l.Objects = make([]*pb.StripeObject, count)
	for i := range l.Objects {
		l.Objects[i] = &pb.StripeObject{}
	}
	for _, m := range members {
		if int(m.attr.StripeIndex) < count {
			l.Objects[m.attr.StripeIndex] = slotOf(m)
		}
	}
	return l
}

func orphanInode(members []orphanObj, l *pb.Layout, f fid.FID) *pb.Inode {
	a := members[0].attr
	return &pb.Inode{Fid: f.PB(), Mode: syscall.S_IFREG | 0o644, Uid: a.Uid, Gid: a.Gid, Projid: a.Projid, Layout: l,
		Flags: uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY | pb.InodeFlag_INODE_FLAG_LFSCK_CREATED)}
}

// adoptTries bounds the attempts to adopt one file's orphans while
// clients keep changing the file.
const adoptTries = 3

// adopt settles the orphans claiming parent pf (zero: no PFID).
//
// A repair is applied only if what it was computed from is unchanged, so
// a client changing the file between the snapshot and the apply makes it
// a no-op. That is harmless for most adoptions (the orphans are still
// orphans for the next run), but not after an empty object was destroyed
// on its OST to give its slot back (emptyTakerGone), or a slot of the
// run's dangling list was taken: the slot would name a missing object.
// So while the file's layout does not show the orphans in the slots the
// repair gave them, the adoption is computed again on the file as it is.
func (ly *layoutCheck) adopt(pf fid.FID, members []orphanObj) error {
	r := ly.r
	r.led.add2(Layout, tChecked, uint64(len(members)))
	for try := 1; ; try++ {
		placed, into, err := ly.adoptOnce(pf, members)
		if err != nil {
			return err
		}
		if len(placed) == 0 || r.dry || !r.st.Params.Orphan {
			ly.settleAdopted(pf, into)
			return nil
		}
		missed := ly.notPlaced(pf, placed)
		if len(missed) == 0 {
			ly.settleAdopted(pf, into)
			return nil
		}
		// The slots that still name the object they named are dangling
		// slots of this run now: the next attempt (or settleLost) takes
		// them up.
		ly.mu.Lock()
		for _, p := range missed {
			ly.lost[lostSlot{pf, p.slot}] = p.was
		}
		ly.mu.Unlock()
		if try == adoptTries {
			r.log.Warn("orphan adoption: the file kept changing; its slots are left for the end of the run", "fid", pf, "slots", len(missed))
			ly.settleAdopted(pf, into)
			return nil
		}
	}
}

// slotFill is a slot an adoption gave to an orphan in place of an object
// that is missing (was, a dangling slot) or that it destroyed (an empty
// one).
type slotFill struct {
	slot uint32
	was  stripe
	obj  *pb.StripeObject
}

// notPlaced lists the fills that the file's layout does not show now
// and whose slot still names the object it named before.
func (ly *layoutCheck) notPlaced(pf fid.FID, placed []slotFill) []slotFill {
	r := ly.r
	_, ino, err := r.lookup(r.env.Target.DB(), pf)
	if err != nil {
		return nil // gone: its objects are orphans again, with a PFID that names nothing
	}
	var objs []*pb.StripeObject
	if ino.Layout != nil {
		objs = ino.Layout.Objects
	}
	var missed []slotFill
	for _, p := range placed {
		if int(p.slot) >= len(objs) {
			continue
		}
		s := objs[p.slot]
		if s.Ost == p.obj.Ost && s.Seq == p.obj.Seq && s.Oid == p.obj.Oid {
			continue
		}
		if (stripe{s.Ost, s.Seq, s.Oid}) == p.was {
			missed = append(missed, p)
		}
	}
	return missed
}

// adoption is what an adoption put into slots of file pf: the file as
// the adoption made it, and the objects it put there.
type adoption struct {
	ino  *pb.Inode
	objs []orphanObj
}

// adoptOnce computes and applies one adoption of pf's orphans; it returns
// the slots it filled in place of a missing or destroyed object, and what
// it put into pf's slots.
func (ly *layoutCheck) adoptOnce(pf fid.FID, members []orphanObj) ([]slotFill, adoption, error) {
	r := ly.r
	var into adoption
	if err := r.pac.pace(r.ctx); err != nil {
		return nil, adoption{}, err
	}
	snap := r.env.Target.DB().NewSnapshot()
	defer snap.Close()
	f := newFix()
	f.reportKey = append([]byte("o"), pf.Bytes()...)
	var live []orphanObj
	for _, m := range members {
		k := mdt.DestroyKey(m.ost, m.attr.Seq, m.attr.Oid)
		if _, err := snap.Get(k); err == nil {
			continue // queued for destruction: not an orphan
		}
		f.cond(k, nil)
		live = append(live, m)
	}
	// The speed limit counts the objects to judge, not those the listing
	// returned only because their destruction is still queued (after many
	// unlinks, most of them).
	if err := r.lim.wait(r.ctx, uint64(len(live))); err != nil {
		return nil, adoption{}, err
	}
	// Not queued for destruction now, so nothing will destroy it: if the
	// OST still has it, it is an orphan (one destroyed between the listing
	// and now is gone from the OST).
	live = ly.stillOnOST(live)
	if len(live) == 0 {
		return nil, adoption{}, nil
	}
	n := 0
	var placed []slotFill
	var newFiles []orphanObj
	newFile := func(ms []orphanObj, base string) {
		newFiles = append(newFiles, ms...)
		l := orphanLayout(ms)
		f.late = append(f.late, &pb.LfsckMut{M: &pb.LfsckMut_Create{Create: &pb.LfsckCreate{
			Inode: orphanInode(ms, l, fid.FID{}), AllocFid: true, LpfBase: []byte(base)}}})
		f.delta++
		n += len(ms)
	}
	var local uint64
	var ino *pb.Inode
	var err error = errNoObject
	if !pf.IsZero() {
		local, ino, err = r.lookup(snap, pf)
	}
	switch {
	case pf.IsZero():
		for _, m := range live {
			newFile([]orphanObj{m}, "%F-N")
		}
	case err == errNoObject && r.env.Target.AllocatedBefore(pf):
		f.cond(mdt.OIKey(pf), nil)
		l := orphanLayout(live)
		into = adoption{orphanInode(live, l, pf), live}
		f.late = append(f.late, &pb.LfsckMut{M: &pb.LfsckMut_Create{Create: &pb.LfsckCreate{
			Inode: into.ino, LpfBase: []byte("%F-R")}}})
		f.delta++
		n += len(live)
	case err != nil:
		newFile(live, pf.String()+"-C")
	case ino.Mode&syscall.S_IFMT != syscall.S_IFREG:
		for _, m := range live {
			newFile([]orphanObj{m}, pf.String()+"-C")
		}
	default:
		v, _ := snap.Get(mdt.ObjKey(local))
		f.cond(mdt.ObjKey(local), v)
		nino := proto.Clone(ino).(*pb.Inode)
		changed := false
		var back []orphanObj // the orphans put back into the file's slots
		if nino.Layout == nil || len(nino.Layout.Objects) == 0 {
			nino.Layout = orphanLayout(live)
			changed = true
			n += len(live)
			back = live
		} else {
			objs := nino.Layout.Objects
			for _, m := range live {
				i := int(m.attr.StripeIndex)
				switch sc := orphanSlot(objs, m); {
				case sc == slotHole:
					objs[i] = slotOf(m)
					changed = true
					n++
					back = append(back, m)
				case sc == slotSame:
					// named after all (a change in flight)
				case sc == slotTaken && ly.takeLost(pf, uint32(i), objs[i]):
					// The slot names an object the OST does not have:
					// this one, which claims it, was lost from the layout
					// only (lost.go).
					placed = append(placed, slotFill{uint32(i), stripeOf(objs[i]), slotOf(m)})
					objs[i] = slotOf(m)
					changed = true
					n++
					back = append(back, m)
					if !r.dry {
						f.muts = append(f.muts, delMut(lostKey(lostSlot{pf, uint32(i)})))
					}
				case sc == slotTaken && ly.emptyTakerGone(pf, uint32(i), objs[i]):
					// The slot's object was made for a dangling slot (a
					// run with -c before the orphan was seen) and never
					// written: destroyed, it gives the slot back.
					placed = append(placed, slotFill{uint32(i), stripeOf(objs[i]), slotOf(m)})
					objs[i] = slotOf(m)
					changed = true
					n++
					back = append(back, m)
				case sc == slotBeyond:
					for len(objs) <= i {
						objs = append(objs, &pb.StripeObject{})
					}
					objs[i] = slotOf(m)
					changed = true
					n++
					back = append(back, m)
				default:
					newFile([]orphanObj{m}, pf.String()+"-C")
				}
			}
			nino.Layout.Objects = objs
			nino.Layout.StripeCount = int32(len(objs))
		}
		if changed {
			if nino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) == 0 {
				// The MDT's size is exact (no client is writing): kept,
				// or raised to the end of the data put back, never
				// lowered. A size taken from the objects lost the tail
				// of a file whose other stripe was lost too: the empty
				// object -c makes for it covers none of its data.
				nino.Size = max(nino.Size, endOfData(nino.Layout, back))
			}
			f.muts = append(f.muts, setMut(mdt.ObjKey(local), mdt.MarshalInode(nino)))
			into = adoption{nino, back}
			if r.st.Params.Orphan {
				r.rep.dataChanged(pf)
			}
		}
	}
	if n == 0 {
		return nil, adoption{}, nil
	}
	// Tests change the file here, between the snapshot and the apply.
	if err := fault.Hit("lfsck.orphans.adopt"); err != nil {
		return nil, adoption{}, err
	}
	r.found(Layout)
	kinds := make([]uint32, n)
	for i := range kinds {
		kinds[i] = KLyOrphan
	}
	rep := &pb.LfsckRepair{Component: Layout, Kinds: kinds, Conds: f.conds, Muts: append(f.muts, f.late...), InodesDelta: f.delta}
	if !r.st.Params.Orphan {
		rep.Muts, rep.InodesDelta = nil, 0
		rep.ReportKey = f.reportKey
	}
	r.rep.add(Layout, nil, rep)
	if err := r.rep.flush(); err != nil {
		return nil, adoption{}, err
	}
	if r.dry || !r.st.Params.Orphan {
		return placed, into, nil
	}
	// New files (<FID>-C-n, <newFID>-N-n) got their FID at apply: point
	// their objects' PFIDs at them.
	for _, m := range newFiles {
		ly.repointPFID(m)
	}
	return placed, into, nil
}

// repointPFID finds the lost+found file holding m (made by this run) and
// rewrites the object's PFID to name it.
func (ly *layoutCheck) repointPFID(m orphanObj) {
	r := ly.r
	db := r.env.Target.DB()
	lpfLocal, _, err := r.lookup(db, fid.LostFound)
	if err != nil {
		return
	}
	p := mdt.DirentPrefix(lpfLocal)
	it, err := db.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		cf, _, ok := mdt.DecodeDirent(it.Value())
		if !ok {
			continue
		}
		_, ino, err := r.lookup(db, cf)
		if err != nil || ino.Layout == nil {
			continue
		}
		for i, s := range ino.Layout.Objects {
			if s.Ost != m.ost || s.Seq != m.attr.Seq || s.Oid != m.attr.Oid {
				continue
			}
			l := ino.Layout
			want := objrec.Rec{Seq: s.Seq, Oid: s.Oid, Parent: cf, StripeIndex: uint32(i), StripeSize: l.StripeSize,
				StripeCount: uint32(len(l.Objects)), Gen: l.Generation, UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid}
			got := objrec.FromAttr(m.attr)
			if fid.FromPB(m.attr.Parent).IsZero() {
				return // never written: nothing to point
			}
			var buf [96]byte
			if _, err := r.ostRepair(m.ost, &pb.LfsckObjRepair{Seq: s.Seq, Oid: s.Oid, Expect: objrec.Digest(got.Append(buf[:0])), Record: want.Attr()}); err != nil {
				r.log.Warn("orphan adoption: rewrite the PFID", "err", err)
			}
			return
		}
	}
}

// settleAdopted gives the objects an adoption put into file pf's slots
// the record their slot wants (the MDT wins: owner, stripe size, count,
// generation), as the layout check would have if the layout had named
// them, counted under the same kinds. Before, the first run only put them
// back and the second found their owner wrong. Objects no longer where
// the adoption put them (the file changed since) are left to the next
// run. A dry run counts what it would repair against the adoption it
// computed.
func (ly *layoutCheck) settleAdopted(pf fid.FID, into adoption) {
	r := ly.r
	if into.ino == nil || len(into.objs) == 0 || !r.st.Params.Orphan {
		return
	}
	ino := into.ino
	if !r.dry {
		var err error
		if _, ino, err = r.lookup(r.env.Target.DB(), pf); err != nil {
			return // gone: its objects are orphans again
		}
	}
	l := ino.Layout
	if l == nil {
		return
	}
	for _, m := range into.objs {
		i := m.attr.StripeIndex
		if int(i) >= len(l.Objects) {
			continue
		}
		if s := l.Objects[i]; s.Ost != m.ost || s.Seq != m.attr.Seq || s.Oid != m.attr.Oid {
			continue
		}
		got := objrec.FromAttr(m.attr)
		want := objrec.Rec{Seq: m.attr.Seq, Oid: m.attr.Oid, Parent: pf, StripeIndex: i, StripeSize: l.StripeSize,
			StripeCount: uint32(len(l.Objects)), Gen: l.Generation, UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid}
		if got == want {
			continue
		}
		kind := sameParentKind(got, want)
		r.found(Layout)
		if r.dry {
			r.countFound(nil, Layout, kind)
			continue
		}
		var buf [96]byte
		done, err := r.ostRepair(m.ost, &pb.LfsckObjRepair{Seq: want.Seq, Oid: want.Oid, Expect: objrec.Digest(got.Append(buf[:0])), Record: want.Attr()})
		if err != nil {
			r.failed(Layout, 2, err)
			continue
		}
		if !done {
			// A client wrote the object since it was listed: the next
			// run looks again.
			r.led.addTo(nil, Layout, tStat+sChanged, 1)
			continue
		}
		r.rep.now(Layout, nil, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{kind}, RepairedElsewhere: true})
	}
}

// endOfData is the end in the file of the data of objects ms, in their
// slots of layout l.
func endOfData(l *pb.Layout, ms []orphanObj) uint64 {
	sizes := make([]uint64, len(l.Objects))
	for _, m := range ms {
		if i := int(m.attr.StripeIndex); i < len(sizes) {
			sizes[i] = max(sizes[i], m.size)
		}
	}
	return layout.FileSize(uint64(l.StripeSize), sizes)
}

// stillOnOST keeps the members their OST still has, with their size.
func (ly *layoutCheck) stillOnOST(ms []orphanObj) []orphanObj {
	r := ly.r
	var out []orphanObj
	for _, m := range ms {
		cli := r.env.OSTs()[m.ost]
		if cli == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(r.ctx, r.env.RPCTimeout)
		attrs, err := cli.GetObjects(ctx, []*pb.StripeObject{slotOf(m)})
		cancel()
		if err == nil && len(attrs) == 1 && attrs[0].Exists {
			m.size = attrs[0].Size
			out = append(out, m)
		}
	}
	return out
}

// emptyTakerGone reports whether slot i of file pf, which an orphan claims
// too, is held by an object that claims it as well but holds no data (the
// checker's -c makes such objects for dangling slots; Lustre marks them
// with ctime 0), and in a real run destroys that object on its OST, only
// if it still has no data then (Lustre's conditional destroy, test 18d).
// The orphan then takes the slot; if the layout changed meanwhile, the
// slot dangles and the next run with -o puts the orphan there.
func (ly *layoutCheck) emptyTakerGone(pf fid.FID, i uint32, s *pb.StripeObject) bool {
	r := ly.r
	a, ok, err := r.askOST(stripe{s.Ost, s.Seq, s.Oid})
	if err != nil || !ok || a == nil || !a.Exists || a.Size != 0 || a.Blocks != 0 ||
		fid.FromPB(a.Parent) != pf || a.StripeIndex != i {
		return false
	}
	if r.dry {
		return true
	}
	var buf [96]byte
	got := objrec.FromAttr(a)
	done, err := r.ostRepair(s.Ost, &pb.LfsckObjRepair{Seq: s.Seq, Oid: s.Oid, Expect: objrec.Digest(got.Append(buf[:0])), DestroyIfEmpty: true})
	if err != nil {
		r.log.Warn("orphan adoption: destroy the empty object of the slot", "fid", pf, "slot", i, "err", err)
		return false
	}
	return done
}
