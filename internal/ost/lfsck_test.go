package ost

import (
	"testing"

	"nacre/internal/fid"
	"nacre/internal/objrec"
)

// TestSummaryAgreesWithCheckObjects: for a range of objects in every state
// (never written, written with a PFID, a damaged record, destroyed,
// queued for destruction, beyond the range), a block's sum equals the sum
// of the digests CheckObjects accepts for exactly the objects it calls
// initialized (summed as objrec.SumDigest), and the bitmaps say which exist and
// which have no PFID.
func TestSummaryAgreesWithCheckObjects(t *testing.T) {
	s := newStore(t)
	const n = 300
	s.Precreate(seq, 1, n)
	want := map[uint64]uint64{}    // oid -> Digest of its record, for written objects
	wantSum := map[uint64]uint64{} // oid -> SumDigest of its record
	for oid := uint64(1); oid <= n; oid++ {
		switch oid % 5 {
		case 1, 2: // written: a PFID; synced too (data_synced, which no layout knows of)
			must(t, s.Write(obj(oid), 0, []byte("x"), metaFor(fid.FID{Seq: 0x200000400, Oid: uint32(oid)}, uint32(oid%4))))
			if oid%5 == 2 {
				must(t, s.Sync(obj(oid)))
				if !record(t, s, obj(oid)).DataSynced {
					t.Fatalf("object %d synced: its record does not say so", oid)
				}
			}
			r := objrec.FromAttr(record(t, s, obj(oid)))
			want[oid] = objrec.RecordDigest(&r)
			wantSum[oid] = objrec.SumDigest(objrec.SumShared(&r), seq, oid, r.StripeIndex)
		case 3: // damaged: another record, with a PFID
			r := objrec.Rec{Parent: fileB, StripeIndex: 9}
			must(t, s.FaultObject("set_record", obj(oid), &r))
			got := objrec.FromAttr(record(t, s, obj(oid)))
			want[oid] = objrec.RecordDigest(&got)
			wantSum[oid] = objrec.SumDigest(objrec.SumShared(&got), seq, oid, got.StripeIndex)
		case 4:
			if oid%10 == 4 {
				must(t, s.FaultObject("delete", obj(oid), nil))
			}
		}
	}
	s.setDestroying([]fid.ObjID{obj(7)}, true)
	if _, ok := want[7]; !ok {
		t.Fatal("object 7 should be a written one")
	}
	const block = 64
	sum, err := s.Summarize(seq, 0, 256, block)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done {
		t.Fatal("Done with objects up to 300 beyond a range ending at 256")
	}
	sums := make([]uint64, 256/block)
	for oid := uint64(0); oid < 256; oid++ {
		exists := oid >= 1 && oid%10 != 4 && oid != 7
		_, written := want[oid]
		gotExists := sum.Exists[oid/8]&(1<<(oid%8)) != 0
		gotUninit := sum.Uninit[oid/8]&(1<<(oid%8)) != 0
		if gotExists != exists || gotUninit != (exists && !written) {
			t.Fatalf("object %d: exists %v uninitialized %v, want %v %v", oid, gotExists, gotUninit, exists, exists && !written)
		}
		if exists && written {
			sums[oid/block] += wantSum[oid]
		}
	}
	for b := range sums {
		if sum.Sums[b] != sums[b] {
			t.Fatalf("block %d: sum %x, want %x", b, sum.Sums[b], sums[b])
		}
	}
	// CheckObjects agrees object by object: the digests summed are the
	// ones that match, the uninitialized ones match anything, the others
	// are missing.
	var oids, digests []uint64
	for oid := uint64(1); oid < 256; oid++ {
		oids = append(oids, oid)
		digests = append(digests, want[oid]) // 0 for never written ones
	}
	res, err := s.CheckObjects(seq, oids, digests)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Mismatched) != 0 {
		t.Fatalf("CheckObjects found mismatches %v where the summary's digests came from", res.Mismatched)
	}
	for _, i := range res.Missing {
		if oid := oids[i]; oid%10 != 4 && oid != 7 {
			t.Fatalf("CheckObjects says %d is missing", oid)
		}
	}
	// The tail range holds the last objects and nothing after them.
	tail, err := s.Summarize(seq, 256, 256, block)
	if err != nil {
		t.Fatal(err)
	}
	if !tail.Done || tail.Exists[(300-256)/8]&(1<<((300-256)%8)) == 0 {
		t.Fatalf("tail range: done %v, object 300 present %v", tail.Done, tail.Exists[(300-256)/8]&(1<<((300-256)%8)) != 0)
	}
	for _, bad := range [][2]uint64{{0, 64}, {100, 0}, {96, 64}, {1 << 25, 1}} {
		if _, err := s.Summarize(seq, 0, bad[0], bad[1]); err == nil {
			t.Fatalf("Summarize with span %d, block %d succeeded", bad[0], bad[1])
		}
	}
}

// A summary that stops before the next object says where it is, so that
// the checker skips the empty ranges in between (one object at a huge id
// once made it ask for 2^30 empty ranges).
func TestSummaryNamesTheNextObject(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 10)
	far := uint64(1) << 40
	r := objrec.Rec{Parent: fileB, StripeIndex: 0}
	if done, err := s.RepairObjects([]ObjRepair{{Obj: obj(far), Create: true, Rec: r}}); err != nil || !done[0] {
		t.Fatalf("create object %d: %v %v", far, done, err)
	}
	sum, err := s.Summarize(seq, 0, 1024, 64)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Done || sum.Next != far {
		t.Fatalf("summary of [0, 1024): done %v, next %d; want not done, next %d", sum.Done, sum.Next, far)
	}
	if sum, err = s.Summarize(seq, far, 1024, 64); err != nil || !sum.Done || sum.Next != 0 {
		t.Fatalf("summary from %d: %+v, %v; want done", far, sum, err)
	}
}

// DestroyIfEmpty destroys an object only if its record is the one
// expected and it was never written.
func TestDestroyIfEmptyOnlyDestroysUnwrittenObjects(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 10)
	r := objrec.Rec{Parent: fileB, StripeIndex: 1}
	if done, err := s.RepairObjects([]ObjRepair{{Obj: obj(20), Create: true, Rec: r}, {Obj: obj(21), Create: true, Rec: r}}); err != nil || !done[0] || !done[1] {
		t.Fatalf("create: %v %v", done, err)
	}
	must(t, s.Write(obj(21), 0, []byte("data"), metaFor(fileB, 1)))
	digest := func(oid uint64) uint64 {
		rec := objrec.FromAttr(record(t, s, obj(oid)))
		return objrec.RecordDigest(&rec)
	}
	cases := []struct {
		oid    uint64
		expect uint64
		want   bool
	}{
		{20, digest(20) + 1, false}, // another record than the checker saw
		{21, digest(21), false},     // written
		{20, digest(20), true},
		{20, digest(20), false}, // gone already
	}
	for i, c := range cases {
		done, err := s.RepairObjects([]ObjRepair{{Obj: obj(c.oid), Expect: c.expect, DestroyIfEmpty: true}})
		if err != nil || done[0] != c.want {
			t.Fatalf("case %d (object %d): done %v, %v; want %v", i, c.oid, done, err, c.want)
		}
	}
	attrs, err := s.GetObjects([]fid.ObjID{obj(20), obj(21)})
	if err != nil || attrs[0].Exists || !attrs[1].Exists || attrs[1].Size != 4 {
		t.Fatalf("after: %v, %v", attrs, err)
	}
}

// A repair of a written and synced object (its record carries
// data_synced, which the layouts do not know of) applies when the
// checker saw the record as it is, keeps data_synced, and still refuses
// when the record changed since. Before, every synced object's repair was
// refused as stale: a chown of a written file was reported by a dry run
// and never repaired.
func TestRepairOfASyncedObject(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 10)
	must(t, s.Write(obj(3), 0, []byte("data"), metaFor(fileB, 1)))
	must(t, s.Sync(obj(3)))
	before := record(t, s, obj(3))
	if !before.DataSynced {
		t.Fatal("a synced object's record does not say so")
	}
	seen := objrec.FromAttr(before)
	want := seen
	want.UID, want.GID = 1234, 1234
	repair := func(expect uint64) bool {
		t.Helper()
		done, err := s.RepairObjects([]ObjRepair{{Obj: obj(3), Expect: expect, Rec: want}})
		if err != nil {
			t.Fatal(err)
		}
		return done[0]
	}
	if repair(objrec.RecordDigest(&seen) + 1) {
		t.Fatal("a repair of a record the checker did not see was applied")
	}
	if !repair(objrec.RecordDigest(&seen)) {
		t.Fatal("the repair of a synced object was refused")
	}
	after := record(t, s, obj(3))
	if got := objrec.FromAttr(after); got != want || !after.DataSynced {
		t.Fatalf("after the repair: %+v, data_synced %v; want %+v, data_synced", got, after.DataSynced, want)
	}
	if repair(objrec.RecordDigest(&seen)) {
		t.Fatal("a second repair expecting the old record was applied")
	}
}
