package objrec

import "encoding/binary"

// Digest is the 64-bit digest records are compared by (a multiply-xorshift
// hash over 8-byte words: several times faster than a CRC, and only
// accidental collisions matter here).
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

// RecordDigest is the Digest of r's encoding.
func RecordDigest(r *Rec) uint64 {
	var buf [96]byte
	return Digest(r.Append(buf[:0]))
}

// Encoder digests the records of one file's stripes, which differ only in
// object id and stripe index: the fields they share are encoded once per
// file (Reset) instead of once per stripe.
type Encoder struct {
	parent, tail, buf []byte
}

// Reset takes the shared fields from r (its Seq, Oid and StripeIndex are
// ignored).
func (e *Encoder) Reset(r *Rec) {
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
func (e *Encoder) Digest(seq, oid uint64, idx uint32) uint64 {
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

// SumShared is the part of a record's SumDigest that a file's stripes
// share: its parent, stripe size and count, generation and owner.
func SumShared(r *Rec) uint64 {
	h := uint64(0x8a5cd789635d2dff)
	for _, v := range [...]uint64{r.Parent.Seq, uint64(r.Parent.Oid), uint64(r.Parent.Ver), uint64(r.StripeSize),
		uint64(r.StripeCount), uint64(r.Gen), uint64(r.UID), uint64(r.GID), uint64(r.ProjID)} {
		h = mix64(h ^ v)
	}
	return h
}

// SumDigest is the digest summaries add up: that of the record with the
// shared part shared (SumShared), object (seq, oid) and stripe index idx.
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
