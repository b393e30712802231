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
// status shows it up. The create that met the failure is not
// acknowledged, and after a restart everything acknowledged before it is
// there.
func TestMDTExitsWhenItsRaftLogCannotSync(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
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

func tail(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
