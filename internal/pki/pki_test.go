package pki

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newCA(t *testing.T) (*CA, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ca")
	ca, made, err := InitCA(dir, "test")
	if err != nil || !made {
		t.Fatalf("InitCA: %v (made %v)", err, made)
	}
	return ca, dir
}

func issue(t *testing.T, ca *CA, r Request) *Creds {
	t.Helper()
	dir := filepath.Join(t.TempDir(), r.Name)
	if err := ca.Issue(dir, r); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// handshake connects a client with cc to a server with sc over a pipe
// and returns both sides' errors and the server's view of the peer.
func handshake(t *testing.T, sc, cc *tls.Config) (serr, cerr error, peer tls.ConnectionState) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	s := tls.Server(a, sc)
	go func() {
		defer close(done)
		serr = s.Handshake()
		if serr != nil {
			a.Close()
		}
		peer = s.ConnectionState()
	}()
	c := tls.Client(b, cc)
	cerr = c.Handshake()
	if cerr == nil {
		// TLS 1.3: the client finishes before the server has checked
		// its certificate; a read sees the server's verdict.
		c.SetReadDeadline(time.Now().Add(time.Second))
		c.Read(make([]byte, 1))
	}
	b.Close()
	<-done
	return serr, cerr, peer
}

// trusting is cfg trusting any server: to see what a server says of a
// client whose own checks would refuse the server first.
func trusting(cfg *tls.Config) *tls.Config {
	cfg.VerifyPeerCertificate = nil
	return cfg
}

func TestValidAccepted(t *testing.T) {
	ca, _ := newCA(t)
	node := issue(t, ca, Request{Name: "nacre-MDT0000", Role: RoleNode, Hosts: []string{"192.0.2.7", "mds1"}})
	cl := issue(t, ca, Request{Name: "alice", Role: RoleClient})
	serr, cerr, st := handshake(t, node.ServerConfig(), cl.ClientConfig())
	if serr != nil || cerr != nil {
		t.Fatalf("server %v, client %v", serr, cerr)
	}
	if st.Version != tls.VersionTLS13 {
		t.Errorf("version %x, want TLS 1.3", st.Version)
	}
	if got := PeerCert(st); got == nil || got.Subject.CommonName != "alice" || RoleOf(got) != RoleClient {
		t.Errorf("peer %v", Describe(got))
	}
	if !strings.Contains(strings.Join(node.Leaf.DNSNames, ","), "mds1") || len(node.Leaf.IPAddresses) < 2 {
		t.Errorf("SANs %v %v", node.Leaf.DNSNames, node.Leaf.IPAddresses)
	}
	// Node to node: both usages.
	if serr, cerr, _ := handshake(t, node.ServerConfig(), node.ClientConfig()); serr != nil || cerr != nil {
		t.Fatalf("node to node: server %v, client %v", serr, cerr)
	}
}

func TestOtherCARefused(t *testing.T) {
	ca, _ := newCA(t)
	other, _ := newCA(t)
	node := issue(t, ca, Request{Name: "nacre-OST0000", Role: RoleNode})
	stranger := issue(t, other, Request{Name: "mallory", Role: RoleAdmin})
	serr, _, _ := handshake(t, node.ServerConfig(), trusting(stranger.ClientConfig()))
	if serr == nil || !strings.Contains(serr.Error(), `"mallory"`) || !strings.Contains(serr.Error(), "unknown authority") {
		t.Fatalf("server: %v, want a refusal naming mallory and the unknown authority", serr)
	}
	// A server of another cluster is refused by the client.
	strangeNode := issue(t, other, Request{Name: "nacre-MDT0000", Role: RoleNode})
	cl := issue(t, ca, Request{Name: "alice", Role: RoleClient})
	if _, cerr, _ := handshake(t, strangeNode.ServerConfig(), cl.ClientConfig()); cerr == nil {
		t.Fatal("a client accepted a server of another CA")
	}
}

func TestNoCertRefused(t *testing.T) {
	ca, _ := newCA(t)
	node := issue(t, ca, Request{Name: "MGS", Role: RoleNode})
	serr, _, _ := handshake(t, node.ServerConfig(), &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if serr == nil {
		t.Fatal("a client without a certificate was accepted")
	}
}

func TestExpiredRefused(t *testing.T) {
	ca, _ := newCA(t)
	node := issue(t, ca, Request{Name: "MGS", Role: RoleNode})
	dir := filepath.Join(t.TempDir(), "bob")
	if err := ca.Issue(dir, Request{Name: "bob", Role: RoleClient, NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("Load of an expired certificate: %v", err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	serr, _, _ := handshake(t, node.ServerConfig(), &tls.Config{Certificates: []tls.Certificate{cert}, InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	if serr == nil || !strings.Contains(serr.Error(), "expired") {
		t.Fatalf("server: %v, want an expired certificate refused", serr)
	}
}

func TestClientCannotServe(t *testing.T) {
	ca, _ := newCA(t)
	admin := issue(t, ca, Request{Name: "root", Role: RoleAdmin})
	cl := issue(t, ca, Request{Name: "alice", Role: RoleClient})
	if _, cerr, _ := handshake(t, admin.ServerConfig(), cl.ClientConfig()); cerr == nil {
		t.Fatal("a client accepted a server holding a client certificate")
	}
}

func TestRoles(t *testing.T) {
	ca, _ := newCA(t)
	admin := issue(t, ca, Request{Name: "root", Role: RoleAdmin})
	cl := issue(t, ca, Request{Name: "alice", Role: RoleClient})
	node := issue(t, ca, Request{Name: "MGS", Role: RoleNode})
	if cl.Role() != RoleClient || admin.Role() != RoleAdmin || node.Role() != RoleNode {
		t.Fatalf("roles %s %s %s", cl.Role(), admin.Role(), node.Role())
	}
	err := Need(cl.Leaf, RoleAdmin, "lfsck start")
	if err == nil || !strings.Contains(err.Error(), "nacre cert add --client NAME --admin") || !strings.Contains(err.Error(), `"alice"`) {
		t.Fatalf("client for an admin call: %v", err)
	}
	if err := Need(admin.Leaf, RoleAdmin, "lfsck start"); err != nil {
		t.Fatal(err)
	}
	if err := Need(node.Leaf, RoleAdmin, "lfsck start"); err != nil {
		t.Fatal(err)
	}
	if err := Need(admin.Leaf, RoleNode, "raft"); err == nil {
		t.Fatal("an admin client may send Raft messages")
	}
	if err := Need(nil, RoleClient, "x"); err == nil {
		t.Fatal("no certificate allowed")
	}
}

func TestFileModes(t *testing.T) {
	ca, dir := newCA(t)
	cdir := filepath.Join(t.TempDir(), "creds")
	if err := ca.Issue(cdir, Request{Name: "n", Role: RoleNode}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, cdir} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want 0700", d, fi.Mode(), err)
		}
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			fi, _ := e.Info()
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s/%s: %v, want 0600", d, e.Name(), fi.Mode())
			}
		}
	}
	// A second InitCA keeps the CA.
	again, made, err := InitCA(dir, "test")
	if err != nil || made || !again.Cert.Equal(ca.Cert) {
		t.Fatalf("InitCA again: made %v err %v", made, err)
	}
	if _, err := OpenCA(t.TempDir()); !errors.Is(err, ErrNoCA) {
		t.Fatalf("OpenCA of an empty directory: %v", err)
	}
}
