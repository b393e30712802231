package raftgroup

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"nacre/internal/kv"
)

// BenchmarkProposeSingle measures a single-replica group on the real disk:
// b.N small proposals (64 bytes) from the given number of concurrent
// proposers, each waiting for its result before proposing again. It
// reports proposals/s, the mean latency seen by a proposer, and how many
// entries one fsync made durable on average.
//
//	go test -run XXX -bench ProposeSingle -benchtime 20000x ./internal/raftgroup
func BenchmarkProposeSingle(b *testing.B) {
	for _, proposers := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("proposers=%d", proposers), func(b *testing.B) {
			db, err := kv.Open(b.TempDir(), kv.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			g, _ := openSingle(b, db, nil)
			defer g.Stop()
			benchPropose(b, g, proposers)
		})
	}
}

// BenchmarkProposeThree is BenchmarkProposeSingle on the leader of three
// replicas in this process, over gRPC on loopback, each with its own store
// on the real disk: the three share one disk and two cores, a harsher
// setting than three machines. entries/sync is the leader's.
//
// path=fast sends messages over the fast path (fast.go), path=stream over
// the gRPC stream; compare them with -count and benchstat.
func BenchmarkProposeThree(b *testing.B) {
	for _, path := range []string{"fast", "stream"} {
		for _, proposers := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("path=%s/proposers=%d", path, proposers), func(b *testing.B) {
				kind := "grpc-disk"
				if path == "stream" {
					kind = "grpc-stream-disk"
				}
				c := newCluster(b, kind, 3, func(cfg *Config) {
					cfg.TickInterval = 50 * time.Millisecond
					cfg.ElectionTicks = 10
				})
				benchPropose(b, c.leader().g, proposers)
			})
		}
	}
}

func benchPropose(b *testing.B, g *Group, proposers int) {
	payload := make([]byte, 64)
	ctx := context.Background()
	before := g.Stats()
	var next, latency atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range proposers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := g.Propose(ctx, payload); err != nil {
					b.Error(err)
					return
				}
				latency.Add(int64(time.Since(t0)))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	after := g.Stats()
	syncs := after.Syncs - before.Syncs
	ents := after.SyncedEntries - before.SyncedEntries
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "props/s")
	b.ReportMetric(float64(latency.Load())/float64(b.N)/1e3, "µs/prop")
	if syncs > 0 {
		b.ReportMetric(float64(ents)/float64(syncs), "entries/sync")
	}
	b.ReportMetric(0, "ns/op")
}
