package itest

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// The failover tests: three replicas of the MGS and of the MDT, clients
// creating, writing, renaming, linking, unlinking and changing modes in
// their own directories; the MDT's leader is killed (SIGKILL), or cut
// off from the other replicas (fault point raft.isolate), while they work.
// Afterwards every acknowledged operation is there exactly once (a
// repeated create, link, mkdir, rename or unlink would have failed with
// EEXIST or ENOENT, and the final namespace matches the clients' model),
// no FID or OST object is used twice, the checker finds the namespace
// clean, and no client waited more than 3 s.

const maxStall = 3 * time.Second

// failoverRun runs the workload on `workers` clients, calls fail once
// they are under way, keeps going for a while, and checks everything.
func failoverRun(t *testing.T, cl *testcluster.Cluster, workers int, fail func() (healed func())) {
	work := startWorkload(t, cl, workerNames(workers)...)
	// The workers run 1.5 s before the failure, 4 s through it and 1.5 s
	// after it healed.
	time.Sleep(1500 * time.Millisecond)
	failAt := time.Now()
	healed := fail()
	time.Sleep(4 * time.Second)
	if healed != nil {
		healed()
	}
	time.Sleep(1500 * time.Millisecond)
	work.finish(t)
	end := time.Now()
	ops := map[string]int{}
	for _, w := range work.ws {
		for k, v := range w.ops {
			ops[k] += v
		}
	}
	t.Logf("operations by kind: %v", ops)
	for _, k := range []string{"create", "write", "setattr", "link", "rename", "unlink", "mkdir"} {
		if ops[k] == 0 {
			t.Errorf("the workload did no %s", k)
		}
	}
	work.checkWaits(t, "the fault and its healing", failAt, end)
	work.verify(t, cl.Client(t))
	if t.Failed() {
		return
	}
	checkClean(t, cl)
}

func TestReplicaLeaderKilledUnderLoadLosesNothingAndRunsNothingTwice(t *testing.T) {
	cl := startReplicated(t)
	leader := waitLeader(t, cl, "mdt0")
	failoverRun(t, cl, 4, func() func() {
		cl.Kill(leader, syscall.SIGKILL)
		t.Logf("killed the leader %s with SIGKILL", leader)
		checkStatusAfterKill(t, cl, leader)
		return func() {
			cl.Restart() // the old leader comes back as a follower and catches up
			t.Logf("%s restarted; leader now %s", leader, waitLeader(t, cl, "mdt0"))
		}
	})
}

func TestReplicaLeaderCutOffUnderLoadLosesNothingAndRunsNothingTwice(t *testing.T) {
	cl := startReplicated(t)
	leader := waitLeader(t, cl, "mdt0")
	failoverRun(t, cl, 4, func() func() {
		isolate(t, cl, leader, true)
		t.Logf("cut the leader %s off from the other replicas", leader)
		next := waitLeader(t, cl, "mdt0", leader)
		t.Logf("new leader: %s", next)
		return func() {
			isolate(t, cl, leader, false)
			t.Logf("%s reconnected", leader)
		}
	})
}

// TestReplicaMGSLeaderKilled: with the MGS leader gone, clients and
// targets carry on through the other MGS replicas (they name all three),
// and the FLD keeps every range (grants after a failover are
// TestReplicaMGSFailoverBetweenSequenceGrants's).
func TestReplicaMGSLeaderKilled(t *testing.T) {
	cl := startReplicated(t)
	c := cl.Client(t)
	ctx := context.Background()
	before, err := c.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leader := waitLeader(t, cl, "mgs")
	cl.Kill(leader, syscall.SIGKILL)
	start := time.Now()
	next := waitLeader(t, cl, "mgs", leader)
	t.Logf("MGS leader %s killed; %s leads after %v", leader, next, time.Since(start).Round(time.Millisecond))
	// A new client connects through the surviving replicas.
	c2, err := client.New(ctx, client.Config{MGS: cl.MGS, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("connect with the MGS leader down: %v", err)
	}
	defer c2.Close()
	for i := 0; i < 20; i++ {
		if _, err := c2.Mkdir(ctx, fid.Root, "after-mgs-failover-"+string(rune('a'+i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	after, err := c2.Config(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Fld) < len(before.Fld) {
		t.Fatalf("the FLD shrank across the MGS failover: %d ranges, was %d", len(after.Fld), len(before.Fld))
	}
	for i, a := range after.Fld {
		for _, b := range after.Fld[i+1:] {
			if a.Start < b.End && b.Start < a.End {
				t.Fatalf("sequence ranges overlap: [%#x,%#x) and [%#x,%#x)", a.Start, a.End, b.Start, b.End)
			}
		}
	}
	cl.Restart()
	// A client connected before keeps working when the replica its MGS
	// connection uses (the first one listed) goes away.
	cl.Kill("mgs-r1", syscall.SIGKILL)
	start = time.Now()
	if _, err := c.Config(ctx); err != nil {
		t.Fatalf("configuration through the other MGS replicas: %v", err)
	}
	if _, err := c.Mkdir(ctx, fid.Root, "after-mgs-r1-killed", 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("with mgs-r1 killed, an existing client read the configuration after %v", time.Since(start).Round(time.Millisecond))
	cl.Restart()
	// With a majority of the MGS replicas down, status says so, not that
	// the MGS "does not answer (is the cluster up?)".
	cl.Kill("mgs-r1", syscall.SIGKILL)
	cl.Kill("mgs-r2", syscall.SIGKILL)
	// (the last replica leads on until it finds it lost its majority)
	wait.NoErr(t, 15*time.Second, "status to say the MGS replicas have no leader", func() error {
		out, err := cl.Run("status")
		if err != nil && strings.Contains(out, "its replicas have no leader (1 of 3 answer") {
			return nil
		}
		return fmt.Errorf("%v\n%s", err, out)
	})
	cl.Restart()
	if os.Getenv("NACRE_ITEST_LONG") == "" {
		return
	}
	checkClean(t, cl)
}
