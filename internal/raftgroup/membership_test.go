package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"nacre/api/nacregrpc"
	"nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/grpcx"
	"nacre/internal/kv"
	"nacre/test/wait"
)

// TestAddReplicaRefusesAMemberAtAnotherAddress: adding an id that is
// already a voter, at another address, used to succeed and only change
// the leader's address for it, which cut that replica off. It is refused
// and the address book is left alone; at its own address the call stays
// a no-op (a retry), and a voter is not turned into a learner.
func TestAddReplicaRefusesAMemberAtAnotherAddress(t *testing.T) {
	inMem(t, func(t *testing.T) {
		c, ctx := committedCluster(t)
		l := c.leader()
		f := c.followers()[0]
		err := l.g.AddReplica(ctx, f.id, "mem-elsewhere", false)
		if !errors.Is(err, ErrAlreadyMember) {
			t.Fatalf("AddReplica of voter %d at another address: %v, want ErrAlreadyMember", f.id, err)
		}
		for _, want := range []string{"is already a voter of raft group 1 at " + f.addr, "nacre replica replace"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not say %q", err, want)
			}
		}
		if a := l.g.peerAddr(f.id); a != f.addr {
			t.Fatalf("the refused add changed replica %d's address to %q", f.id, a)
		}
		if err := l.g.AddReplica(ctx, f.id, f.addr, false); err != nil {
			t.Fatalf("AddReplica of a voter at its own address (a retry): %v", err)
		}
		if err := l.g.AddReplica(ctx, f.id, f.addr, true); !errors.Is(err, ErrAlreadyMember) {
			t.Fatalf("AddReplica(learnerOnly) of a voter: %v, want ErrAlreadyMember", err)
		}
		// The group still commits with that replica.
		r, err := c.propose(ctx, "y")
		if err != nil {
			t.Fatal(err)
		}
		c.waitApplied(r.Index)
		c.sameCommands()
	})
}

// TestAddReplicaLearnerAtItsAddressIsPromoted: a learner re-added at its
// own address is promoted (how a --learner replica becomes a voter, and
// what a retry after a lost leadership relies on); at another address it
// is refused.
func TestAddReplicaLearnerAtItsAddressIsPromoted(t *testing.T) {
	inMem(t, func(t *testing.T) {
		c, ctx := committedCluster(t)
		nd := c.addNode(4)
		c.start(4, true)
		l := c.leader()
		if err := l.g.AddReplica(ctx, 4, nd.addr, true); err != nil {
			t.Fatal(err)
		}
		if err := l.g.AddReplica(ctx, 4, nd.addr, true); err != nil {
			t.Fatalf("AddReplica(learnerOnly) of a learner at its own address: %v", err)
		}
		err := l.g.AddReplica(ctx, 4, "mem-elsewhere", false)
		if !errors.Is(err, ErrAlreadyMember) || !strings.Contains(err.Error(), "replica 4 is already a learner of raft group 1 at "+nd.addr) {
			t.Fatalf("AddReplica of a learner at another address: %v, want ErrAlreadyMember naming its address", err)
		}
		if st := l.g.Status(); len(st.Learners) != 1 || st.Learners[0] != 4 {
			t.Fatalf("learners %v, want [4]", st.Learners)
		}
		if err := l.g.AddReplica(ctx, 4, nd.addr, false); err != nil {
			t.Fatalf("promoting learner 4: %v", err)
		}
		if st := l.g.Status(); len(st.Voters) != 4 || len(st.Learners) != 0 {
			t.Fatalf("voters %v learners %v, want 4 voters", st.Voters, st.Learners)
		}
	})
}

// TestAdminRefusesUnknownReplicas drives the RaftAdmin service over gRPC,
// as `nacre replica` does: removing or handing leadership to a replica
// that is not in the group is refused at once with the members, a
// transfer to a learner is refused, and an add of a member at another
// address is refused with the fix.
func TestAdminRefusesUnknownReplicas(t *testing.T) {
	c := newCluster(t, "grpc", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.propose(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	l := c.leader()
	cc, err := grpcx.Dial(l.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	admin := nacregrpc.NewRaftAdminClient(cc)
	refused := func(what string, err error, code errno.Code, want ...string) {
		t.Helper()
		if errno.CodeOf(err) != code {
			t.Fatalf("%s: %v, want code %s", what, err, code)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", what, err.Error(), w)
			}
		}
	}

	_, err = admin.RemoveReplica(ctx, &nacrepb.RaftRemoveRequest{Id: 9})
	refused("remove replica 9", err, errno.NotFound, "no replica 9 in raft group 1 (replicas 1, 2, 3)")

	start := time.Now()
	_, err = admin.TransferLeader(ctx, &nacrepb.RaftTransferRequest{To: 9})
	refused("transfer to replica 9", err, errno.NotFound, "no replica 9 in raft group 1 (replicas 1, 2, 3)")
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the refused transfer took %v", took)
	}

	f := c.followers()[0]
	_, err = admin.AddReplica(ctx, &nacrepb.RaftAddRequest{Id: f.id, Addr: "127.0.0.1:5"})
	refused("add a voter at another address", err, errno.AlreadyExists, "is already a voter of raft group 1 at "+f.addr, "nacre replica replace")

	// A transfer to the leader itself is done already.
	r, err := admin.TransferLeader(ctx, &nacrepb.RaftTransferRequest{To: l.id})
	if err != nil || r.Leader != l.id {
		t.Fatalf("transfer to the leader itself: %v, %v", r, err)
	}

	nd := c.addNode(4)
	c.start(4, true)
	if _, err := admin.AddReplica(ctx, &nacrepb.RaftAddRequest{Id: 4, Addr: nd.addr, Learner: true}); err != nil {
		t.Fatal(err)
	}
	_, err = admin.TransferLeader(ctx, &nacrepb.RaftTransferRequest{To: 4})
	refused("transfer to learner 4", err, errno.FailedPrecondition, "replica 4 is a learner of raft group 1", "promote it")
	_, err = admin.RemoveReplica(ctx, &nacrepb.RaftRemoveRequest{Id: 9})
	refused("remove replica 9", err, errno.NotFound, "(replicas 1, 2, 3, 4 (learner))")

	// And the members that exist still go.
	if _, err := admin.RemoveReplica(ctx, &nacrepb.RaftRemoveRequest{Id: 4}); err != nil {
		t.Fatalf("remove learner 4: %v", err)
	}
	if st := l.g.Status(); len(st.Learners) != 0 || len(st.Voters) != 3 {
		t.Fatalf("after removing 4: voters %v learners %v", st.Voters, st.Learners)
	}
}

// TestSoloAdminNamesTheTarget: a single replica's refusals name the
// group as Config.Name says (the MGS, an MDT), else by its number.
func TestSoloAdminNamesTheTarget(t *testing.T) {
	for name, want := range map[string]string{"MGS": "MGS replica 1: ", "MDT000a": "MDT000a replica 1: ", "": "raft group 7 replica 1: "} {
		db, err := kv.OpenMem()
		if err != nil {
			t.Fatal(err)
		}
		g, _ := openSingle(t, db, func(c *Config) { c.Name = name })
		_, err = soloAdmin{g: g}.AddReplica(context.Background(), &nacrepb.RaftAddRequest{Id: 2, Addr: "x:1"})
		if errno.CodeOf(err) != errno.FailedPrecondition || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("name %q: %v, want a refusal starting %q", name, err, want)
		}
		g.Stop()
		db.Close()
	}
}

// A replica that never catches up (its process is not running) is left a
// learner, and the error says so and what to do: run the command again
// once it runs, or remove it.
func TestAddReplicaThatCannotCatchUpSaysItStaysALearner(t *testing.T) {
	inMem(t, func(t *testing.T) {
		c, ctx := committedCluster(t)
		l := c.leader()
		short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancelShort()
		err := l.g.AddReplica(short, 9, "mem-nobody", false)
		for _, want := range []string{"replica 9 has not caught up", "stays a learner", "run the same command again", "nacre replica remove"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("adding a replica that cannot catch up: %v; want it to say %q", err, want)
			}
		}
		if st := l.g.Status(); len(st.Learners) != 1 || st.Learners[0] != 9 || len(st.Voters) != 3 {
			t.Fatalf("voters %v learners %v, want the 3 voters and learner 9", st.Voters, st.Learners)
		}
	})
}

// committedCluster is a 3-replica in-memory group with one entry
// committed, and a context that ends with the test (at most 20 s).
func committedCluster(t *testing.T) (*cluster, context.Context) {
	t.Helper()
	c := newCluster(t, "mem", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	if _, err := c.propose(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	return c, ctx
}

// TestRemoveRefusesToLoseTheQuorum: with one of three replicas down,
// removing another (a follower, or the leader itself) would leave one of
// two voters running, and the group would stop, unable even to take the
// change back: refused, naming the replica that is down. Removing the
// replica that is down is what to do instead, and works.
func TestRemoveRefusesToLoseTheQuorum(t *testing.T) {
	inMem(t, func(t *testing.T) {
		c, ctx := committedCluster(t)
		l := c.leader()
		fs := c.followers()
		down, up := fs[0], fs[1]
		c.stop(down.id)
		wait.For(t, 5*time.Second, fmt.Sprintf("the leader to count replica %d as not answering", down.id), func() bool {
			return !l.g.Status().Progress[down.id].RecentActive
		})
		for _, id := range []uint64{up.id, l.id} {
			err := l.g.RemovePeer(ctx, id)
			if !errors.Is(err, ErrWouldLoseQuorum) || !strings.Contains(err.Error(), fmt.Sprintf("replica %d not answering", down.id)) {
				t.Fatalf("removing replica %d with replica %d down: %v, want a refusal naming %d", id, down.id, err, down.id)
			}
		}
		if st := l.g.Status(); len(st.Voters) != 3 {
			t.Fatalf("voters %v after the refusals", st.Voters)
		}
		if err := l.g.RemovePeer(ctx, down.id); err != nil {
			t.Fatalf("removing the replica that is down: %v", err)
		}
		if _, err := c.propose(ctx, "y"); err != nil {
			t.Fatalf("the two replicas left: %v", err)
		}
	})
}
