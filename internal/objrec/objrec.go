// Package objrec is the contract between an OST and the layout checker:
// the attribute record of an OST object, how it is encoded, and the
// digests the checker and the OST compare records by. The OST stores
// records (internal/ost) and the checker (internal/lfsck) computes what
// each record should be from the MDT's layouts; both go through this
// package, so that a digest the MDT computes equals the digest of the
// bytes the OST holds.
//
// # The record
//
// A record is a nacrepb.ObjectAttr with only its stored fields, encoded
// as proto3 encodes it: fields in number order, zero values left out.
//
//	1  seq           the object's own id (as an LMA would: a record
//	2  oid           found under another key is corrupt)
//	3  parent        PFID: the file whose layout holds the object; unset
//	                 until the first write, truncate or setattr through a layout
//	4  stripe_index  the object's slot in that layout
//	5  stripe_size   the layout's stripe size,
//	6  stripe_count  stripe count,
//	7  layout_gen    and generation
//	8  uid           the file's owner
//	9  gid
//	10 projid
//	15 data_synced   the data file was made and synced (the OST's own
//	                 fact, which no layout describes; encoded last)
//
// Rec holds fields 1 to 10, the part of a record a layout describes (its
// layout part), and Rec.Append encodes it byte for byte as the store
// does, without a proto message. A record whose parent is unset was never
// written (uninitialized): it matches any expectation, as Lustre's LFSCK
// stopped reporting such objects (LU-6420). Bare recognises the bare
// record {seq, oid} without decoding it.
//
// # The digests
//
// Digest is a 64-bit hash of bytes; RecordDigest is the Digest of a Rec's
// encoding, and Encoder computes it for the stripes of one file, which
// share all fields but the object id and stripe index. The layout check
// sends an OST, per object, the RecordDigest of the record the object
// should hold; the OST compares it with the Digest of the layout part of
// the record it holds (LayoutPart) and returns only the records that
// differ. A conditional repair carries the digest of the record the
// checker saw, and the OST applies it only if the record is still that one.
//
// SumDigest is another digest, of a record's fields rather than of its
// encoding, in parts that a file's stripes share (SumShared, SumSeq), so
// that the checker pays a few nanoseconds per stripe. An OST summarises a
// range of its objects as the sum, modulo 2^64, of the SumDigests of each
// block of written records; the checker adds up the SumDigests it expects
// for the same block, and checks object by object only the blocks whose
// sums differ.
//
// Only accidental collisions matter: the digests guard against damage
// and changes in flight, not against an adversary.
package objrec

import (
	"bytes"
	"encoding/binary"

	"nacre/api/nacrepb"
	"nacre/internal/fid"
)

// Rec is the layout part of an object's record (fields 1 to 10).
type Rec struct {
	Seq, Oid                                  uint64
	Parent                                    fid.FID
	StripeIndex, StripeSize, StripeCount, Gen uint32
	UID, GID, ProjID                          uint32
}

// Append encodes r exactly as the store encodes a record: proto3, fields
// in number order, zero values omitted (tags of fields 1 to 10 are one
// byte). Hand-written: the layout check encodes one per stripe.
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

// FromAttr takes the layout part of a record message.
func FromAttr(a *nacrepb.ObjectAttr) Rec {
	return Rec{Seq: a.Seq, Oid: a.Oid, Parent: fid.FromPB(a.Parent), StripeIndex: a.StripeIndex, StripeSize: a.StripeSize,
		StripeCount: a.StripeCount, Gen: a.LayoutGen, UID: a.Uid, GID: a.Gid, ProjID: a.Projid}
}

// Attr is r as a record message (what a repair asks an OST to store).
func (r *Rec) Attr() *nacrepb.ObjectAttr {
	return &nacrepb.ObjectAttr{Seq: r.Seq, Oid: r.Oid, Parent: r.Parent.PB(), StripeIndex: r.StripeIndex, StripeSize: r.StripeSize,
		StripeCount: r.StripeCount, LayoutGen: r.Gen, Uid: r.UID, Gid: r.GID, Projid: r.ProjID}
}

// dataSynced is field 15 set (data_synced true), as proto3 encodes it.
var dataSynced = [2]byte{15 << 3, 1}

// LayoutPart is the part of an encoded record that the MDT's layouts
// describe: all but data_synced (field 15, encoded last, as 0x78 0x01),
// which only the OST knows. In a valid record those two bytes at the end
// can only be that field: 0x78 ends any varint it is part of.
func LayoutPart(v []byte) []byte {
	if n := len(v); n >= 2 && v[n-2] == dataSynced[0] && v[n-1] == dataSynced[1] {
		return v[:n-2]
	}
	return v
}

// AppendDataSynced appends data_synced to an encoded layout part: a repair
// of the layout fields keeps what the OST knows of the data file.
func AppendDataSynced(b []byte) []byte { return append(b, dataSynced[:]...) }

// Bare recognises the record of an object never written, Rec{Seq, Oid} as
// Append encodes it, without encoding one per object (an OST's summary
// reads every record of a range).
type Bare struct{ prefix []byte } // the sequence's tag and varint

// NewBare returns the recogniser of the bare records of sequence seq.
func NewBare(seq uint64) Bare {
	r := Rec{Seq: seq}
	return Bare{prefix: r.Append(nil)}
}

// Is reports whether v is exactly the bare record of object oid.
func (b Bare) Is(v []byte, oid uint64) bool {
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
