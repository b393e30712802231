package raftgroup

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// The leader holds back the empty appends that only spread the commit
// index (holdCommitOnly) and sends them along with the next message to
// that follower, such as the heartbeat of the next tick. With the
// heartbeats themselves dropped, the followers learn that a lone entry
// committed only from the held append: they must apply it within a few
// ticks, not never.
func TestHeldCommitIndexReachesFollowersAtTheNextTick(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, func(c *Config) {
			c.TickInterval = 20 * time.Millisecond
			c.ElectionTicks = 25 // no election while heartbeats are dropped
		})
		l := c.leader()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		last := c.proposeMany(ctx, "warm", 5) // the followers reach StateReplicate
		c.waitApplied(last)

		for round := range 3 {
			l.tr.SetFilter(func(_ uint64, _ Peer, m *pb.Message) bool { return m.GetType() != pb.MsgHeartbeat })
			v, err := l.g.Propose(ctx, fmt.Appendf(nil, "lone-%d", round))
			if err != nil {
				t.Fatal(err)
			}
			idx := v.(applyResult).Index
			wctx, wcancel := context.WithTimeout(ctx, 300*time.Millisecond)
			for _, f := range c.followers() {
				if err := f.g.WaitApplied(wctx, idx); err != nil {
					t.Fatalf("round %d: follower %d applied %d, not %d, 300 ms after the commit with heartbeats dropped: %v",
						round, f.id, f.g.AppliedIndex(), idx, err)
				}
			}
			wcancel()
			l.tr.SetFilter(nil)
			// Heartbeats flow again for a couple of ticks: each round
			// starts from a group in its steady state.
			time.Sleep(50 * time.Millisecond)
		}
		c.sameCommands()
	})
}
