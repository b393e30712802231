package mdrpc

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/pki"
	"nacre/test/testlog"
	"nacre/test/testpki"
)

func TestTLSPeersServedOthersRefusedAndLogged(t *testing.T) {
	caDir := filepath.Join(t.TempDir(), "ca")
	node := testpki.Issue(t, caDir, "nacre-MDT0000", pki.RoleNode)
	alice := testpki.Issue(t, caDir, "alice", pki.RoleClient)
	mallory := testpki.Issue(t, filepath.Join(t.TempDir(), "other"), "mallory", pki.RoleAdmin)
	var logs testlog.Buffer
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, methods(), ServerOptions{Fsname: "fs", TLS: node.ServerConfig(), WarnEvery: time.Nanosecond,
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c := Dial(s.Addr().String(), ClientOptions{Fsname: "fs", TLS: alice.ClientConfig()})
	defer c.Close()
	var r pb.Reply
	if err := c.Call(ctx, mEcho, &pb.LookupRequest{Name: []byte("hi")}, &r); err != nil || r.Message != "hi" {
		t.Fatalf("a client of the cluster: %q %v", r.Message, err)
	}

	plain := Dial(s.Addr().String(), ClientOptions{Fsname: "fs", DialTimeout: 2 * time.Second, Timeout: 2 * time.Second})
	defer plain.Close()
	if err := plain.Call(ctx, mEcho, &pb.LookupRequest{Name: []byte("x")}, &r); err == nil {
		t.Fatal("a client without TLS was served")
	}
	stranger := Dial(s.Addr().String(), ClientOptions{Fsname: "fs", TLS: mallory.ClientConfig()})
	defer stranger.Close()
	if err := stranger.Call(ctx, mEcho, &pb.LookupRequest{Name: []byte("x")}, &r); err == nil {
		t.Fatal("a client of another CA was served")
	}
	// Its own side refuses the server first (unknown authority); the
	// server still says who it refused when the client trusts it.
	cfg := mallory.ClientConfig()
	cfg.VerifyPeerCertificate = nil
	trusting := Dial(s.Addr().String(), ClientOptions{Fsname: "fs", TLS: cfg})
	defer trusting.Close()
	if err := trusting.Call(ctx, mEcho, &pb.LookupRequest{Name: []byte("x")}, &r); err == nil {
		t.Fatal("a client of another CA was served")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), `mallory`) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := logs.String()
	if !strings.Contains(out, "TLS handshake failed") || !strings.Contains(out, "remote=127.0.0.1:") || !strings.Contains(out, "mallory") {
		t.Fatalf("the server's log does not say whom it refused and why:\n%s", out)
	}
}
