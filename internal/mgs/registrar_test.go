package mgs

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/obs"
	"nacre/test/wait"
)

// fakeMGS answers registrations and heartbeats, and tells of the MGS
// replicas in next (a replacement made while a target runs).
type fakeMGS struct {
	nacregrpc.UnimplementedMGSServer
	next  []string
	beats atomic.Int64
}

func (f *fakeMGS) Register(context.Context, *pb.TargetInfo) (*pb.RegisterReply, error) {
	return &pb.RegisterReply{}, nil
}

func (f *fakeMGS) Heartbeat(context.Context, *pb.HeartbeatRequest) (*pb.HeartbeatReply, error) {
	f.beats.Add(1)
	return &pb.HeartbeatReply{MgsAddrs: f.next}, nil
}

func serveFake(t *testing.T, f *fakeMGS) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	nacregrpc.RegisterMGSServer(s, f)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// A target follows the MGS replicas a heartbeat names: replicas replaced
// while it runs (all of them, one by one) would otherwise leave it with
// the addresses of none.
func TestRegistrarFollowsTheMGSReplicas(t *testing.T) {
	newer := &fakeMGS{}
	newAddr := serveFake(t, newer)
	newer.next = []string{newAddr}
	old := &fakeMGS{next: []string{newAddr}}
	oldAddr := serveFake(t, old)
	r, err := StartRegistrar(oldAddr, func() *pb.TargetInfo { return &pb.TargetInfo{Addr: "127.0.0.1:9"} },
		func() *pb.HeartbeatRequest { return &pb.HeartbeatRequest{} }, obs.Discard(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	var recorded atomic.Value
	r.OnMGSChange(func(addrs string) { recorded.Store(addrs) })
	wait.NoErr(t, 10*time.Second, "heartbeats at the MGS replica the old one named", func() error {
		if newer.beats.Load() < 2 {
			return fmt.Errorf("it got %d, the old one %d", newer.beats.Load(), old.beats.Load())
		}
		return nil
	})
	// What the target's servers use (configuration, sequences) follows.
	if _, err := r.Client().Heartbeat(context.Background(), &pb.HeartbeatRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := old.beats.Load(); n > 2 {
		t.Errorf("the old MGS still got %d heartbeats", n)
	}
	// And the target is told, to record them for its next start.
	if got, _ := recorded.Load().(string); got != newAddr {
		t.Errorf("OnMGSChange got %q, want %q", got, newAddr)
	}
}
