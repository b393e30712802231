package ost

import (
	"math/rand"
	"testing"

	"nacre/internal/fid"
	"nacre/internal/objrec"
)

// TestCheckerCallsSurviveGarbageRecords: object records that do not
// decode (bit rot, a foreign tool, a bug) are reported, never a panic,
// by every call the checker makes on an OST: summaries, object checks,
// the orphan listing, record reads and conditional repairs. Seeded, so a
// failure repeats.
func TestCheckerCallsSurviveGarbageRecords(t *testing.T) {
	s := newStore(t)
	const seq = 0x100000400
	end, err := s.Precreate(seq, 1, 64)
	must(t, err)
	rng := rand.New(rand.NewSource(5))
	var oids []uint64
	for oid := uint64(1); oid < end; oid++ {
		oids = append(oids, oid)
		if oid%2 == 1 {
			continue // half keep their proper records
		}
		junk := make([]byte, rng.Intn(80))
		rng.Read(junk)
		must(t, s.db.Set(objKey(fid.ObjID{Seq: seq, Oid: oid}), junk, false))
	}
	// Keys of the object range that are not object keys at all.
	must(t, s.db.Set(append(objKey(fid.ObjID{Seq: seq, Oid: 3}), 0xff), []byte("x"), false))

	sum, err := s.Summarize(seq, 0, 1<<16, 1<<10)
	if err != nil {
		t.Fatalf("summarise: %v", err)
	}
	if !sum.Done || sum.Exists[0] == 0 {
		t.Fatalf("summary %+v: the objects are not all listed", sum)
	}
	digests := make([]uint64, len(oids))
	for i := range digests {
		digests[i] = rng.Uint64()
	}
	res, err := s.CheckObjects(seq, oids, digests)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	if len(res.Missing) != 0 {
		t.Fatalf("check says %d of the objects are missing", len(res.Missing))
	}
	if _, _, err := s.OrphanObjects(seq, 1, end, make([]byte, (end+7)/8), 0); err != nil {
		t.Fatalf("orphans: %v", err)
	}
	var objs []fid.ObjID
	for _, oid := range oids {
		objs = append(objs, fid.ObjID{Seq: seq, Oid: oid})
	}
	if _, err := s.GetObjects(objs); err != nil {
		t.Logf("records: %v (an error, not a panic, is fine)", err)
	}
	// A repair conditioned on a garbage record's digest replaces it.
	o := fid.ObjID{Seq: seq, Oid: 2}
	v, err := s.db.Get(objKey(o))
	must(t, err)
	done, err := s.RepairObjects([]ObjRepair{{Obj: o, Expect: objrec.Digest(v), Rec: objrec.Rec{Parent: fid.FID{Seq: 0x200000400, Oid: 9}}}})
	if err != nil || len(done) != 1 || !done[0] {
		t.Fatalf("repair of a garbage record: %v %v", done, err)
	}
	if a := record(t, s, o); fid.FromPB(a.Parent).Oid != 9 {
		t.Fatalf("after the repair the record says %+v", a)
	}
}
