package lfsck

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sort"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
)

// Dangling slots in runs that look for orphans (-o).
//
// A layout slot naming an OST object that does not exist may have lost it
// only in the layout: the real object can still be on the OST, an orphan
// whose PFID claims that very slot. Repairing the slot first (-c makes a
// new, empty object there) would leave the real object nowhere to go but
// lost+found (Lustre then needs a conditional destroy of the object it
// made, test 18d; its -d delays the creation instead). So with -o, phase 1
// only records such slots: the orphan step puts an orphan that claims one
// back in it (counted as an orphan repaired), and the slots left are
// settled afterwards as phase 1 would have: reported, or given a new
// object with -c, once the OST is asked again that it still lacks the
// object. A real run keeps the slots under the layout's trace prefix, so
// a run resumed in phase 2 has them; the adoption that fills a slot drops
// its record in the same repair.

type lostSlot struct {
	f    fid.FID
	slot uint32
}

func lostKey(ls lostSlot) []byte {
	k := mdt.LfsckTracePrefix(Layout)
	var b [fid.Size]byte
	ls.f.Put(b[:])
	k = append(k, b[:]...)
	return binary.BigEndian.AppendUint32(k, ls.slot)
}

func encodeLost(s stripe) []byte {
	v := binary.BigEndian.AppendUint32(nil, s.ost)
	v = binary.BigEndian.AppendUint64(v, s.seq)
	return binary.BigEndian.AppendUint64(v, s.oid)
}

func decodeLost(k, v []byte) (lostSlot, stripe, bool) {
	p := len(mdt.LfsckTracePrefix(Layout))
	if len(k) != p+fid.Size+4 || len(v) != 20 {
		return lostSlot{}, stripe{}, false
	}
	f, err := fid.FromBytes(k[p : p+fid.Size])
	if err != nil {
		return lostSlot{}, stripe{}, false
	}
	return lostSlot{f: f, slot: binary.BigEndian.Uint32(k[p+fid.Size:])},
		stripe{ost: binary.BigEndian.Uint32(v), seq: binary.BigEndian.Uint64(v[4:]), oid: binary.BigEndian.Uint64(v[12:])}, true
}

// deferLost records a dangling slot found in phase 1.
func (ly *layoutCheck) deferLost(it *checkItem) {
	ly.mu.Lock()
	ly.lost[lostSlot{it.ent.fid, it.slot}] = stripe{it.ost, it.seq, it.oid}
	ly.mu.Unlock()
}

// saveLost records the deferred slots in the store (a real run entering
// phase 2).
func (ly *layoutCheck) saveLost() error {
	r := ly.r
	ly.mu.Lock()
	var op *pb.LfsckStateOp
	var ops []*pb.LfsckStateOp
	for ls, s := range ly.lost {
		if op == nil || len(op.Set) == 512 {
			op = &pb.LfsckStateOp{}
			ops = append(ops, op)
		}
		op.Set = append(op.Set, &pb.LfsckKV{Key: lostKey(ls), Value: encodeLost(s)})
	}
	ly.mu.Unlock()
	for _, op := range ops {
		if err := r.c.proposeState(r.ctx, op); err != nil {
			return fmt.Errorf("record the dangling slots: %w", err)
		}
	}
	return nil
}

// loadLost reads the deferred slots of a real run resumed in phase 2.
func (ly *layoutCheck) loadLost() error {
	r := ly.r
	p := mdt.LfsckTracePrefix(Layout)
	it, err := r.env.Target.DB().NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return err
	}
	defer it.Close()
	ly.mu.Lock()
	defer ly.mu.Unlock()
	for it.First(); it.Valid(); it.Next() {
		if ls, s, ok := decodeLost(it.Key(), it.Value()); ok {
			ly.lost[ls] = s // a damaged record is dropped: the next run finds the slot again
		}
	}
	return it.Error()
}

// takeLost reports whether slot i of file pf, naming s, is a dangling
// slot of this run, and forgets it: an orphan claiming it goes there.
func (ly *layoutCheck) takeLost(pf fid.FID, i uint32, s *pb.StripeObject) bool {
	ls := lostSlot{pf, i}
	ly.mu.Lock()
	defer ly.mu.Unlock()
	d, ok := ly.lost[ls]
	if !ok || d != (stripe{s.Ost, s.Seq, s.Oid}) {
		return false
	}
	delete(ly.lost, ls)
	return true
}

// settleLost settles the dangling slots no orphan filled, as phase 1
// does without -o.
func (ly *layoutCheck) settleLost() error {
	r := ly.r
	ly.mu.Lock()
	objs := maps.Clone(ly.lost)
	ly.mu.Unlock()
	slots := slices.Collect(maps.Keys(objs))
	sort.Slice(slots, func(i, j int) bool {
		a, b := slots[i], slots[j]
		if a.f != b.f {
			return string(a.f.Bytes()) < string(b.f.Bytes())
		}
		return a.slot < b.slot
	})
	for _, ls := range slots {
		if err := r.pac.pace(r.ctx); err != nil {
			return err
		}
		s := objs[ls]
		a, ok, err := r.askOST(s)
		if err != nil {
			return err
		}
		if a != nil && a.Exists {
			continue // there now (a run before a crash made it)
		}
		// An OST that does not answer now, or whose orphans were not all
		// listed, may still hold the slot's real object: report the slot,
		// make nothing.
		ly.danglingSlot(&checkItem{ost: s.ost, slot: ls.slot, seq: s.seq, oid: s.oid, ent: &entry{fid: ls.f, done: true}},
			ok && r.st.Params.CreateOstobj && !r.incomplete(s.ost))
	}
	return r.rep.flush()
}
