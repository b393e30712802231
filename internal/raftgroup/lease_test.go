package raftgroup

import (
	"context"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"nacre/test/wait"
)

func waitLease(t *testing.T, g *Group) {
	t.Helper()
	wait.For(t, 5*time.Second, "the leader to get a lease", g.HasLease)
}

func TestLeaderServesReadsUnderItsLeaseWithoutAHeartbeatRound(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r, err := c.propose(ctx, "x")
		if err != nil {
			t.Fatal(err)
		}
		l := c.leader()
		waitLease(t, l.g)
		before := l.g.LeaseReads()
		for range 100 {
			if err := l.g.Read(ctx); err != nil {
				t.Fatal(err)
			}
			if l.g.AppliedIndex() < r.Index {
				t.Fatalf("read under the lease at applied %d, before the acknowledged write %d", l.g.AppliedIndex(), r.Index)
			}
		}
		if n := l.g.LeaseReads() - before; n < 50 {
			t.Fatalf("only %d of 100 reads were served under the lease", n)
		}
		// Followers read with ReadIndex.
		for _, f := range c.followers() {
			if f.g.HasLease() {
				t.Fatalf("follower %d claims a lease", f.id)
			}
			if err := f.g.Read(ctx); err != nil {
				t.Fatal(err)
			}
			if f.g.AppliedIndex() < r.Index {
				t.Fatalf("follower read at %d before write %d", f.g.AppliedIndex(), r.Index)
			}
		}
	})
}

// TestCutOffLeaderLosesItsLeaseBeforeAnotherIsElected: the safety
// argument of lease.go, measured.
func TestCutOffLeaderLosesItsLeaseBeforeAnotherIsElected(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.propose(ctx, "before"); err != nil {
			t.Fatal(err)
		}
		l := c.leader()
		waitLease(t, l.g)
		l.tr.SetFilter(func(uint64, Peer, *pb.Message) bool { return false })
		lid := l.id
		for _, f := range c.followers() {
			f.tr.SetFilter(func(_ uint64, to Peer, _ *pb.Message) bool { return to.ID != lid })
		}
		cut := time.Now()
		var leaseEnd, elected time.Time
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && (leaseEnd.IsZero() || elected.IsZero()) {
			now := time.Now()
			if leaseEnd.IsZero() && !l.g.HasLease() {
				leaseEnd = now
			}
			if elected.IsZero() {
				for _, f := range c.nodes {
					if f.id != lid && f.g.IsLeader() {
						elected = now
					}
				}
			}
			// Each millisecond, not wait's backoff: the order of the
			// two events is what the test measures.
			time.Sleep(time.Millisecond)
		}
		if leaseEnd.IsZero() || elected.IsZero() {
			t.Fatalf("lease ended: %v, new leader: %v", !leaseEnd.IsZero(), !elected.IsZero())
		}
		t.Logf("lease ended %v after the cut, new leader %v after it", leaseEnd.Sub(cut), elected.Sub(cut))
		if !leaseEnd.Before(elected) {
			t.Fatalf("the old leader held its lease until %v, after the new leader was elected at %v", leaseEnd.Sub(cut), elected.Sub(cut))
		}
		for _, nd := range c.nodes {
			nd.tr.SetFilter(nil)
		}
	})
}

func TestTransferLeadershipHandsOverAndEndsTheLease(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.propose(ctx, "x"); err != nil {
			t.Fatal(err)
		}
		l := c.leader()
		waitLease(t, l.g)
		to := c.followers()[0].id
		if err := l.g.TransferLeadership(ctx, to); err != nil {
			t.Fatal(err)
		}
		if l.g.HasLease() || l.g.IsLeader() {
			t.Fatal("the old leader still leads or holds its lease")
		}
		if got := c.nodes[to].g.Leader(); got != to {
			t.Fatalf("leader is %d, want %d", got, to)
		}
		// And back, to the most up-to-date voter (to = 0).
		if err := c.nodes[to].g.TransferLeadership(ctx, 0); err != nil {
			t.Fatal(err)
		}
		r, err := c.propose(ctx, "after")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		c.sameCommands()
	})
}

func TestAddReplicaPromotesTheLearnerOnceItCaughtUp(t *testing.T) {
	inMem(t, func(t *testing.T) {
		c := newCluster(t, "mem", 3, func(cfg *Config) { cfg.KeepEntries = 10 })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i := range 50 {
			if _, err := c.propose(ctx, string(rune('a'+i%26))); err != nil {
				t.Fatal(err)
			}
		}
		nd := c.addNode(4)
		c.start(4, true)
		l := c.leader()
		if err := l.g.AddReplica(ctx, 4, nd.addr, false); err != nil {
			t.Fatal(err)
		}
		st := l.g.Status()
		if len(st.Voters) != 4 || len(st.Learners) != 0 {
			t.Fatalf("voters %v learners %v, want 4 voters", st.Voters, st.Learners)
		}
		if nd.g.Stats().SnapshotsRecv == 0 {
			t.Fatal("the new replica caught up without a snapshot")
		}
		if nd.g.Replicated() != true || l.g.Replicated() != true {
			t.Fatal("Replicated() is false in a four-replica group")
		}
		r, err := c.propose(ctx, "after")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		c.sameCommands()
	})
}
