package bulk

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"nacre/internal/pki"
	"nacre/test/testpki"
)

func TestTLSDataMovesAndStrangersAreRefused(t *testing.T) {
	caDir := filepath.Join(t.TempDir(), "ca")
	node := testpki.Issue(t, caDir, "nacre-OST0000", pki.RoleNode)
	alice := testpki.Issue(t, caDir, "alice", pki.RoleClient)
	h := newMem(objA)
	s, c := serve(t, h, ServerOptions{TLS: node.ServerConfig()}, ClientOptions{TLS: alice.ClientConfig()})
	data := bytes.Repeat([]byte("nacre"), 100000)
	ctx := ctxT(t)
	if err := c.Write(ctx, objA, 0, data, nil); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if n, err := c.Read(ctx, objA, 0, got); err != nil || n != len(data) || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", n, err)
	}
	plain, err := Dial(s.Addr().String(), ClientOptions{DialTimeout: 2 * time.Second, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if _, err := plain.Read(ctx, objA, 0, got); err == nil {
		t.Fatal("a client without TLS read data")
	}
	other := testpki.Issue(t, filepath.Join(t.TempDir(), "other"), "mallory", pki.RoleAdmin)
	stranger, err := Dial(s.Addr().String(), ClientOptions{TLS: other.ClientConfig(), DialTimeout: 2 * time.Second, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	if _, err := stranger.Read(ctx, objA, 0, got); err == nil {
		t.Fatal("a client of another CA read data")
	}
}
