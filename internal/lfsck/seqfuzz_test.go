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
