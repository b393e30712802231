package raftgroup

import (
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	"nacre/api/nacrepb"
	"nacre/internal/grpcx"
	"nacre/internal/pki"
	"nacre/test/wait"
)

// TestFastPathSharesThePortWithGRPCAndNoticesADeadPeer: one listener
// serves gRPC and the raft fast path; a fast connection whose peer goes
// away is marked dead at once, not after a lost write.
func TestFastPathSharesThePortWithGRPCAndNoticesADeadPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcx.NewServer(nil)
	tr := NewGRPCTransport(srv, testLog())
	done := make(chan struct{})
	go func() { srv.Serve(tr.Listener(ln)); close(done) }()
	defer func() { srv.Stop(); <-done }()

	// gRPC on the same port.
	cc, err := grpcx.Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx := t.Context()
	if _, err := nacregrpc.NewRaftAdminClient(cc).Members(ctx, &nacrepb.RaftMembersRequest{Group: 9}, grpc.WaitForReady(true)); err == nil {
		t.Fatal("Members of a group that is not hosted succeeded")
	} else if s := err.Error(); len(s) == 0 {
		t.Fatal("no error text")
	}

	// The fast path.
	f, err := dialFast(ln.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	if err := f.send(&nacrepb.RaftBatch{}, time.Second); err != nil {
		t.Fatal(err)
	}
	if f.dead.Load() {
		t.Fatal("a live connection is marked dead")
	}
	tr.Close() // closes the accepted fast connections, as a dying peer would
	wait.For(t, 5*time.Second, "the dialling side to notice that its peer went away", f.dead.Load)

	// A peer that does not answer the preface is not a fast path.
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	go func() {
		c, err := plain.Accept()
		if err == nil {
			io.ReadFull(c, make([]byte, len(fastPreface))) // an HTTP/2 server would refuse it
			c.Close()
		}
	}()
	if _, err := dialFast(plain.Addr().String(), nil); err == nil {
		t.Fatal("dialFast succeeded against a peer that does not speak it")
	}
}

// TestFastPathTLSTakesNodesOnly: with TLS, the fast path is TLS after
// the prefaces, and the accepting side takes frames only from a node
// certificate: an admin's connection is closed, which its dialling side
// notices.
func TestFastPathTLSTakesNodesOnly(t *testing.T) {
	caDir := filepath.Join(t.TempDir(), "ca")
	ca, _, err := pki.InitCA(caDir, "test")
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string, role pki.Role) *pki.Creds {
		d := filepath.Join(t.TempDir(), name)
		if err := ca.Issue(d, pki.Request{Name: name, Role: role}); err != nil {
			t.Fatal(err)
		}
		c, err := pki.Load(d)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	node, admin := load("mdt0-r1", pki.RoleNode), load("root", pki.RoleAdmin)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpcx.NewServer(nil, grpcx.WithServerTLS(node, nil))
	tr := NewGRPCTransport(srv, testLog(), WithTLS(node))
	done := make(chan struct{})
	go func() { srv.Serve(tr.Listener(ln)); close(done) }()
	defer func() { tr.Close(); srv.Stop(); <-done }()

	f, err := dialFast(ln.Addr().String(), node)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	if err := f.send(&nacrepb.RaftBatch{}, time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if f.dead.Load() {
		t.Fatal("a node's fast connection was closed")
	}
	// Without TLS the prefaces pass, and the first frame, which is no
	// TLS handshake, ends the connection.
	if p, err := dialFast(ln.Addr().String(), nil); err == nil {
		defer p.close()
		p.send(&nacrepb.RaftBatch{}, time.Second)
		wait.For(t, 5*time.Second, "the accepting side to close a fast connection without TLS", p.dead.Load)
	}
	a, err := dialFast(ln.Addr().String(), admin)
	if err == nil {
		defer a.close()
		wait.For(t, 5*time.Second, "the accepting side to close an admin's fast connection", a.dead.Load)
	}
}
