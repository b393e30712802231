package lfsck

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// FuzzSeqFieldStripe: whenever seqField.stripe takes a stripe, it reads
// what decodeStripe reads.
func FuzzSeqFieldStripe(f *testing.F) {
	for _, seq := range []uint64{fid.OSTSeq(0), fid.OSTSeq(3), 1, 0, 1 << 62, 1<<64 - 1, 127, 128} {
		for _, o := range []uint32{0, 5, 200} {
			for _, oid := range []uint64{0, 1, 300, 1 << 63} {
				v, _ := proto.Marshal(&pb.StripeObject{Ost: o, Seq: seq, Oid: oid})
				f.Add(seq, v)
			}
		}
	}
	f.Fuzz(func(t *testing.T, seq uint64, v []byte) {
		sf := newSeqField(seq)
		checkSeqStripe(t, &sf, v)
		// The same bytes with the sequence field spliced in at every place.
		enc := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), seq)
		for i := 0; i <= len(v) && i <= 4; i++ {
			w := append(append(append([]byte{}, v[:i]...), enc...), v[i:]...)
			checkSeqStripe(t, &sf, w)
		}
	})
}

// FuzzDecodeLayoutQuick: a layout holding one stripe decodes to what the
// generic decodeStripe reads, and fails where it fails, whether the
// stripe takes decodeLayout's inline path, seqField.stripe or the
// generic reader.
func FuzzDecodeLayoutQuick(f *testing.F) {
	for _, seq := range []uint64{fid.OSTSeq(0), fid.OSTSeq(3), 1, 1<<64 - 1} {
		for _, o := range []uint32{0, 1, 127, 128} {
			for _, oid := range []uint64{0, 1, 127, 128, 300, 1<<14 - 1, 1 << 14, 1<<21 - 1, 1 << 21, 1 << 40} {
				v, _ := proto.Marshal(&pb.StripeObject{Ost: o, Seq: seq, Oid: oid})
				f.Add(seq, v)
			}
		}
		enc := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), seq)
		// Not the shortest encodings: an explicit OST 0, an id with a
		// trailing zero byte.
		f.Add(seq, append(append([]byte{1 << 3, 0}, enc...), 3<<3, 5))
		f.Add(seq, append(append([]byte{1 << 3, 7}, enc...), 3<<3, 0x85, 0))
		f.Add(seq, append(append([]byte{1 << 3, 7}, enc...), 3<<3, 0x85, 0x80, 0))
		// Broken ones: an id cut short after 1 and 2 bytes, an OST index
		// of two bytes whose second is the sequence field's tag.
		f.Add(seq, append(append([]byte{1 << 3, 7}, enc...), 3<<3, 0x85))
		f.Add(seq, append(append([]byte{1 << 3, 7}, enc...), 3<<3, 0x85, 0x85))
		f.Add(seq, append(append([]byte{1 << 3, 0x85}, enc...), 3<<3, 5))
	}
	f.Fuzz(func(t *testing.T, seq uint64, v []byte) {
		if len(v) >= 0x80 {
			return
		}
		want, wantErr := decodeStripe(v)
		o := object{ostSeq: newSeqField(seq)}
		err := o.decodeLayout(append([]byte{6<<3 | 2, byte(len(v))}, v...))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("seq %#x stripe % x: decodeLayout error %v, decodeStripe error %v", seq, v, err, wantErr)
		}
		if err == nil && (len(o.layout.objs) != 1 || o.layout.objs[0] != want) {
			t.Fatalf("seq %#x stripe % x: decodeLayout %+v, decodeStripe %+v", seq, v, o.layout.objs, want)
		}
	})
}
