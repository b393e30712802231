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
		check(t, seq, v)
		// The same bytes with the sequence field spliced in at every place.
		enc := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), seq)
		for i := 0; i <= len(v) && i <= 4; i++ {
			w := append(append(append([]byte{}, v[:i]...), enc...), v[i:]...)
			check(t, seq, w)
		}
	})
}

func check(t *testing.T, seq uint64, v []byte) {
	sf := newSeqField(seq)
	s, ok := sf.stripe(v)
	if !ok {
		return
	}
	want, err := decodeStripe(v)
	if err != nil || s != want {
		t.Fatalf("seq %#x stripe % x: fast %+v, generic %+v (%v)", seq, v, s, want, err)
	}
	// and the same through a layout
	var o object
	o.ostSeq = sf
	if len(v) < 0x80 {
		b := append([]byte{6<<3 | 2, byte(len(v))}, v...)
		if err := o.decodeLayout(b); err != nil || len(o.layout.objs) != 1 || o.layout.objs[0] != want {
			t.Fatalf("layout: %v %+v", err, o.layout.objs)
		}
	}
}
