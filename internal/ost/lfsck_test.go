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
