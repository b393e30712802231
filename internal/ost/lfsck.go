package ost

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io/fs"
	"os"

	"nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// The checker's side of an OST (internal/lfsck). The MDT sends what it
// expects each object's record to be, as a digest, so a batch of thousands
// of objects is a small message and the OST's work is one ordered
// iteration; only objects that differ travel back.

// Rec is the part of an attribute record the checker compares.
type Rec struct {
	Seq, Oid                                  uint64
	Parent                                    fid.FID
	StripeIndex, StripeSize, StripeCount, Gen uint32
	UID, GID, ProjID                          uint32
}

// Append encodes r exactly as the store encodes a record (encodeRecord):
// proto3, fields in number order, zero values omitted (tags of fields 1 to
// 10 are one byte). Hand-written: the layout check encodes one per stripe.
func (r *Rec) Append(b []byte) []byte {
	u := func(tag byte, v uint64) {
		if v != 0 {
			b = append(b, tag)
			for v >= 0x80 {
				b = append(b, byte(v)|0x80)
				v >>= 7
			}
			b = append(b, byte(v))
		}
	}
	u(1<<3, r.Seq)
	u(2<<3, r.Oid)
	if !r.Parent.IsZero() {
		b = append(b, 3<<3|2, 0)
		at := len(b)
		u(1<<3, r.Parent.Seq)
		u(2<<3, uint64(r.Parent.Oid))
		u(3<<3, uint64(r.Parent.Ver))
		b[at-1] = byte(len(b) - at) // at most 33 bytes: one length byte
	}
	u(4<<3, uint64(r.StripeIndex))
	u(5<<3, uint64(r.StripeSize))
	u(6<<3, uint64(r.StripeCount))
	u(7<<3, uint64(r.Gen))
	u(8<<3, uint64(r.UID))
	u(9<<3, uint64(r.GID))
	u(10<<3, uint64(r.ProjID))
	return b
}

// bareRec recognises the record of an object never written, Rec{Seq, Oid}
// as Append encodes it, without encoding one per object (Summarize).
type bareRec struct{ prefix []byte } // the sequence's tag and varint

func newBareRec(seq uint64) bareRec {
	r := Rec{Seq: seq}
	return bareRec{prefix: r.Append(nil)}
}

// is reports whether v is exactly the bare record of object oid.
func (b bareRec) is(v []byte, oid uint64) bool {
	if !bytes.HasPrefix(v, b.prefix) {
		return false
	}
	v = v[len(b.prefix):]
	if oid == 0 {
		return len(v) == 0
	}
	if len(v) < 2 || v[0] != 2<<3 || v[len(v)-1] == 0 { // a trailing 0: not the shortest varint
		return false
	}
	x, n := binary.Uvarint(v[1:])
	return n == len(v)-1 && x == oid
}

// RecEncoder digests the records of one file's stripes, which differ
// only in object id and stripe index: the fields they share are encoded
// once per file (Reset) instead of once per stripe.
type RecEncoder struct {
	parent, tail, buf []byte
}

// Reset takes the shared fields from r (its Seq, Oid and StripeIndex are
// ignored).
func (e *RecEncoder) Reset(r *Rec) {
	shared := *r
	shared.Seq, shared.Oid, shared.StripeIndex = 0, 0, 0
	// Seq, Oid and StripeIndex are zero, so the encoding is the parent
	// field followed by fields 5 to 10.
	b := shared.Append(e.buf[:0])
	e.buf = b
	n := 0
	if !shared.Parent.IsZero() {
		n = 2 + int(b[1])
	}
	e.parent, e.tail = b[:n], b[n:]
}

// Digest is RecordDigest of the record with the shared fields and seq,
// oid and stripe index idx.
func (e *RecEncoder) Digest(seq, oid uint64, idx uint32) uint64 {
	var buf [96]byte
	r := Rec{Seq: seq, Oid: oid}
	b := r.Append(buf[:0])
	b = append(b, e.parent...)
	if idx != 0 {
		r = Rec{StripeIndex: idx}
		b = r.Append(b)
	}
	return Digest(append(b, e.tail...))
}

// Digest is the 64-bit digest the checker compares records with (a
// multiply-xorshift hash over 8-byte words: several times faster than a
// CRC, and only accidental collisions matter here).
func Digest(b []byte) uint64 {
	h := uint64(len(b))*0x9e3779b97f4a7c15 ^ 0x243f6a8885a308d3
	for len(b) >= 8 {
		h = mix64(h ^ binary.LittleEndian.Uint64(b))
		b = b[8:]
	}
	var t [8]byte
	copy(t[:], b)
	return mix64(h ^ binary.LittleEndian.Uint64(t[:]) ^ uint64(len(b))<<59)
}

func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// SumShared and SumDigest are the digest that summaries add up
// (Summarize, and the checker's table of expectations): a function of a
// record's fields rather than of its encoding, in two parts so that the
// checker computes the fields a file's stripes share once per file and
// spends a few nanoseconds per stripe. Only accidental collisions matter.
func SumShared(r *Rec) uint64 {
	h := uint64(0x8a5cd789635d2dff)
	for _, v := range [...]uint64{r.Parent.Seq, uint64(r.Parent.Oid), uint64(r.Parent.Ver), uint64(r.StripeSize),
		uint64(r.StripeCount), uint64(r.Gen), uint64(r.UID), uint64(r.GID), uint64(r.ProjID)} {
		h = mix64(h ^ v)
	}
	return h
}

// SumDigest is the summary digest of the record with the shared part
// shared, object (seq, oid) and stripe index idx.
func SumDigest(shared, seq, oid uint64, idx uint32) uint64 {
	return SumDigestSeq(shared, SumSeq(seq), oid, idx)
}

// SumSeq is the part of SumDigest that only the sequence decides: the
// checker, whose stripes all name one sequence, computes it once per run.
func SumSeq(seq uint64) uint64 { return mix64(seq ^ 0x9e3779b97f4a7c15) }

// SumDigestSeq is SumDigest with seqPart = SumSeq(seq).
func SumDigestSeq(shared, seqPart, oid uint64, idx uint32) uint64 {
	return mix64(shared ^ seqPart ^ oid*0xff51afd7ed558ccd ^ uint64(idx)<<40)
}

// RecordDigest is the digest of the record r describes.
func RecordDigest(r *Rec) uint64 {
	var buf [96]byte
	return Digest(r.Append(buf[:0]))
}

// AttrRec converts a record message to a Rec.
func AttrRec(a *nacrepb.ObjectAttr) Rec {
	return Rec{Seq: a.Seq, Oid: a.Oid, Parent: fid.FromPB(a.Parent), StripeIndex: a.StripeIndex, StripeSize: a.StripeSize,
		StripeCount: a.StripeCount, Gen: a.LayoutGen, UID: a.Uid, GID: a.Gid, ProjID: a.Projid}
}

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
	bare := newBareRec(seq)
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
		if Digest(layoutPart(v)) == digests[i] {
			continue
		}
		if bare.is(v, oid) {
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

// layoutPart is the part of a stored record that the MDT's layouts
// describe: all but data_synced (field 15, encoded last, as 0x78 0x01),
// which only the OST knows. In a valid record those two bytes at the end
// can only be that field: 0x78 ends any varint it is part of.
func layoutPart(v []byte) []byte {
	if n := len(v); n >= 2 && v[n-2] == 15<<3 && v[n-1] == 1 {
		return v[:n-2]
	}
	return v
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
// ids the sum, modulo 2^64, of the SumDigest of each other record. The layout
// check compares these with the sums of what the MDT's layouts expect,
// and checks object by object only the blocks that differ: one ordered
// iteration, and a reply of two bits per id, instead of a digest per
// object sent by the MDT. The sums are of SumDigest, not Digest: the
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
	// check, profiled 2026-11-29). nextObject finds where the next page
	// starts.
	_, hi := seqBounds(seq)
	end := objKey(fid.ObjID{Seq: seq, Oid: from + span})
	it, err := s.db.NewIter(objKey(fid.ObjID{Seq: seq, Oid: from}), end)
	if err != nil {
		return nil, fmt.Errorf("summarise %s objects: %w", s.label, err)
	}
	defer it.Close()
	bare := newBareRec(seq)
	seqPart := SumSeq(seq)
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
		if bare.is(v, oid) {
			sum.Uninit[i/8] |= 1 << (i % 8)
			continue
		}
		rec, err := decodeRecord(fid.ObjID{Seq: seq, Oid: oid}, v)
		if err != nil {
			// Matches no expectation: the checker looks at it one by one.
			sum.Sums[i/block] += Digest(v) | 1
			continue
		}
		if rec.Parent == nil || fid.FromPB(rec.Parent).IsZero() {
			sum.Uninit[i/8] |= 1 << (i % 8)
			continue
		}
		r := AttrRec(rec)
		sum.Sums[i/block] += SumDigestSeq(SumShared(&r), seqPart, oid, r.StripeIndex)
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
	Expect uint64 // digest of the current record's layout part (layoutPart)
	Create bool   // the object must be absent; create it
	Rec    Rec    // the record to store (Seq and Oid are Obj's)
	// DestroyIfEmpty destroys the object instead, if its record's digest
	// is Expect and it has no data file (never written: a write creates
	// the file under the object's lock, which the check holds).
	DestroyIfEmpty bool
}

// RepairsOf converts the repairs as the checker sends them.
func RepairsOf(items []*nacrepb.LfsckObjRepair) []ObjRepair {
	out := make([]ObjRepair, len(items))
	for i, it := range items {
		rec := Rec{}
		if it.Record != nil {
			rec = AttrRec(it.Record)
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
		if Digest(layoutPart(v)) != r.Expect {
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
	if Digest(layoutPart(v)) != r.Expect {
		return false, nil
	}
	rec := r.Rec
	rec.Seq, rec.Oid = r.Obj.Seq, r.Obj.Oid
	b := rec.Append(nil)
	if old, err := decodeRecord(r.Obj, v); err == nil && old.DataSynced {
		// The repair is of the layout fields; the data file stays what
		// it was (ObjectAttr.data_synced, field 15).
		b = append(b, 15<<3, 1)
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
	return DigestAll(s.db)
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// DigestAll is a CRC-64 over every key and value of a store, in order.
func DigestAll(r kv.Reader) (uint64, uint64, error) {
	it, err := r.NewIter(nil, nil)
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	var crc, n uint64
	var lb [8]byte
	for it.First(); it.Valid(); it.Next() {
		binary.BigEndian.PutUint64(lb[:], uint64(len(it.Key())))
		crc = crc64.Update(crc, crcTable, lb[:])
		crc = crc64.Update(crc, crcTable, it.Key())
		binary.BigEndian.PutUint64(lb[:], uint64(len(it.Value())))
		crc = crc64.Update(crc, crcTable, lb[:])
		crc = crc64.Update(crc, crcTable, it.Value())
		n++
	}
	return crc, n, it.Error()
}

// FaultObject damages one object on purpose (nacre fault inject):
// "delete" removes its record and data (leaving LAST_ID), "set_record"
// stores rec as its record, "clear_pfid" drops its PFID and owner.
func (s *Store) FaultObject(kind string, obj fid.ObjID, rec *Rec) error {
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
		r := Rec{Seq: obj.Seq, Oid: obj.Oid}
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
		return &nacrepb.ObjectAttr{Seq: obj.Seq, Oid: obj.Oid, Exists: true}, Digest(v), nil
	}
	rec.Exists = true
	return rec, Digest(v), nil
}
