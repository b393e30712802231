package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"

	"nacre/test/wait"
)

func TestThreeReplicasElectReplicateAndRedirect(t *testing.T) {
	allTransports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, nil)
		l := c.leader()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()

		var wg sync.WaitGroup
		var last uint64
		var mu sync.Mutex
		for w := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 25 {
					v, err := l.g.Propose(ctx, fmt.Appendf(nil, "w%d-%d", w, i))
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					last = max(last, v.(applyResult).Index)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		c.waitApplied(last)
		if n := len(c.sameCommands()); n != 100 {
			t.Fatalf("replicas applied %d commands, want 100", n)
		}

		for _, f := range c.followers() {
			_, err := f.g.Propose(ctx, []byte("on a follower"))
			var nl NotLeaderError
			var pnl *NotLeaderError
			if !errors.As(err, &nl) || !errors.As(err, &pnl) || !errors.Is(err, ErrNotLeader) {
				t.Fatalf("Propose on follower %d: %v, want NotLeaderError", f.id, err)
			}
			if nl.Leader != l.id || nl.Addr != l.addr || *pnl != nl {
				t.Fatalf("follower %d redirects to %d at %q, want %d at %q", f.id, nl.Leader, nl.Addr, l.id, l.addr)
			}
		}

		// The leader hears every replica's acknowledgement soon after.
		wait.NoErr(t, 5*time.Second, "the leader to hear every replica's acknowledgement", func() error {
			st := l.g.Status()
			if st.State != "leader" || len(st.Progress) != 3 || len(st.Voters) != 3 {
				t.Fatalf("leader status %+v", st)
			}
			for id, pr := range st.Progress {
				if pr.Match < last || pr.State != "replicate" {
					return fmt.Errorf("leader sees replica %d at match %d (%s), want >= %d", id, pr.Match, pr.State, last)
				}
			}
			return nil
		})
	})
}

func TestLeaderStopsNewLeaderTakesOverAndOldOneCatchesUp(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i := range 20 {
			if _, err := c.propose(ctx, fmt.Sprintf("a%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		old := c.leader()
		oldTerm := old.g.Term()
		c.stop(old.id)

		start := time.Now()
		nl := c.leader()
		t.Logf("new leader %d elected %v after the old one stopped", nl.id, time.Since(start))
		if nl.id == old.id || nl.g.Term() <= oldTerm {
			t.Fatalf("leader %d term %d after stopping %d (term %d)", nl.id, nl.g.Term(), old.id, oldTerm)
		}
		last := c.proposeMany(ctx, "b", 20)

		c.start(old.id, false)
		c.waitApplied(last)
		if n := len(c.sameCommands()); n != 40 {
			t.Fatalf("replicas applied %d commands, want 40", n)
		}
	})
}

func TestReadIndexOnFollowerSeesAcknowledgedWrites(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		f := c.followers()[0]
		// Hold the follower's applies so that it lags behind the leader's
		// commit index: ReadIndex must wait for them.
		release := make(chan struct{})
		var once sync.Once
		defer once.Do(func() { close(release) })
		f.sm.setHook(func([]Entry) error {
			<-release
			return nil
		})
		last := c.proposeMany(ctx, "x", 10)
		done := make(chan error, 1)
		go func() { done <- f.g.ReadIndex(ctx) }()
		select {
		case err := <-done:
			t.Fatalf("ReadIndex returned (%v) while the follower had applied %d of %d", err, f.g.AppliedIndex(), last)
		case <-time.After(100 * time.Millisecond):
		}
		once.Do(func() { close(release) })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := f.g.AppliedIndex(); got < last {
			t.Fatalf("ReadIndex returned at applied %d, before the acknowledged write at %d", got, last)
		}
		f.sm.setHook(nil)
	})
}

// TestPartitionedLeaderFailsPendingProposalsFast cuts the leader off: a
// proposal waiting on it must fail with ErrProposalDropped once it steps
// down (CheckQuorum), and the others elect a new leader.
func TestPartitionedLeaderFailsPendingProposalsFast(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.propose(ctx, "before"); err != nil {
			t.Fatal(err)
		}
		l := c.leader()
		cut := func(group uint64, to Peer, m *pb.Message) bool { return false }
		l.tr.SetFilter(cut)
		for _, f := range c.followers() {
			lid := l.id
			f.tr.SetFilter(func(group uint64, to Peer, m *pb.Message) bool { return to.ID != lid })
		}
		start := time.Now()
		_, err := l.g.Propose(ctx, []byte("lost"))
		if !errors.Is(err, ErrProposalDropped) {
			t.Fatalf("Propose on a cut-off leader: %v, want ErrProposalDropped", err)
		}
		t.Logf("cut-off leader failed the pending proposal after %v", time.Since(start))

		// The majority side elects a leader and takes writes.
		var nl *node
		wait.For(t, 10*time.Second, "the majority side to elect a leader", func() bool {
			for _, f := range c.nodes {
				if f.id != l.id && f.g.IsLeader() {
					nl = f
				}
			}
			return nl != nil
		})
		if _, err := nl.g.Propose(ctx, []byte("majority")); err != nil {
			t.Fatal(err)
		}
		// Heal: the old leader rejoins as a follower and catches up.
		for _, nd := range c.nodes {
			nd.tr.SetFilter(nil)
		}
		r, err := c.propose(ctx, "healed")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		c.sameCommands()
	})
}

func TestLaggingReplicaCatchesUpBySnapshot(t *testing.T) {
	allTransports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, func(cfg *Config) { cfg.KeepEntries = 10 })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.propose(ctx, "first"); err != nil {
			t.Fatal(err)
		}
		lag := c.followers()[0]
		c.stop(lag.id)
		last := c.proposeMany(ctx, "p", 200)
		if st := c.leader().g.Status(); st.FirstIndex <= 2 {
			t.Fatalf("leader log starts at %d; compaction did not run", st.FirstIndex)
		}
		c.start(lag.id, false)
		c.waitApplied(last)
		if n := len(c.sameCommands()); n != 201 {
			t.Fatalf("replicas applied %d commands, want 201", n)
		}
		if st := lag.g.Status(); st.Stats.SnapshotsRecv == 0 || st.FirstIndex <= 2 {
			t.Fatalf("the lagging replica caught up without a snapshot (log [%d, %d], %d snapshots; leader's log starts at %d)",
				st.FirstIndex, st.LastIndex, st.Stats.SnapshotsRecv, c.leader().g.Status().FirstIndex)
		}
		// It keeps following the log after the snapshot.
		r, err := c.propose(ctx, "after")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		c.sameCommands()
	})
}

func TestAddVoterThenRemoveTheOldLeader(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, func(cfg *Config) { cfg.KeepEntries = 10 })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for i := range 50 {
			if _, err := c.propose(ctx, fmt.Sprintf("p%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		nd := c.addNode(4)
		c.start(4, true)
		l := c.leader()
		if err := l.g.AddVoter(ctx, 4, nd.addr); err != nil {
			t.Fatal(err)
		}
		r, err := c.propose(ctx, "with four")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		c.sameCommands()
		if st := l.g.Status(); len(st.Voters) != 4 {
			t.Fatalf("voters after AddVoter: %v", st.Voters)
		}

		// Remove the leader itself: it steps down, the others carry on.
		if err := l.g.RemovePeer(ctx, l.id); err != nil {
			t.Fatal(err)
		}
		c.stop(l.id)
		delete(c.nodes, l.id)
		r, err = c.propose(ctx, "without the old leader")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		if n := len(c.sameCommands()); n != 52 {
			t.Fatalf("replicas applied %d commands, want 52", n)
		}
		if st := c.leader().g.Status(); len(st.Voters) != 3 {
			t.Fatalf("voters after RemovePeer: %v", st.Voters)
		}
		// Its id is never given out again, by any replica that leads
		// next, also after a restart.
		nl := c.leader()
		if err := nl.g.AddVoter(ctx, l.id, "127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), "never reused") {
			t.Fatalf("adding removed replica %d again: %v, want a refusal", l.id, err)
		}
		for id := range c.nodes {
			if !c.nodes[id].g.wasRemoved(l.id) {
				t.Errorf("replica %d does not know that %d was removed", id, l.id)
			}
		}
		c.stop(nl.id)
		c.start(nl.id, false)
		if !c.nodes[nl.id].g.wasRemoved(l.id) {
			t.Errorf("after a restart, replica %d forgot that %d was removed", nl.id, l.id)
		}

		// A replica that joins after the removal has left the log learns
		// it from the snapshot it starts from.
		for i := range 30 {
			if _, err := c.propose(ctx, fmt.Sprintf("q%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		nd = c.addNode(5)
		c.start(5, true)
		if err := c.leader().g.AddVoter(ctx, 5, nd.addr); err != nil {
			t.Fatal(err)
		}
		r, err = c.propose(ctx, "with the new one")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		if st := nd.g.Status(); st.Stats.SnapshotsRecv == 0 {
			t.Fatalf("replica 5 joined without a snapshot (log [%d, %d])", st.FirstIndex, st.LastIndex)
		}
		if !nd.g.wasRemoved(l.id) {
			t.Errorf("replica 5, which joined from a snapshot, does not know that %d was removed", l.id)
		}
		c.stop(5)
		c.start(5, false)
		if !c.nodes[5].g.wasRemoved(l.id) {
			t.Errorf("after a restart, replica 5 forgot that %d was removed", l.id)
		}
	})
}

// TestGrownGroupRestartsWithItsCurrentConfiguration grows a single replica
// to three, then restarts the first one: its truncation point still says
// it is alone, and only the re-delivered log says otherwise. It must not
// lead alone, and Start must not wait for it to.
func TestGrownGroupRestartsWithItsCurrentConfiguration(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 1, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for id := uint64(2); id <= 3; id++ {
			nd := c.addNode(id)
			c.start(id, true)
			if err := c.nodes[1].g.AddVoter(ctx, id, nd.addr); err != nil {
				t.Fatal(err)
			}
		}
		r, err := c.propose(ctx, "three")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		c.stop(2)
		c.stop(3)
		c.stop(1)

		start := time.Now()
		nd := c.start(1, false)
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("Start took %v", took)
		}
		time.Sleep(300 * time.Millisecond) // several election timeouts
		if nd.g.IsLeader() {
			t.Fatal("replica 1 leads alone although the group has three voters")
		}
		if st := nd.g.Status(); len(st.Voters) != 3 {
			t.Fatalf("restarted replica sees voters %v", st.Voters)
		}
		c.start(2, false)
		r, err = c.propose(ctx, "two of three")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
	})
}

// TestReplicaDownWhileAnotherJoinedFollowsItAsLeader: replica 3 is down
// while replica 4 joins, and 4 leads when 3 comes back. 3's address book
// does not name 4; it learns 4's address from 4's messages, answers, and
// catches up (here by snapshot: the log it missed is gone).
func TestReplicaDownWhileAnotherJoinedFollowsItAsLeader(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, func(cfg *Config) { cfg.KeepEntries = 10 })
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := c.propose(ctx, "first"); err != nil {
			t.Fatal(err)
		}
		c.stop(3)
		if c.leader().id == 3 {
			t.Fatal("a stopped replica leads")
		}
		nd := c.addNode(4)
		c.start(4, true)
		if err := c.leader().g.AddVoter(ctx, 4, nd.addr); err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			if _, err := c.propose(ctx, fmt.Sprintf("p%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.leader().g.TransferLeadership(ctx, 4); err != nil {
			t.Fatal(err)
		}
		if l := c.leader(); l.id != 4 {
			t.Fatalf("replica %d leads after the transfer to 4", l.id)
		}
		c.start(3, false)
		r, err := c.propose(ctx, "with 3 back")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		if n := len(c.sameCommands()); n != 42 {
			t.Fatalf("replicas applied %d commands, want 42", n)
		}
		if a := c.nodes[3].g.peerAddr(4); a != nd.addr {
			t.Fatalf("replica 3 has address %q for replica 4, want %q", a, nd.addr)
		}
	})
}
