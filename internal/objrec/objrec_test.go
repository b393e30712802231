package objrec

import (
	"bytes"
	"math/rand"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// randRec is a record with zero, small and large values in every field
// (zero fields are left out of the encoding, large ones take several
// varint bytes).
func randRec(rng *rand.Rand) Rec {
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
	r := Rec{Seq: pick(), Oid: pick(), StripeIndex: uint32(pick()), StripeSize: uint32(pick()), StripeCount: uint32(pick()),
		Gen: uint32(pick()), UID: uint32(pick()), GID: uint32(pick()), ProjID: uint32(pick())}
	if rng.Intn(3) > 0 {
		r.Parent = fid.FID{Seq: pick(), Oid: uint32(pick()), Ver: uint32(pick())}
	}
	return r
}

func pbOrNil(f fid.FID) *pb.FID {
	if f.IsZero() {
		return nil
	}
	return f.PB()
}

// The digests the MDT computes are of the bytes the OST stores: Append
// encodes a record as proto does (the OST marshals the message).
func TestAppendEncodesAsTheStoreDoes(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 2000; i++ {
		r := randRec(rng)
		want, err := proto.Marshal(&pb.ObjectAttr{Seq: r.Seq, Oid: r.Oid, Parent: pbOrNil(r.Parent), StripeIndex: r.StripeIndex,
			StripeSize: r.StripeSize, StripeCount: r.StripeCount, LayoutGen: r.Gen, Uid: r.UID, Gid: r.GID, Projid: r.ProjID})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Append(nil); !bytes.Equal(got, want) {
			t.Fatalf("record %+v: %x, proto %x", r, got, want)
		}
		if back := FromAttr(r.Attr()); back != r {
			t.Fatalf("record %+v through its message: %+v", r, back)
		}
	}
}

// LayoutPart drops data_synced, which the OST adds to a written object's
// record and no layout knows of, and nothing else: the layout part of a
// stored record encodes as its Rec does, also when a field's varint ends
// in the bytes data_synced is made of.
func TestLayoutPartIsTheRecordWithoutDataSynced(t *testing.T) {
	rng := rand.New(rand.NewSource(9))
	for i := 0; i < 2000; i++ {
		r := randRec(rng)
		if i%7 == 0 {
			r.ProjID = 0x78 // the last field's value is the tag byte of data_synced
		}
		for _, synced := range []bool{false, true} {
			a := r.Attr()
			a.Parent = pbOrNil(r.Parent) // as the OST holds it: no empty PFID
			a.DataSynced = synced
			stored, err := proto.Marshal(a)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := LayoutPart(stored), r.Append(nil); !bytes.Equal(got, want) {
				t.Fatalf("record %+v, data_synced %v: layout part %x, want %x", r, synced, got, want)
			}
			if synced && !bytes.Equal(AppendDataSynced(r.Append(nil)), stored) {
				t.Fatalf("record %+v: the layout part with data_synced is not the stored record", r)
			}
		}
	}
}

// The per-file encoder gives every stripe the digest of its whole record.
func TestEncoderDigestsLikeOneRecord(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var e Encoder
	for i := 0; i < 5000; i++ {
		// Stale per-stripe fields must not leak into the shared part.
		shared := randRec(rng)
		e.Reset(&shared)
		for j := 0; j < 4; j++ {
			r := randRec(rng)
			r.Parent, r.StripeSize, r.StripeCount, r.Gen = shared.Parent, shared.StripeSize, shared.StripeCount, shared.Gen
			r.UID, r.GID, r.ProjID = shared.UID, shared.GID, shared.ProjID
			if got, want := e.Digest(r.Seq, r.Oid, r.StripeIndex), RecordDigest(&r); got != want {
				t.Fatalf("record %+v: encoder digest %x, record digest %x", r, got, want)
			}
		}
	}
}

// The summary digest in parts is the digest of the whole: SumDigest of a
// record's shared part, sequence, id and index differs when any field
// does.
func TestSumDigestSeesEveryField(t *testing.T) {
	base := Rec{Seq: fid.OSTSeq(0), Oid: 7, Parent: fid.FID{Seq: 0x200000400, Oid: 3}, StripeIndex: 1, StripeSize: 1 << 20,
		StripeCount: 2, Gen: 1, UID: 10, GID: 20, ProjID: 30}
	sum := func(r Rec) uint64 { return SumDigest(SumShared(&r), r.Seq, r.Oid, r.StripeIndex) }
	if got, want := SumDigestSeq(SumShared(&base), SumSeq(base.Seq), base.Oid, base.StripeIndex), sum(base); got != want {
		t.Fatalf("SumDigestSeq %x, SumDigest %x", got, want)
	}
	changes := []func(*Rec){
		func(r *Rec) { r.Seq++ }, func(r *Rec) { r.Oid++ }, func(r *Rec) { r.Parent.Seq++ }, func(r *Rec) { r.Parent.Oid++ },
		func(r *Rec) { r.Parent.Ver++ }, func(r *Rec) { r.StripeIndex++ }, func(r *Rec) { r.StripeSize++ },
		func(r *Rec) { r.StripeCount++ }, func(r *Rec) { r.Gen++ }, func(r *Rec) { r.UID++ }, func(r *Rec) { r.GID++ },
		func(r *Rec) { r.ProjID++ },
	}
	for i, change := range changes {
		r := base
		change(&r)
		if sum(r) == sum(base) {
			t.Errorf("change %d (%+v): the summary digest did not change", i, r)
		}
	}
}

// Bare.Is must say exactly what comparing with the encoded bare record
// says, for bare records, records with more fields, other ids and
// sequences, and longer encodings of the same numbers.
func TestBareIsTheEncodedBareRecord(t *testing.T) {
	for _, seq := range []uint64{0, 1, fid.OSTSeq(0), fid.OSTSeq(7), 1 << 63} {
		bare := NewBare(seq)
		for _, oid := range []uint64{0, 1, 127, 128, 300, 1 << 20, 1<<64 - 1} {
			own := Rec{Seq: seq, Oid: oid}
			vals := [][]byte{nil, own.Append(nil), (&Rec{Seq: seq, Oid: oid + 1}).Append(nil), (&Rec{Seq: seq + 1, Oid: oid}).Append(nil),
				(&Rec{Seq: seq, Oid: oid, StripeIndex: 1}).Append(nil), (&Rec{Seq: seq, Oid: oid, Parent: fid.FID{Seq: 0x200000400, Oid: 1}}).Append(nil),
				append(own.Append(nil), 0)}
			if oid != 0 { // the id's varint one byte longer than it needs
				v := own.Append(nil)
				last := v[len(v)-1]
				vals = append(vals, append(append(v[:len(v)-1:len(v)-1], last|0x80), 0))
			}
			for _, v := range vals {
				if got, want := bare.Is(v, oid), bytes.Equal(v, own.Append(nil)); got != want {
					t.Fatalf("seq %x oid %d record %x: is %v, want %v", seq, oid, v, got, want)
				}
			}
		}
	}
}
