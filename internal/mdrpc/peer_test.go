package mdrpc

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/pki"
	"nacre/test/testpki"
)

// A served method learns whose certificate the request came with (the
// MDS maps the ids of a client's requests by it).
func TestMethodsKnowThePeersCertificate(t *testing.T) {
	caDir := filepath.Join(t.TempDir(), "ca")
	node := testpki.Issue(t, caDir, "nacre-MDT0000", pki.RoleNode)
	alice := testpki.Issue(t, caDir, "alice", pki.RoleClient)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const mWho = 1
	who := map[uint16]Method{mWho: Handle(func(ctx context.Context, _ *pb.LookupRequest) (*pb.Reply, error) {
		return &pb.Reply{Message: pki.Describe(pki.PeerOf(ctx))}, nil
	})}
	s := Serve(ln, who, ServerOptions{Fsname: "fs", TLS: node.ServerConfig()})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := Dial(s.Addr().String(), ClientOptions{Fsname: "fs", TLS: alice.ClientConfig()})
	defer c.Close()
	var r pb.Reply
	if err := c.Call(ctx, mWho, &pb.LookupRequest{}, &r); err != nil || r.Message != `"alice" (client)` {
		t.Fatalf("the method saw the peer as %q (%v); want alice's client certificate", r.Message, err)
	}

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := Serve(ln2, who, ServerOptions{Fsname: "fs"})
	defer plain.Close()
	pc := Dial(plain.Addr().String(), ClientOptions{Fsname: "fs"})
	defer pc.Close()
	if err := pc.Call(ctx, mWho, &pb.LookupRequest{}, &r); err != nil || r.Message != "no certificate" {
		t.Fatalf("without TLS the method saw the peer as %q (%v); want no certificate", r.Message, err)
	}
}
