package mds

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
	"nacre/internal/obs"
	"nacre/internal/raftgroup"
	"nacre/internal/target"
)

// BenchmarkCreatePipeline measures the MDT's create path without the
// network: commands proposed to a single-replica Raft group on the real
// disk and applied by the state machine, from 1 and 8 proposers. It
// reports creates/s and the CPU time per create of the whole process.
//
//	go test -run XXX -bench CreatePipeline -benchtime 20000x ./internal/mds
func BenchmarkCreatePipeline(b *testing.B) {
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("proposers=%d", n), func(b *testing.B) {
			db, err := kv.Open(b.TempDir(), kv.Options{CacheSize: 256 << 20, MemTableSize: 64 << 20})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			t, err := mdt.Open(db, target.Identity{Fsname: "b", Kind: target.MDT}, obs.Discard())
			if err != nil {
				b.Fatal(err)
			}
			g, err := raftgroup.Start(raftgroup.Config{GroupID: 1, ID: 1, Peers: []raftgroup.Peer{{ID: 1}}, DB: db, Prefix: mdt.RaftPrefix, SM: &smAdapter{t: t, s: &Server{}}, Log: obs.Discard()})
			if err != nil {
				b.Fatal(err)
			}
			defer g.Stop()
			ctx := context.Background()
			prop := func(cmd *pb.Command) *pb.Reply {
				cmd.NowNs = time.Now().UnixNano()
				data, _ := proto.Marshal(cmd)
				r, err := g.Propose(ctx, data)
				if err != nil {
					b.Fatal(err)
				}
				return r.(*pb.Reply)
			}
			prop(&pb.Command{Op: &pb.Command_SeqGrant{SeqGrant: &pb.SeqGrantOp{Start: fid.SeqNormal, End: fid.SeqNormal + 64}}})
			prop(&pb.Command{Op: &pb.Command_PoolReset{PoolReset: &pb.PoolResetOp{Ost: 0, Seq: fid.OSTSeq(0), Start: 1}}})
			prop(&pb.Command{Op: &pb.Command_PoolExtend{PoolExtend: &pb.PoolExtendOp{Ost: 0, Seq: fid.OSTSeq(0), End: uint64(b.N) + 10}}})
			dirs := make([]*pb.FID, n)
			for i := range dirs {
				dirs[i] = prop(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte(fmt.Sprint("w", i)), Mode: syscall.S_IFDIR | 0o755}}}).Inode.Fid
			}
			var next atomic.Int64
			var wg sync.WaitGroup
			cpu0 := cpuTime()
			b.ResetTimer()
			start := time.Now()
			for w := 0; w < n; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						r := prop(&pb.Command{ClientId: uint64(w + 1), RequestId: uint64(i), AckedBelow: uint64(i), Cred: &pb.Cred{},
							Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: dirs[w], Name: []byte(fmt.Sprint("f", i)), Mode: 0o644, Exclusive: true, Osts: []uint32{0}}}})
						if r.Errno != 0 {
							b.Error(r.Message)
							return
						}
					}
				}(w)
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/el.Seconds(), "creates/s")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/create")
			b.ReportMetric(g.Stats().EntriesPerSync(), "entries/sync")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
