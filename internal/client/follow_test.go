package client

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
	"nacre/internal/grpcx"
	"nacre/internal/obs"
	"nacre/test/wait"
)

type countingMGS struct {
	nacregrpc.UnimplementedMGSServer
	calls atomic.Int64
}

func (m *countingMGS) GetConfig(context.Context, *pb.GetConfigRequest) (*pb.ClusterConfig, error) {
	m.calls.Add(1)
	return &pb.ClusterConfig{}, nil
}

func serveMGS(t *testing.T, m nacregrpc.MGSServer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	nacregrpc.RegisterMGSServer(s, m)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// A client follows the MGS replicas the configuration lists (replicas
// replaced while a mount runs); a single MGS lists none and changes
// nothing.
func TestClientFollowsTheMGSReplicas(t *testing.T) {
	newer := &countingMGS{}
	newAddr := serveMGS(t, newer)
	old := &switchingMGS{}
	sc, err := grpcx.DialSwap(serveMGS(t, old))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c := &Client{mgsConn: sc, mgs: nacregrpc.NewMGSClient(sc), log: obs.Discard()}
	ctx := context.Background()
	if _, err := c.Config(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Config(ctx); err != nil || newer.calls.Load() != 0 {
		t.Fatalf("a single MGS in the configuration moved the client (%v, new MGS calls %d)", err, newer.calls.Load())
	}
	old.next.Store(newAddr)
	if _, err := c.Config(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.mgs.GetConfig(ctx, &pb.GetConfigRequest{}); err != nil || newer.calls.Load() != 1 {
		t.Fatalf("after the configuration named replica 5, a call went to the old MGS (%v, new MGS calls %d)", err, newer.calls.Load())
	}
	if got := sc.Addrs(); got != newAddr {
		t.Errorf("dialled %s, want %s", got, newAddr)
	}
}

// switchingMGS names, once next is set, another MGS replica in every
// configuration it gives.
type switchingMGS struct {
	nacregrpc.UnimplementedMGSServer
	next atomic.Value // string; unset: a single MGS, which lists none
}

func (m *switchingMGS) GetConfig(context.Context, *pb.GetConfigRequest) (*pb.ClusterConfig, error) {
	if next, _ := m.next.Load().(string); next != "" {
		return &pb.ClusterConfig{MgsAddrs: []string{next}}, nil
	}
	return &pb.ClusterConfig{}, nil
}

// A long-lived client (a mount) reads the configuration in the
// background (Config.RefreshEvery), so it follows MGS replicas replaced
// while it is idle.
func TestAnIdleClientFollowsTheMGSReplicas(t *testing.T) {
	newer := &countingMGS{}
	newAddr := serveMGS(t, newer)
	sw := &switchingMGS{}
	sw.next.Store(newAddr)
	switching := serveMGS(t, sw)
	sc, err := grpcx.DialSwap(switching)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	c := &Client{mgsConn: sc, mgs: nacregrpc.NewMGSClient(sc), log: obs.Discard(), mdts: map[uint32]*mdtConn{}, osts: map[uint32]*ostConn{}}
	stop := make(chan struct{})
	go c.refreshLoop(20*time.Millisecond, stop)
	defer close(stop)
	wait.NoErr(t, 5*time.Second, "an idle client to dial the replica the configuration names", func() error {
		if a := sc.Addrs(); a != newAddr {
			return fmt.Errorf("it dials %s, not %s", a, newAddr)
		}
		return nil
	})
}
