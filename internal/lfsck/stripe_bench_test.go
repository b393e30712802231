package lfsck

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// A file's record as the MDT stores it, with n stripes on OSTs 0..n-1.
func benchRecord(b testing.TB, n int, oid uint64) []byte {
	ino := &pb.Inode{Fid: fid.FID{Seq: fid.SeqNormal, Oid: 1234, Ver: 0}.PB(), Mode: 0o100644, Uid: 1000, Gid: 1000, Nlink: 1,
		MtimeNs: 1764000000000000000, CtimeNs: 1764000000000000000, AtimeNs: 1764000000000000000,
		Links:  []*pb.LinkEntry{{Parent: fid.FID{Seq: fid.SeqNormal, Oid: 7}.PB(), Name: []byte("file.000123")}},
		Layout: &pb.Layout{Pattern: 1, StripeSize: 1 << 20, Generation: 1}}
	for i := range n {
		ino.Layout.Objects = append(ino.Layout.Objects, &pb.StripeObject{Ost: uint32(i), Seq: fid.OSTSeq(0), Oid: oid})
	}
	v, err := proto.Marshal(ino)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// The scan's per-file decoding, for files of 2 and 8 stripes: the
// difference over 6 is the cost of a stripe.
func BenchmarkDecodeStripes(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			recs := make([][]byte, 1024)
			for i := range recs {
				recs[i] = benchRecord(b, n, uint64(100000+i))
			}
			o := object{ostSeq: newSeqField(fid.OSTSeq(0))}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := o.decodeSome(recs[i%len(recs)], true); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The layout check's per-stripe work in phase 1 besides decoding
// (layoutCheck.file: the reference bitmap, the digest and the table of
// expectations), for files of 2 and 8 stripes: the difference over 6 is
// the cost of a stripe.
func BenchmarkRecordStripes(b *testing.B) {
	for _, n := range []int{2, 8} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var ly *layoutCheck
			var o object
			const files = 200000
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				oid := uint64(1 + i%files)
				if oid == 1 {
					b.StopTimer()
					ly = bareLayout(fid.OSTSeq(0))
					o = object{ostSeq: newSeqField(ly.r.seq)}
					if err := o.decodeSome(benchRecord(b, n, 0), true); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				for j := range o.layout.objs {
					o.layout.objs[j].oid = oid
				}
				ly.file(&scanned{local: oid, o: &o})
			}
			b.StopTimer()
			if got, want := ly.r.led.t1[Layout][tStat+sStripes], uint64(n*(1+(b.N-1)%files)); got != want || ly.q.inflight != 0 {
				b.Fatalf("recorded %d stripes, want %d (checks queued: %d)", got, want, ly.q.inflight)
			}
		})
	}
}
