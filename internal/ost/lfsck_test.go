package ost

import (
	"math/rand"
	"testing"

	"nacre/internal/fid"
)

// TestRecEncoderDigestsLikeOneRecord: the per-file encoder gives every
// stripe the digest of its whole record, with zero and large values in
// every field (zero fields are left out of the encoding, large ones take
// several varint bytes).
func TestRecEncoderDigestsLikeOneRecord(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	pick := func() uint64 {
		switch rng.Intn(4) {
		case 0:
			return 0
		case 1:
			return uint64(rng.Intn(200))
		default:
			return rng.Uint64() >> uint(rng.Intn(64))
		}
	}
	var e RecEncoder
	for i := 0; i < 5000; i++ {
		shared := Rec{StripeSize: uint32(pick()), StripeCount: uint32(pick()), Gen: uint32(pick()),
			UID: uint32(pick()), GID: uint32(pick()), ProjID: uint32(pick())}
		if rng.Intn(5) != 0 {
			shared.Parent = fid.FID{Seq: pick(), Oid: uint32(pick()), Ver: uint32(pick())}
		}
		// Stale per-stripe fields must not leak into the shared part.
		shared.Seq, shared.Oid, shared.StripeIndex = pick(), pick(), uint32(pick())
		e.Reset(&shared)
		for j := 0; j < 4; j++ {
			r := shared
			r.Seq, r.Oid, r.StripeIndex = pick(), pick(), uint32(pick())
			if got, want := e.Digest(r.Seq, r.Oid, r.StripeIndex), RecordDigest(&r); got != want {
				t.Fatalf("record %+v: encoder digest %x, record digest %x", r, got, want)
			}
		}
	}
}

// TestSummaryAgreesWithCheckObjects: for a range of objects in every state
// (never written, written with a PFID, a damaged record, destroyed,
// queued for destruction, beyond the range), a block's sum equals the sum
// of the digests CheckObjects accepts for exactly the objects it calls
// initialized (summed as SumDigest), and the bitmaps say which exist and
// which have no PFID.
func TestSummaryAgreesWithCheckObjects(t *testing.T) {
	s := newStore(t)
	const n = 300
	s.Precreate(seq, 1, n)
	want := map[uint64]uint64{}    // oid -> Digest of its record, for written objects
	wantSum := map[uint64]uint64{} // oid -> SumDigest of its record
	for oid := uint64(1); oid <= n; oid++ {
		switch oid % 5 {
		case 1, 2: // written: a PFID
			must(t, s.Write(obj(oid), 0, []byte("x"), metaFor(fid.FID{Seq: 0x200000400, Oid: uint32(oid)}, uint32(oid%4))))
			r := AttrRec(record(t, s, obj(oid)))
			want[oid] = RecordDigest(&r)
			wantSum[oid] = SumDigest(SumShared(&r), seq, oid, r.StripeIndex)
		case 3: // damaged: another record, with a PFID
			r := Rec{Parent: fileB, StripeIndex: 9}
			must(t, s.FaultObject("set_record", obj(oid), &r))
			got := AttrRec(record(t, s, obj(oid)))
			want[oid] = RecordDigest(&got)
			wantSum[oid] = SumDigest(SumShared(&got), seq, oid, got.StripeIndex)
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
