// Package fid defines Nacre's file identifiers (FIDs) and the reserved
// sequences, as in Lustre: a FID is (sequence, object id, version), printed
// as [0xSEQ:0xOID:0xVER].
//
// Sequences are handed out in ranges by the sequence controller on the MGS;
// an MDT allocates object ids inside its current sequence, at most Width per
// sequence, so FIDs are unique cluster-wide without a round trip per create.
// OST objects are named by (OST sequence, object id), where each MDT owns one
// OST sequence (OSTSeq) on every OST.
package fid

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"nacre/api/nacrepb"
)

// FID is a cluster-wide file identifier.
type FID struct {
	Seq uint64
	Oid uint32
	Ver uint32
}

// Reserved sequences and FIDs.
const (
	// SeqDotNacre holds the virtual .nacre directory and its children.
	SeqDotNacre uint64 = 0x200000002
	// SeqRoot holds the root directory.
	SeqRoot uint64 = 0x200000007
	// SeqNormal is the first sequence the controller grants.
	SeqNormal uint64 = 0x200000400
	// Width is the number of object ids an MDT uses in one sequence
	// (Lustre's LUSTRE_SEQ_MAX_WIDTH).
	Width uint32 = 0x20000
	// ostSeqBase is the first OST object sequence; MDT n uses ostSeqBase+n.
	ostSeqBase uint64 = 0x100000000
)

var (
	// Root is the root directory's FID.
	Root = FID{Seq: SeqRoot, Oid: 1}
	// DotNacre is the virtual .nacre directory (Lustre's .lustre).
	DotNacre = FID{Seq: SeqDotNacre, Oid: 1}
	// DotNacreFid is the virtual .nacre/fid directory.
	DotNacreFid = FID{Seq: SeqDotNacre, Oid: 2}
	// LostFound is the checker's .nacre/lost+found directory.
	LostFound = FID{Seq: SeqDotNacre, Oid: 3}
)

// OSTSeq returns the OST object sequence owned by MDT mdt.
func OSTSeq(mdt uint32) uint64 { return ostSeqBase + uint64(mdt) }

// IsZero reports whether f is the zero FID (no FID).
func (f FID) IsZero() bool { return f == FID{} }

// String formats f as Lustre does: [0x200000400:0x1:0x0].
func (f FID) String() string {
	return fmt.Sprintf("[0x%x:0x%x:0x%x]", f.Seq, f.Oid, f.Ver)
}

// Parse accepts a FID with or without brackets, in hex with or without 0x.
func Parse(s string) (FID, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimPrefix(t, "[")
	t = strings.TrimSuffix(t, "]")
	parts := strings.Split(t, ":")
	if len(parts) != 3 {
		return FID{}, fmt.Errorf("invalid FID %q: want [0xSEQ:0xOID:0xVER]", s)
	}
	var v [3]uint64
	for i, p := range parts {
		p = strings.TrimPrefix(strings.TrimPrefix(p, "0x"), "0X")
		bits := 32
		if i == 0 {
			bits = 64
		}
		n, err := strconv.ParseUint(p, 16, bits)
		if err != nil {
			return FID{}, fmt.Errorf("invalid FID %q: field %d: %v", s, i+1, err)
		}
		v[i] = n
	}
	return FID{Seq: v[0], Oid: uint32(v[1]), Ver: uint32(v[2])}, nil
}

// Size is the length of the binary form.
const Size = 16

// Put writes f big-endian into b[:16], so that byte order sorts like FIDs.
func (f FID) Put(b []byte) {
	binary.BigEndian.PutUint64(b[0:8], f.Seq)
	binary.BigEndian.PutUint32(b[8:12], f.Oid)
	binary.BigEndian.PutUint32(b[12:16], f.Ver)
}

// Bytes returns the binary form of f.
func (f FID) Bytes() []byte {
	b := make([]byte, Size)
	f.Put(b)
	return b
}

// FromBytes decodes the binary form; it fails on a short slice.
func FromBytes(b []byte) (FID, error) {
	if len(b) < Size {
		return FID{}, fmt.Errorf("FID: %d bytes, want %d", len(b), Size)
	}
	return FID{
		Seq: binary.BigEndian.Uint64(b[0:8]),
		Oid: binary.BigEndian.Uint32(b[8:12]),
		Ver: binary.BigEndian.Uint32(b[12:16]),
	}, nil
}

// PB converts f to its protobuf form.
func (f FID) PB() *nacrepb.FID { return &nacrepb.FID{Seq: f.Seq, Oid: f.Oid, Ver: f.Ver} }

// FromPB converts a protobuf FID; nil gives the zero FID.
func FromPB(p *nacrepb.FID) FID {
	if p == nil {
		return FID{}
	}
	return FID{Seq: p.Seq, Oid: p.Oid, Ver: p.Ver}
}

// ObjID names an OST object within one OST.
type ObjID struct {
	Seq uint64
	Oid uint64
}

func (o ObjID) String() string { return fmt.Sprintf("0x%x:0x%x", o.Seq, o.Oid) }

// MDTOf looks f up in the FLD (the MGS's sequence ranges): the MDT that
// holds it. The root and .nacre (sequences below SeqNormal) are MDT0's;
// ok is false for a sequence no range covers.
func MDTOf(fld []*nacrepb.SeqRange, f FID) (mdt uint32, ok bool) {
	if f.Seq < SeqNormal {
		return 0, true
	}
	for _, r := range fld {
		if f.Seq >= r.Start && f.Seq < r.End {
			return r.Mdt, true
		}
	}
	return 0, false
}
