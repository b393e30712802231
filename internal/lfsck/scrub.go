package lfsck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
)

// The OI scrub: the object index (FID to local key) against every
// object's own FID. The object scan checks each object's OI entry; after
// it, the entries it did not confirm are looked up one by one (entries
// that name no object).

// oiScrub is the OI scrub component.
type oiScrub struct {
	r         *run
	oi        *oiFixes   // what it decided: every lookup of the run sees it
	confirmed fidBitmap  // FIDs whose OI entry the object scan confirmed
	readers   *oiReaders // the window's OI iterators (not in a rebuild)
}

func newOIScrub(r *run) *oiScrub {
	return &oiScrub{r: r, oi: newOIFixes(), confirmed: fidBitmap{}}
}

func (sc *oiScrub) id() uint32 { return Scrub }
func (sc *oiScrub) prep()      {}

func (sc *oiScrub) openWindow(w *window) error {
	if !w.rebuild {
		sc.readers = &oiReaders{snap: w.snap, its: map[uint64]*oiReader{}}
	}
	return nil
}

func (sc *oiScrub) closeWindow(last bool) {
	if sc.readers != nil {
		sc.readers.close()
		sc.readers = nil
	}
}

func (sc *oiScrub) object(so *scanned) error {
	r := sc.r
	switch {
	case so.garbage:
		// An object whose record does not decode is the scrub's finding.
		if !so.rebuild {
			r.led.add(Scrub, tChecked, 1)
			r.led.add(Scrub, tStat+sObjects, 1)
			r.report(Scrub, KOIGarbage, mdt.ObjKey(so.local), so.v)
		}
		return nil
	case so.skipped():
		return nil
	case so.rebuild:
		so.lost = sc.oi.lost(so.local, so.o.fid)
		if !so.lost {
			// Checked before the checkpoint: its OI entry was confirmed (or
			// repaired) then, so the OI range scan need not read it again.
			sc.confirmed.set(so.o.fid)
		}
		return nil
	}
	r.led.add(Scrub, tChecked, 1)
	r.led.add(Scrub, tStat+sObjects, 1)
	lost, err := sc.checkOI(so)
	if err != nil {
		if err := r.failed(Scrub, 1, err); err != nil {
			return err
		}
	}
	so.lost = lost
	return nil
}

// endScan checks the OI entries the object scan did not confirm.
func (sc *oiScrub) endScan() error { return sc.scanOI() }

func (sc *oiScrub) post() error                  { return nil }
func (sc *oiScrub) enterPhase2() error           { return nil }
func (sc *oiScrub) phase2() error                { return nil }
func (sc *oiScrub) settle() error                { return nil }
func (sc *oiScrub) checkpoint(st *pb.LfsckState) {}
func (sc *oiScrub) quit()                        {}

// checkOI checks that the OI maps the object's FID to its local key,
// repairing it if not. It reports whether the object lost a conflict over
// its FID (another object with the same FID is the one to keep).
func (sc *oiScrub) checkOI(so *scanned) (bool, error) {
	f := so.o.fid
	if w, ok := sc.oi.local(f); ok {
		// Decided earlier in this run (a conflict seen from the other side).
		return w != so.local, nil
	}
	x, err := sc.gatherOI(so)
	if err != nil {
		return false, err
	}
	d := decideOI(x)
	sc.emitOI(so, x, d)
	return d.lose == so.local && d.kind == KOIConflict, nil
}

// oiFacts are what the scrub reads of one object's OI entry.
type oiFacts struct {
	local uint64
	mtime int64 // the object's
	links int   // the names in its linkEA
	found bool  // the OI has an entry for its FID
	cur   []byte
	// The object the entry names instead (other: its local key, if the
	// entry is 8 bytes long), if it exists and claims the FID (claims):
	// its record, mtime and names, and whether the two records differ
	// only in times (same).
	other      uint64
	claims     bool
	ov         []byte
	otherMtime int64
	otherLinks int
	same       bool
}

// oiDecision is what decideOI decides: nothing (kind 0), or the kind of
// inconsistency and, for a conflict, the object kept (win) and the other
// (lose), which is removed (a stale copy) or reported.
type oiDecision struct {
	kind        uint32
	win, lose   uint64
	removeLoser bool
}

// gatherOI reads the facts of the object so's OI entry.
func (sc *oiScrub) gatherOI(so *scanned) (*oiFacts, error) {
	o := so.o
	x := &oiFacts{local: so.local, mtime: o.mtime, links: len(o.links)}
	key := mdt.OIKey(o.fid)
	oi, err := sc.readers.get(o.fid.Seq)
	if err != nil {
		return nil, err
	}
	if !oi.find(key) {
		return x, oi.it.Error()
	}
	x.found = true
	x.cur = oi.it.Value()
	x.other = binary.BigEndian.Uint64(pad8(x.cur))
	if len(x.cur) == 8 && x.other == so.local {
		return x, nil
	}
	ov, err := so.snap.Get(mdt.ObjKey(x.other))
	if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, err
	}
	var oo object
	if err == nil && len(x.cur) == 8 && oo.decode(ov) == nil && oo.fid == o.fid {
		x.claims, x.ov, x.otherMtime, x.otherLinks = true, ov, oo.mtime, len(oo.links)
		x.same = sameContent(so.v, ov)
	}
	return x, nil
}

// decideOI decides what is wrong with an object's OI entry: none (the
// object lacks one), one naming another key that does not claim the FID
// (stale), or one naming another object that claims the same FID (a
// conflict). Of two objects claiming a FID the later-modified one is
// kept, then the one with names, then the OI's choice; a loser that holds
// nothing the winner does not (a stale copy) is removed.
func decideOI(x *oiFacts) oiDecision {
	switch {
	case !x.found:
		return oiDecision{kind: KOIMissing}
	case len(x.cur) == 8 && x.other == x.local:
		return oiDecision{}
	case !x.claims:
		return oiDecision{kind: KOIStale}
	}
	d := oiDecision{kind: KOIConflict, win: x.other, lose: x.local, removeLoser: x.same}
	if x.mtime > x.otherMtime || (x.mtime == x.otherMtime && x.links > x.otherLinks) {
		d.win, d.lose = x.local, x.other
	}
	return d
}

// emitOI builds the repair decideOI decided and records the OI as the run
// sees it now.
func (sc *oiScrub) emitOI(so *scanned, x *oiFacts, d oiDecision) {
	r, local, v, f := sc.r, so.local, so.v, so.o.fid
	key := mdt.OIKey(f)
	switch d.kind {
	case 0:
		sc.confirmed.set(f)
		return
	case KOIMissing:
		r.found(Scrub)
		r.rep.add(Scrub, nil, &pb.LfsckRepair{Component: Scrub, Kinds: []uint32{KOIMissing},
			Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(local), v), condAbsent(key)},
			Muts:  []*pb.LfsckMut{setMut(key, be64(local))}})
		sc.oi.set(f, local)
		sc.confirmed.set(f)
		return
	case KOIStale:
		r.found(Scrub)
		r.rep.add(Scrub, nil, &pb.LfsckRepair{Component: Scrub, Kinds: []uint32{KOIStale},
			Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(local), v), condVal(key, x.cur)},
			Muts:  []*pb.LfsckMut{setMut(key, be64(local))}})
		sc.oi.set(f, local)
		sc.confirmed.set(f)
		return
	}
	r.found(Scrub)
	wv, lv := x.ov, v
	if d.win == local {
		wv, lv = v, x.ov
	}
	sc.oi.set(f, d.win)
	sc.oi.lose(d.lose)
	sc.confirmed.set(f)
	rep := &pb.LfsckRepair{Component: Scrub, Kinds: []uint32{KOIConflict},
		Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(d.win), wv), condVal(mdt.ObjKey(d.lose), lv), condVal(key, x.cur)}}
	if d.win != x.other {
		rep.Muts = append(rep.Muts, setMut(key, be64(d.win)))
	}
	if d.removeLoser {
		rep.Muts = append(rep.Muts, delMut(mdt.ObjKey(d.lose)))
		rep.InodesDelta = -1
		// Its extended attributes go with it.
		p := mdt.XattrPrefix(d.lose)
		if it, err := so.snap.NewIter(p, kv.PrefixEnd(p)); err == nil {
			for it.First(); it.Valid(); it.Next() {
				rep.Muts = append(rep.Muts, delMut(append([]byte(nil), it.Key()...)))
			}
			it.Close()
		}
	} else if d.win == x.other {
		rep.ReportKey = mdt.ObjKey(d.lose)
	}
	r.rep.add(Scrub, nil, rep)
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
func (sc *oiScrub) scanOI() error {
	db := sc.r.env.Target.DB()
	var pos []byte = mdt.OILower
	for {
		snap := db.NewSnapshot()
		next, done, err := sc.scanOIWindow(snap, pos)
		snap.Close()
		if err != nil || done {
			return err
		}
		pos = next
	}
}

func (sc *oiScrub) scanOIWindow(snap *kv.Snapshot, pos []byte) ([]byte, bool, error) {
	r := sc.r
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
		if sc.confirmed.has(f) {
			continue
		}
		if _, ok := sc.oi.local(f); ok {
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
