package itest

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"nacre/internal/client"
	"nacre/internal/fid"
)

// TestReplicaThatStopsAnsweringIsLeftBehind: a replica that neither
// answers nor closes its connections (its process paused with SIGSTOP: a
// long GC pause, a frozen VM, a network that drops its packets) holds a
// client's call for a few seconds at most; the call goes to the replicas
// that answer. Before, a mkdir waited on the paused leader until the
// caller's 30 s ran out (EIO), although the others had elected a leader
// within two seconds, and reads spread over the replicas waited on a
// paused follower for as long as it was paused.
func TestReplicaThatStopsAnsweringIsLeftBehind(t *testing.T) {
	cl := startReplicated(t)
	// Both clients spread reads over the replicas, to meet the paused
	// follower below.
	c, err := client.New(context.Background(), client.Config{MGS: cl.MGS, Timeout: 60 * time.Second, FollowerReads: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Mkdir(ctx, fid.Root, "before", 0o755); err != nil {
		t.Fatal(err)
	}
	pause := func(name string) {
		pid := cl.Pid(name)
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) }) // before the cluster stops
	}
	// A mount too: its unlinks and renames go over its session.
	m := mountFuse(t, cl)
	if err := os.WriteFile(m.Path("held"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The leader pauses: a mutation goes to the new leader.
	leader := waitLeader(t, cl, "mdt0")
	pause(leader)
	start := time.Now()
	if _, err := c.Mkdir(ctx, fid.Root, "during", 0o755); err != nil {
		t.Fatalf("mkdir with the leader paused: %v (after %v)", err, time.Since(start))
	}
	// About 2 s to give up on the paused leader, overlapping the
	// election; generous for a loaded machine, and far below the 30 s of
	// the caller's timeout that it took before.
	if took := time.Since(start); took > 12*time.Second {
		t.Fatalf("mkdir with the leader paused took %v", took)
	}
	start = time.Now()
	if err := os.Rename(m.Path("held"), m.Path("moved")); err != nil {
		t.Fatalf("rename on the mount with the leader paused: %v", err)
	}
	if err := os.Remove(m.Path("moved")); err != nil {
		t.Fatalf("unlink on the mount with the leader paused: %v", err)
	}
	if err := os.WriteFile(m.Path("new"), []byte("y"), 0o644); err != nil {
		t.Fatalf("create on the mount with the leader paused: %v", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Fatalf("rename, unlink and create on the mount with the leader paused took %v", took)
	}
	// A follower pauses too? No: then there is no majority. Resume the
	// old leader, let it rejoin, then pause a follower of the new one.
	pid := cl.Pid(leader)
	syscall.Kill(pid, syscall.SIGCONT)
	newLeader := waitLeader(t, cl, "mdt0", leader)
	var follower string
	for _, n := range replicaNames(t, cl, "mdt0") {
		if n != newLeader {
			follower = n
			break
		}
	}
	pause(follower)
	start = time.Now()
	for i := range 12 { // reads go round the replicas: some meet the paused one
		if _, err := c.Lookup(ctx, fid.Root, "during"); err != nil {
			t.Fatalf("lookup %d with follower %s paused: %v", i, follower, err)
		}
		if _, err := c.Mkdir(ctx, fid.Root, fmt.Sprintf("d%d", i), 0o755); err != nil {
			t.Fatalf("mkdir %d with follower %s paused: %v", i, follower, err)
		}
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Fatalf("12 lookups and mkdirs with a follower paused took %v", took)
	}
}
