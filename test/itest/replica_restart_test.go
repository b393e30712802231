package itest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/grpcx"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// waitCaughtUp waits until replica name has applied everything its
// group's leader had committed when the wait began.
func waitCaughtUp(t *testing.T, cl *testcluster.Cluster, group, name string) *pb.RaftMembersReply {
	t.Helper()
	leader := waitLeader(t, cl, group)
	lm := members(replicaAddr(t, cl, leader))
	if lm == nil {
		t.Fatalf("leader %s does not answer", leader)
	}
	var m *pb.RaftMembersReply
	wait.For(t, 30*time.Second, fmt.Sprintf("%s to catch up with the leader's commit index %d", name, lm.Commit), func() bool {
		m = members(replicaAddr(t, cl, name))
		return m != nil && m.Applied >= lm.Commit
	})
	return m
}

// TestReplicaRollingRestartUnderLoad restarts every replica of the MGS
// and of the MDT, one after the other, while clients work: a leader hands
// over before it stops, so clients hardly notice. Then one follower stays
// down while the log moves far past what the leader keeps (the retained
// log is cut to 300 entries here), comes back, catches up from a
// snapshot, and leads.
func TestReplicaRollingRestartUnderLoad(t *testing.T) {
	cl := startReplicated(t, "NACRE_RAFT_KEEP_ENTRIES=300")
	work := startWorkload(t, cl, workerNames(3)...)
	time.Sleep(time.Second) // the workers get going
	start := time.Now()

	rounds := 1
	if os.Getenv("NACRE_ITEST_LONG") != "" {
		rounds = 3
	}
	for round := 0; round < rounds; round++ {
		for _, group := range []string{"mgs", "mdt0"} {
			for _, name := range replicaNames(t, cl, group) {
				wasLeader := waitLeader(t, cl, group) == name
				cl.Kill(name, syscall.SIGTERM)
				cl.Restart()
				waitCaughtUp(t, cl, group, name)
				t.Logf("restarted %s (was leader: %v); leader now %s", name, wasLeader, waitLeader(t, cl, group))
			}
		}
	}
	rolled := time.Now()

	// A follower down for a long time.
	leader := waitLeader(t, cl, "mdt0")
	var down string
	for _, n := range replicaNames(t, cl, "mdt0") {
		if n != leader {
			down = n
			break
		}
	}
	before := members(replicaAddr(t, cl, leader))
	cl.Kill(down, syscall.SIGKILL)
	wait.For(t, 30*time.Second, fmt.Sprintf("the leader's log to be compacted past %d", before.Commit), func() bool {
		m := members(replicaAddr(t, cl, waitLeader(t, cl, "mdt0", down)))
		if m != nil && m.FirstIndex > before.Commit+1 {
			t.Logf("%s down; the leader's log now starts at %d, past the %d it had applied", down, m.FirstIndex, before.Commit)
			return true
		}
		return false
	})
	cl.Restart()
	m := waitCaughtUp(t, cl, "mdt0", down)
	if m.SnapshotsReceived == 0 {
		t.Fatalf("%s caught up without a snapshot (received %d)", down, m.SnapshotsReceived)
	}
	t.Logf("%s caught up by snapshot: applied %d", down, m.Applied)
	work.finish(t)
	work.checkWaits(t, "the rolling restart", start, rolled)

	// The replica restored from the snapshot leads, and serves the
	// namespace every client expects.
	cc, err := grpcx.Dial(replicaAddr(t, cl, down))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var rid uint64
	for _, f := range strings.Split(down, "-r")[1:] {
		for _, ch := range f {
			rid = rid*10 + uint64(ch-'0')
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	wait.Poll(15*time.Second, func() bool {
		addr := replicaAddr(t, cl, waitLeader(t, cl, "mdt0"))
		lc, err := grpcx.Dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = nacregrpc.NewRaftAdminClient(lc).TransferLeader(ctx, &pb.RaftTransferRequest{To: rid})
		lc.Close()
		return err == nil || ctx.Err() != nil
	})
	if l := waitLeader(t, cl, "mdt0"); l != down {
		t.Fatalf("leadership went to %s, not %s", l, down)
	}
	c := cl.Client(t)
	waitStatusLeader(t, c, down)
	work.verify(t, c)
	if !t.Failed() {
		checkClean(t, cl)
	}
}
