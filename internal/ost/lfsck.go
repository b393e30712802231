package ost

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/objrec"
)

// The checker's side of an OST (internal/lfsck). The MDT sends what it
// expects each object's record to be, as a digest (internal/objrec), so a
// batch of thousands of objects is a small message and the OST's work is
// one ordered iteration; only objects that differ travel back.

// CheckResult is what CheckObjects found.
type CheckResult struct {
	Missing       []uint32 // indexes of objects that do not exist
	Mismatched    []uint32 // indexes of objects whose record differs
	Attrs         []*nacrepb.ObjectAttr
	Uninitialized uint64 // objects never written (no PFID): they match
}

// CheckObjects compares the records of objects oids (ascending) of seq
// with the digests the checker expects. A record without a PFID matches
// (the object was never written: Lustre's LU-6420 was reporting those).
func (s *Store) CheckObjects(seq uint64, oids []uint64, digests []uint64) (*CheckResult, error) {
	if len(oids) != len(digests) {
		return nil, fmt.Errorf("check %s objects: %d oids, %d digests: %w", s.label, len(oids), len(digests), ErrInvalid)
	}
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("check %s objects: %w", s.label, err)
	}
	defer s.leave()
	res := &CheckResult{}
	if len(oids) == 0 {
		return res, nil
	}
	lo := objKey(fid.ObjID{Seq: seq, Oid: oids[0]})
	_, hi := seqBounds(seq)
	it, err := s.db.NewIter(lo, hi)
	if err != nil {
		return nil, fmt.Errorf("check %s objects: %w", s.label, err)
	}
	defer it.Close()
	var wantBuf [32]byte
	bare := objrec.NewBare(seq)
	wantBuf[0] = prefixObject
	binary.BigEndian.PutUint64(wantBuf[1:], seq)
	want := wantBuf[:17]
	valid := it.First()
	for i, oid := range oids {
		binary.BigEndian.PutUint64(want[9:], oid)
		for steps := 0; valid && bytes.Compare(it.Key(), want) < 0; steps++ {
			if steps == 8 {
				valid = it.SeekGE(want)
				break
			}
			valid = it.Next()
		}
		obj := fid.ObjID{Seq: seq, Oid: oid}
		if !valid || !bytes.Equal(it.Key(), want) || s.isDestroying(obj) {
			res.Missing = append(res.Missing, uint32(i))
			continue
		}
		v := it.Value()
		if objrec.Digest(objrec.LayoutPart(v)) == digests[i] {
			continue
		}
		if bare.Is(v, oid) {
			res.Uninitialized++
			continue
		}
		rec, err := decodeRecord(obj, v)
		if err != nil {
			// A record that does not decode is reported as a record with
			// no fields; the checker rewrites it.
			rec = &nacrepb.ObjectAttr{Seq: seq, Oid: oid}
		}
		if rec.Parent == nil || fid.FromPB(rec.Parent).IsZero() {
			if err == nil {
				res.Uninitialized++
				continue
			}
		}
		rec.Exists = true
		res.Mismatched = append(res.Mismatched, uint32(i))
		res.Attrs = append(res.Attrs, rec)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("check %s objects: %w", s.label, err)
	}
	return res, nil
}

// Summary is what Summarize found for a range of object ids.
type Summary struct {
	Exists, Uninit []byte   // bit i: id from+i, LSB first
	Sums           []uint64 // per block: the sum of the digests of initialized records
	Done           bool     // no object of seq at or beyond the range
	Next           uint64   // not Done: the first object id after the range
}

// Summarize summarises the records of the objects of seq with ids in
// [from, from+span): which exist, which have no PFID yet (uninitialized:
// they match any expectation, as in CheckObjects), and for every block of
// ids the sum, modulo 2^64, of the objrec.SumDigest of each other record.
// The layout check compares these with the sums of what the MDT's layouts
// expect, and checks object by object only the blocks that differ: one
// ordered iteration, and a reply of two bits per id, instead of a digest
// per object sent by the MDT. The sums are of SumDigest, not Digest: the
// checker computes most of it once per file. An object queued for
// destruction counts as gone.
func (s *Store) Summarize(seq, from, span, block uint64) (*Summary, error) {
	if span == 0 || block == 0 || span%block != 0 || span > 1<<24 || from+span < from {
		return nil, fmt.Errorf("summarise %s objects: span %d, block %d: %w", s.label, span, block, ErrInvalid)
	}
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("summarise %s objects: %w", s.label, err)
	}
	defer s.leave()
	s.destroyMu.Lock()
	var gone map[uint64]bool
	for o := range s.destroying {
		if o.Seq == seq && o.Oid >= from && o.Oid-from < span {
			if gone == nil {
				gone = map[uint64]bool{}
			}
			gone[o.Oid] = true
		}
	}
	s.destroyMu.Unlock()
	sum := &Summary{Exists: make([]byte, (span+7)/8), Uninit: make([]byte, (span+7)/8), Sums: make([]uint64, span/block)}
	// The page's own bounds: a level (or the memtable) with no object in
	// the page then drops out of pebble's merge at once instead of being
	// compared with at every step (a quarter of the OSTs' CPU in a layout
	// check, profiled). nextObject finds where the next page starts.
	_, hi := seqBounds(seq)
	end := objKey(fid.ObjID{Seq: seq, Oid: from + span})
	it, err := s.db.NewIter(objKey(fid.ObjID{Seq: seq, Oid: from}), end)
	if err != nil {
		return nil, fmt.Errorf("summarise %s objects: %w", s.label, err)
	}
	defer it.Close()
	bare := objrec.NewBare(seq)
	seqPart := objrec.SumSeq(seq)
	sum.Done = true
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 17 {
			continue
		}
		oid := binary.BigEndian.Uint64(k[9:])
		if gone[oid] {
			continue
		}
		i := oid - from
		sum.Exists[i/8] |= 1 << (i % 8)
		v := it.Value()
		if bare.Is(v, oid) {
			sum.Uninit[i/8] |= 1 << (i % 8)
			continue
		}
		rec, err := decodeRecord(fid.ObjID{Seq: seq, Oid: oid}, v)
		if err != nil {
			// Matches no expectation: the checker looks at it one by one.
			sum.Sums[i/block] += objrec.Digest(v) | 1
			continue
		}
		if rec.Parent == nil || fid.FromPB(rec.Parent).IsZero() {
			sum.Uninit[i/8] |= 1 << (i % 8)
			continue
		}
		r := objrec.FromAttr(rec)
		sum.Sums[i/block] += objrec.SumDigestSeq(objrec.SumShared(&r), seqPart, oid, r.StripeIndex)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("summarise %s objects: %w", s.label, err)
	}
	next, ok, err := s.nextObject(end, hi)
	if err != nil {
		return nil, fmt.Errorf("summarise %s objects: %w", s.label, err)
	}
	if ok {
		sum.Done, sum.Next = false, next
	}
	return sum, nil
}

// nextObject returns the id of the first object with a key in [lo, hi).
func (s *Store) nextObject(lo, hi []byte) (uint64, bool, error) {
	it, err := s.db.NewIter(lo, hi)
	if err != nil {
		return 0, false, err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if obj, ok := objOfKey(it.Key()); ok {
			return obj.Oid, true, nil
		}
	}
	return 0, false, it.Error()
}

// OrphanObjects returns the objects of seq in [from, to) whose bit in
// referenced is clear (bit i: oid from+i), at most max, and where to
// continue.
func (s *Store) OrphanObjects(seq, from, to uint64, referenced []byte, max int) ([]*nacrepb.ObjectAttr, uint64, error) {
	if err := s.enter(); err != nil {
		return nil, from, fmt.Errorf("list %s orphans: %w", s.label, err)
	}
	defer s.leave()
	if to <= from {
		return nil, to, nil
	}
	if max <= 0 {
		max = 4096
	}
	it, err := s.db.NewIter(objKey(fid.ObjID{Seq: seq, Oid: from}), objKey(fid.ObjID{Seq: seq, Oid: to}))
	if err != nil {
		return nil, from, fmt.Errorf("list %s orphans: %w", s.label, err)
	}
	defer it.Close()
	var out []*nacrepb.ObjectAttr
	for it.First(); it.Valid(); it.Next() {
		obj, ok := objOfKey(it.Key())
		if !ok {
			continue
		}
		bit := obj.Oid - from
		if bit/8 < uint64(len(referenced)) && referenced[bit/8]&(1<<(bit%8)) != 0 {
			continue
		}
		if s.isDestroying(obj) {
			continue
		}
		if len(out) == max {
			return out, obj.Oid, nil
		}
		rec, err := decodeRecord(obj, it.Value())
		if err != nil {
			rec = &nacrepb.ObjectAttr{Seq: obj.Seq, Oid: obj.Oid}
		}
		rec.Exists = true
		out = append(out, rec)
	}
	if err := it.Error(); err != nil {
		return nil, from, fmt.Errorf("list %s orphans: %w", s.label, err)
	}
	return out, to, nil
}

// ObjRepair is one conditional record change.
type ObjRepair struct {
	Obj    fid.ObjID
	Expect uint64     // digest of the current record's layout part (objrec.LayoutPart)
	Create bool       // the object must be absent; create it
	Rec    objrec.Rec // the record to store (Seq and Oid are Obj's)
	// DestroyIfEmpty destroys the object instead, if its record's digest
	// is Expect and it has no data file (never written: a write creates
	// the file under the object's lock, which the check holds).
	DestroyIfEmpty bool
}

// RepairsOf converts the repairs as the checker sends them.
func RepairsOf(items []*nacrepb.LfsckObjRepair) []ObjRepair {
	out := make([]ObjRepair, len(items))
	for i, it := range items {
		rec := objrec.Rec{}
		if it.Record != nil {
			rec = objrec.FromAttr(it.Record)
		}
		out[i] = ObjRepair{Obj: fid.ObjID{Seq: it.Seq, Oid: it.Oid}, Expect: it.Expect, Create: it.Create, Rec: rec, DestroyIfEmpty: it.DestroyIfEmpty}
	}
	return out
}

// RepairObjects applies each repair whose condition holds, and syncs.
// done[i] tells which did.
func (s *Store) RepairObjects(items []ObjRepair) ([]bool, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("repair %s objects: %w", s.label, err)
	}
	defer s.leave()
	done := make([]bool, len(items))
	var creates []int
	for i, r := range items {
		if r.Create {
			creates = append(creates, i)
			continue
		}
		if r.DestroyIfEmpty {
			ok, err := s.destroyIfEmpty(r)
			if err != nil {
				return done, err
			}
			done[i] = ok
			continue
		}
		ok, err := s.repairOne(r)
		if err != nil {
			return done, err
		}
		done[i] = ok
	}
	if len(creates) > 0 {
		s.metaMu.Lock()
		b := s.db.NewWriteBatch()
		n := uint64(0)
		last := map[uint64]uint64{}
		for _, i := range creates {
			r := items[i]
			if _, err := s.db.Get(objKey(r.Obj)); err == nil || !errors.Is(err, kv.ErrNotFound) {
				continue
			}
			rec := r.Rec
			rec.Seq, rec.Oid = r.Obj.Seq, r.Obj.Oid
			b.Set(objKey(r.Obj), rec.Append(nil))
			done[i] = true
			n++
			if r.Obj.Oid > last[r.Obj.Seq] {
				last[r.Obj.Seq] = r.Obj.Oid
			}
		}
		for seq, oid := range last {
			if cur, err := s.lastID(seq); err == nil && oid > cur {
				b.Set(lastIDKey(seq), u64(oid))
			}
		}
		var err error
		if n > 0 {
			b.Set(countKey, u64(s.Objects()+n))
			err = b.Commit(true)
			if err == nil {
				s.objects.Add(int64(n))
			}
		}
		b.Close()
		s.metaMu.Unlock()
		if err != nil {
			return done, fmt.Errorf("repair %s objects: create: %w", s.label, err)
		}
	}
	if err := s.syncRecords(); err != nil {
		return done, fmt.Errorf("repair %s objects: %w", s.label, err)
	}
	return done, nil
}

func (s *Store) destroyIfEmpty(r ObjRepair) (bool, error) {
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	n, err := s.destroyLocked([]fid.ObjID{r.Obj}, func(obj fid.ObjID, v []byte) bool {
		if objrec.Digest(objrec.LayoutPart(v)) != r.Expect {
			return false
		}
		_, err := os.Stat(s.path(obj))
		return errors.Is(err, fs.ErrNotExist)
	}, nil)
	if err != nil {
		return false, fmt.Errorf("repair %s object %s: destroy: %w", s.label, r.Obj, err)
	}
	return n == 1, nil
}

func (s *Store) repairOne(r ObjRepair) (bool, error) {
	mu := s.lockFor(r.Obj)
	mu.Lock()
	defer mu.Unlock()
	if s.isDestroying(r.Obj) {
		return false, nil
	}
	v, err := s.db.Get(objKey(r.Obj))
	if errors.Is(err, kv.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("repair %s object %s: %w", s.label, r.Obj, err)
	}
	// The checker saw the record as the layouts describe it: without
	// data_synced, which a synced write added.
	if objrec.Digest(objrec.LayoutPart(v)) != r.Expect {
		return false, nil
	}
	rec := r.Rec
	rec.Seq, rec.Oid = r.Obj.Seq, r.Obj.Oid
	b := rec.Append(nil)
	if old, err := decodeRecord(r.Obj, v); err == nil && old.DataSynced {
		// The repair is of the layout fields; the data file stays what
		// it was.
		b = objrec.AppendDataSynced(b)
	}
	if err := s.db.Set(objKey(r.Obj), b, false); err != nil {
		return false, fmt.Errorf("repair %s object %s: %w", s.label, r.Obj, err)
	}
	s.recDirty.Add(1)
	if e := s.fds.get(r.Obj); e != nil {
		e.hasPFID.Store(!rec.Parent.IsZero())
		s.fds.release(e)
	}
	return true, nil
}

// StoreDigest summarises every key and value of the attribute store.
func (s *Store) StoreDigest() (uint64, uint64, error) {
	if err := s.enter(); err != nil {
		return 0, 0, err
	}
	defer s.leave()
	return kv.Digest(s.db)
}

// FaultObject damages one object on purpose (nacre fault inject):
// "delete" removes its record and data (leaving LAST_ID), "set_record"
// stores rec as its record, "clear_pfid" drops its PFID and owner.
func (s *Store) FaultObject(kind string, obj fid.ObjID, rec *objrec.Rec) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	switch kind {
	case "delete":
		s.metaMu.Lock()
		defer s.metaMu.Unlock()
		mu := s.lockFor(obj)
		mu.Lock()
		defer mu.Unlock()
		if _, err := s.getRecord(obj); err != nil {
			return fmt.Errorf("fault on %s object %s: %w", s.label, obj, err)
		}
		s.fds.drop(obj)
		if err := os.Remove(s.path(obj)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		b := s.db.NewWriteBatch()
		defer b.Close()
		b.Delete(objKey(obj))
		b.Set(countKey, u64(s.Objects()-min(1, s.Objects())))
		if err := b.Commit(true); err != nil {
			return err
		}
		s.objects.Add(-1)
		return nil
	case "set_record", "clear_pfid":
		mu := s.lockFor(obj)
		mu.Lock()
		defer mu.Unlock()
		if _, err := s.getRecord(obj); err != nil {
			return fmt.Errorf("fault on %s object %s: %w", s.label, obj, err)
		}
		r := objrec.Rec{Seq: obj.Seq, Oid: obj.Oid}
		if kind == "set_record" && rec != nil {
			r = *rec
			r.Seq, r.Oid = obj.Seq, obj.Oid
		}
		if err := s.db.Set(objKey(obj), r.Append(nil), true); err != nil {
			return err
		}
		if e := s.fds.get(obj); e != nil {
			e.hasPFID.Store(!r.Parent.IsZero())
			s.fds.release(e)
		}
		return nil
	}
	return fmt.Errorf("fault on %s object %s: unknown kind %q: %w", s.label, obj, kind, ErrInvalid)
}

// Record returns obj's record as the checker compares it, and its digest.
func (s *Store) Record(obj fid.ObjID) (*nacrepb.ObjectAttr, uint64, error) {
	if err := s.enter(); err != nil {
		return nil, 0, err
	}
	defer s.leave()
	v, err := s.db.Get(objKey(obj))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, 0, ErrNoObject
	}
	if err != nil {
		return nil, 0, err
	}
	rec, err := decodeRecord(obj, v)
	if err != nil {
		return &nacrepb.ObjectAttr{Seq: obj.Seq, Oid: obj.Oid, Exists: true}, objrec.Digest(v), nil
	}
	rec.Exists = true
	return rec, objrec.Digest(v), nil
}
