package itest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
	"nacre/internal/raftgroup"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestMDTExitsWhenItsRaftLogCannotSync: a Raft log whose fsync fails (a
// disk returning EIO) stops the MDT's group; the process must then exit
// with the error in its log, not keep serving with a stopped group while
// status shows it up. With every answer waiting for its sync
// (NACRE_COMMIT_WINDOW=0), the create that met the failure is not
// acknowledged, and after a restart everything acknowledged before it is
// there.
func TestMDTExitsWhenItsRaftLogCannotSync(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{Env: []string{"NACRE_COMMIT_WINDOW=0"}})
	c := cl.Client(t)
	ctx := context.Background()
	if _, _, err := c.Create(ctx, fid.Root, "kept", 0o644, client.CreateOpts{Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	pid := cl.Pid("mdt0")

	cc, err := grpcx.Dial(replicaAddr(t, cl, "mdt0"))
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = nacregrpc.NewFaultClient(cc).Arm(actx, &pb.FaultArmRequest{Point: raftgroup.FaultLogSync, Action: "error"}, grpc.WaitForReady(true))
	cancel()
	cc.Close()
	if err != nil {
		t.Fatalf("arm %s: %v", raftgroup.FaultLogSync, err)
	}

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, _, err = c.Create(cctx, fid.Root, "lost", 0o644, client.CreateOpts{Exclusive: true})
	cancel()
	if err == nil {
		t.Fatal("a create whose log sync failed was acknowledged")
	}

	wait.For(t, 15*time.Second, fmt.Sprintf("the MDT (pid %d) to stop after its Raft log failed to sync", pid), func() bool {
		return !proc.Running(pid)
	})
	b, err := os.ReadFile(filepath.Join(cl.TargetDir("mdt0"), proc.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if log := string(b); !strings.Contains(log, "raft group stopped") || !strings.Contains(log, "sync raft log") {
		t.Errorf("the MDT's log does not name the failure; its end:\n%s", tail(log, 10))
	}

	cl.Restart()
	c2 := cl.Client(t)
	if _, err := c2.Lookup(ctx, fid.Root, "kept"); err != nil {
		t.Errorf("after the restart, a file acknowledged before the failure: %v", err)
	}
}

// TestAnswerBeforeAFailedSyncSurvives: under the durability contract a
// create is answered before the sync that then fails; the MDT exits, and
// its next start, on the same boot, still recovers from the clients,
// because a failed fsync may have dropped what it held.
func TestAnswerBeforeAFailedSyncSurvives(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{Env: []string{"NACRE_RECOVERY_WINDOW=2s"}})
	c := cl.Client(t)
	ctx := context.Background()
	if _, _, err := c.Create(ctx, fid.Root, "kept", 0o644, client.CreateOpts{Exclusive: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.SyncMDTs(ctx); err != nil { // no sync of an earlier answer is due when the fault is armed
		t.Fatal(err)
	}
	pid := cl.Pid("mdt0")
	if out, err := cl.Run("fault", "arm", raftgroup.FaultLogSync+"=error", "--target", "mdt0"); err != nil {
		t.Fatalf("arm %s: %v\n%s", raftgroup.FaultLogSync, err, out)
	}
	ino, _, err := c.Create(ctx, fid.Root, "answered", 0o644, client.CreateOpts{Exclusive: true})
	if err != nil {
		t.Fatalf("a create answered before its sync: %v", err)
	}
	wait.For(t, 15*time.Second, fmt.Sprintf("the MDT (pid %d) to stop once its sync failed", pid), func() bool {
		return !proc.Running(pid)
	})
	cl.Restart()
	got, err := c.Lookup(ctx, fid.Root, "answered")
	if err != nil {
		t.Fatalf("the create answered before the failed sync: %v", err)
	}
	if fid.FromPB(got.Fid) != fid.FromPB(ino.Fid) {
		t.Fatalf("answered is %s after the restart, %s before", fid.FromPB(got.Fid), fid.FromPB(ino.Fid))
	}
	b, err := os.ReadFile(filepath.Join(cl.TargetDir("mdt0"), proc.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "recovery: done") {
		t.Errorf("the restart after a failed sync did not recover from the clients; its log ends:\n%s", tail(string(b), 10))
	}
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
