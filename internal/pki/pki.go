// Package pki holds a cluster's credentials: its certificate authority,
// the certificates it issues to nodes (the targets' processes) and to
// clients (mounts, commands), and the TLS configurations every link is
// made with (docs/architecture.md, "Who may do what: the trust model").
//
// Two kinds of directory:
//
//   - a CA directory holds ca.pem and ca-key.pem: the cluster's authority,
//     made once (`nacre format --tls-dir`, `nacre up --tls`) and used
//     only to issue (`nacre cert add`);
//   - a credentials directory holds ca.pem, cert.pem and key.pem: what a
//     target (its directory's tls/, named by the identity file) or a
//     client (NACRE_TLS_DIR, --tls-dir) presents and trusts.
//
// Every file is 0600 and every directory 0700: a key is its owner's
// alone (root's, on a real cluster).
//
// A certificate carries its role as its subject's organizational unit:
// "node" (a target: server and client usage, may do anything a peer
// does, Raft included), "admin" (a client that may use the admin
// services: lfsck, fault injection, replicas) or "client" (a client that
// may not). Only the CA signs, so the role cannot be forged. Both sides
// of every link check the other's certificate against the cluster's CA;
// a client also checks that the server holds a node certificate. Names
// and addresses are not checked: the MGS hands out targets' addresses,
// and replicas move (`nacre replica replace`), so what proves a server is
// that the cluster's CA made it a node. The node certificates still name
// their hosts (SANs) for tools such as openssl s_client.
//
// Every link is TLS 1.3 with both sides authenticated.
package pki

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Role is what a certificate's holder may do.
type Role string

const (
	// RoleNode is a target's process: everything, Raft and target
	// registration included.
	RoleNode Role = "node"
	// RoleAdmin is a client that may use the admin services.
	RoleAdmin Role = "admin"
	// RoleClient is a client: files only.
	RoleClient Role = "client"
)

// Allows reports whether a holder of r may do what needs need.
func (r Role) Allows(need Role) bool {
	switch need {
	case RoleClient:
		return r == RoleClient || r == RoleAdmin || r == RoleNode
	case RoleAdmin:
		return r == RoleAdmin || r == RoleNode
	case RoleNode:
		return r == RoleNode
	}
	return false
}

// Files of the directories.
const (
	CAFile    = "ca.pem"
	CAKeyFile = "ca-key.pem"
	CertFile  = "cert.pem"
	KeyFile   = "key.pem"
)

// Validity is how long issued certificates last; the CA lasts twice
// as long, so that every certificate it issues expires before it.
const Validity = 5 * 365 * 24 * time.Hour

// ErrNoCA is returned by OpenCA for a directory without a CA.
var ErrNoCA = errors.New("no cluster certificate authority")

// CA is a cluster's certificate authority.
type CA struct {
	Dir  string
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// InitCA opens the CA in dir, or makes one named after cluster there if
// dir holds none. It reports whether it made it.
func InitCA(dir, cluster string) (*CA, bool, error) {
	ca, err := OpenCA(dir)
	if err == nil || !errors.Is(err, ErrNoCA) {
		return ca, false, err
	}
	if err := mkdirPrivate(dir); err != nil {
		return nil, false, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, false, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Nacre cluster CA " + cluster, Organization: []string{"nacre"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(2 * Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, false, fmt.Errorf("make the cluster CA: %w", err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, false, err
	}
	// The key first: a ca.pem without its key would be a CA that cannot
	// issue, and OpenCA would not make a new one.
	if err := writePrivate(filepath.Join(dir, CAKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})); err != nil {
		return nil, false, err
	}
	if err := writePrivate(filepath.Join(dir, CAFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})); err != nil {
		return nil, false, err
	}
	ca, err = OpenCA(dir)
	return ca, err == nil, err
}

// OpenCA opens the CA in dir (ErrNoCA if there is none).
func OpenCA(dir string) (*CA, error) {
	cp, err := os.ReadFile(filepath.Join(dir, CAFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (no %s)", ErrNoCA, dir, CAFile)
	}
	if err != nil {
		return nil, err
	}
	kp, err := os.ReadFile(filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("the cluster CA in %s: %w (the CA key is needed to issue certificates)", dir, err)
	}
	cert, err := parseCert(cp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, CAFile), err)
	}
	kb, _ := pem.Decode(kp)
	if kb == nil {
		return nil, fmt.Errorf("%s: no PEM block", filepath.Join(dir, CAKeyFile))
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, CAKeyFile), err)
	}
	return &CA{Dir: dir, Cert: cert, key: key, pem: cp}, nil
}

// Request is a certificate to issue.
type Request struct {
	// Name is the subject's common name: a target's name, or a client's.
	Name string
	Role Role
	// Hosts are the DNS names and IP addresses a node serves on (its
	// SANs); 127.0.0.1 and localhost are always added to a node's.
	Hosts []string
	// NotBefore and NotAfter bound the validity (zero: from an hour ago,
	// for clocks a little behind, to Validity from now).
	NotBefore, NotAfter time.Time
}

// Issue writes a credentials directory dir (ca.pem, cert.pem, key.pem)
// for r, replacing one there.
func (ca *CA) Issue(dir string, r Request) error {
	switch r.Role {
	case RoleNode, RoleAdmin, RoleClient:
	default:
		return fmt.Errorf("certificate role %q: want node, admin or client", r.Role)
	}
	if r.Name == "" {
		return errors.New("a certificate needs a name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	if r.NotBefore.IsZero() {
		r.NotBefore = now.Add(-time.Hour)
	}
	if r.NotAfter.IsZero() {
		r.NotAfter = now.Add(Validity)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: r.Name, Organization: []string{"nacre"}, OrganizationalUnit: []string{string(r.Role)}},
		NotBefore:    r.NotBefore,
		NotAfter:     r.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if r.Role == RoleNode {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		for _, h := range append(slices.Clone(r.Hosts), "127.0.0.1", "localhost") {
			if h == "" {
				continue
			}
			if ip := net.ParseIP(h); ip != nil {
				if !slices.ContainsFunc(tmpl.IPAddresses, ip.Equal) && !ip.IsUnspecified() {
					tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
				}
			} else if !slices.Contains(tmpl.DNSNames, h) {
				tmpl.DNSNames = append(tmpl.DNSNames, h)
			}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		return fmt.Errorf("issue a certificate for %s: %w", r.Name, err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := mkdirPrivate(dir); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})},
		{CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})},
		{CAFile, ca.pem},
	} {
		if err := writePrivate(filepath.Join(dir, f.name), f.data); err != nil {
			return err
		}
	}
	return nil
}

// Creds are what one party presents and trusts: its certificate and key,
// and the cluster's CA.
type Creds struct {
	// Dir is where they were loaded from (for messages).
	Dir  string
	Leaf *x509.Certificate
	cert tls.Certificate
	pool *x509.CertPool
}

// Load reads the credentials directory dir.
func Load(dir string) (*Creds, error) {
	cp, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, fmt.Errorf("TLS credentials in %s: %w (a credentials directory holds %s, %s and %s: `nacre cert add` makes one)", dir, err, CAFile, CertFile, KeyFile)
	}
	ca, err := parseCert(cp)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, CAFile), err)
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), filepath.Join(dir, KeyFile))
	if err != nil {
		return nil, fmt.Errorf("TLS credentials in %s: %w", dir, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, CertFile), err)
	}
	cert.Leaf = leaf
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	c := &Creds{Dir: dir, Leaf: leaf, cert: cert, pool: pool}
	if _, err := c.verify(leaf, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, fmt.Errorf("TLS credentials in %s: %s does not verify against %s: %w", dir, CertFile, CAFile, err)
	}
	return c, nil
}

// Name is the certificate's common name.
func (c *Creds) Name() string { return c.Leaf.Subject.CommonName }

// Role is the certificate's role.
func (c *Creds) Role() Role { return RoleOf(c.Leaf) }

// RoleOf is the role a certificate carries ("" if none).
func RoleOf(cert *x509.Certificate) Role {
	if cert == nil {
		return ""
	}
	for _, ou := range cert.Subject.OrganizationalUnit {
		switch r := Role(ou); r {
		case RoleNode, RoleAdmin, RoleClient:
			return r
		}
	}
	return ""
}

// Describe names a certificate for log lines and refusals: its common
// name and role.
func Describe(cert *x509.Certificate) string {
	if cert == nil {
		return "no certificate"
	}
	r := RoleOf(cert)
	if r == "" {
		r = "no role"
	}
	return fmt.Sprintf("%q (%s)", cert.Subject.CommonName, r)
}

func (c *Creds) verify(leaf *x509.Certificate, usage x509.ExtKeyUsage, inter ...*x509.Certificate) ([][]*x509.Certificate, error) {
	opts := x509.VerifyOptions{Roots: c.pool, KeyUsages: []x509.ExtKeyUsage{usage}}
	if len(inter) > 0 {
		opts.Intermediates = x509.NewCertPool()
		for _, ic := range inter {
			opts.Intermediates.AddCert(ic)
		}
	}
	return leaf.Verify(opts)
}

// verifyPeer checks a peer's certificate chain: signed by the cluster's
// CA, valid now, for usage; a server's must also be a node's. The error
// names the certificate, so that a refusal in a log says who.
func (c *Creds) verifyPeer(raw [][]byte, usage x509.ExtKeyUsage) error {
	if len(raw) == 0 {
		return errors.New("the peer sent no certificate (it needs one from the cluster's CA: `nacre cert add`, NACRE_TLS_DIR)")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		cert, err := x509.ParseCertificate(b)
		if err != nil {
			return fmt.Errorf("the peer's certificate does not parse: %w", err)
		}
		certs[i] = cert
	}
	leaf := certs[0]
	if _, err := c.verify(leaf, usage, certs[1:]...); err != nil {
		return fmt.Errorf("certificate %s issued by %q refused: %w", Describe(leaf), leaf.Issuer.CommonName, err)
	}
	if usage == x509.ExtKeyUsageServerAuth && RoleOf(leaf) != RoleNode {
		return fmt.Errorf("certificate %s refused: a server must hold a node certificate", Describe(leaf))
	}
	return nil
}

// ServerConfig is the configuration a server accepts connections with:
// TLS 1.3, a client certificate from the cluster's CA required.
func (c *Creds) ServerConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.cert},
		// The chain is checked by VerifyPeerCertificate, not by
		// crypto/tls, so that a refusal names the certificate refused.
		ClientAuth: tls.RequireAnyClientCert,
		// Full records from the first byte: the bulk protocol moves
		// megabytes per request, and pooled connections sit idle between
		// them, which would start every burst with small records again.
		DynamicRecordSizingDisabled: true,
		ClientCAs:                   c.pool,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return c.verifyPeer(raw, x509.ExtKeyUsageClientAuth)
		},
	}
}

// ClientConfig is the configuration a client connects with: TLS 1.3,
// its certificate presented, the server's checked to be a node
// certificate of the cluster's CA (whatever the address: package doc).
func (c *Creds) ClientConfig() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.cert},
		RootCAs:      c.pool,
		// As ServerConfig.
		DynamicRecordSizingDisabled: true,
		// Names are not checked (package doc); VerifyPeerCertificate
		// checks the chain and the role instead.
		InsecureSkipVerify: true,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return c.verifyPeer(raw, x509.ExtKeyUsageServerAuth)
		},
	}
}

// PeerCert is the certificate a connection's peer presented: verified by
// the configuration of ServerConfig or ClientConfig before the handshake
// completed (nil if there is none).
func PeerCert(cs tls.ConnectionState) *x509.Certificate {
	if len(cs.PeerCertificates) == 0 {
		return nil
	}
	return cs.PeerCertificates[0]
}

type peerKey struct{}

// WithPeer is ctx carrying the certificate of the peer whose request it
// serves: the framed protocols' servers put it there (gRPC's context
// carries its own: grpcx.PeerCert), for what depends on who asks, such
// as the MDSs' nodemaps.
func WithPeer(ctx context.Context, cert *x509.Certificate) context.Context {
	if cert == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, cert)
}

// PeerOf is the certificate WithPeer put in ctx (nil if none).
func PeerOf(ctx context.Context) *x509.Certificate {
	c, _ := ctx.Value(peerKey{}).(*x509.Certificate)
	return c
}

// Need is the refusal of a call that needs role need from a peer whose
// certificate is cert; nil if cert's role allows it.
func Need(cert *x509.Certificate, need Role, what string) error {
	if RoleOf(cert).Allows(need) {
		return nil
	}
	fix := "a node certificate: only the cluster's targets may"
	if need == RoleAdmin {
		fix = "an admin certificate: `nacre cert add --client NAME --admin` issues one"
	}
	return fmt.Errorf("%s needs the %s role; certificate %s lacks it (it needs %s)", what, need, Describe(cert), fix)
}

// HostOf is the host of a listen address for a node certificate's SANs
// ("" for a wildcard).
func HostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		h = addr
	}
	h = strings.Trim(h, "[]")
	if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
		return ""
	}
	return h
}

func parseCert(p []byte) (*x509.Certificate, error) {
	b, _ := pem.Decode(p)
	if b == nil || b.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(b.Bytes)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}

// mkdirPrivate makes dir (and its parents) and makes it 0700 whatever
// it was.
func mkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700)
}

// writePrivate writes a file 0600 through a temporary file, so that a
// crash leaves the old file or the new one.
func writePrivate(path string, data []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// HandshakeTimeout bounds a TLS handshake on the framed protocols' ports,
// as gRPC's ConnectionTimeout bounds its handshake: a peer that connects
// and sends nothing holds its connection no longer.
const HandshakeTimeout = 10 * time.Second

// Accept does the server side of a TLS handshake on c within d: when it
// returns without error, the peer's certificate has been checked.
func Accept(c net.Conn, cfg *tls.Config, d time.Duration) (*Conn, error) {
	b := newBuffered(c)
	tc := tls.Server(b, cfg)
	c.SetDeadline(time.Now().Add(d))
	err := tc.Handshake()
	c.SetDeadline(time.Time{})
	b.buffer()
	return &Conn{Conn: tc, b: b}, err
}

// Connect does the client side of a TLS handshake on c within d (or
// ctx's deadline, if earlier). In TLS 1.3 the server checks the client's
// certificate after the client's side is done: a refusal shows at the
// first read, as "remote error: tls: bad certificate".
func Connect(ctx context.Context, c net.Conn, cfg *tls.Config, d time.Duration) (*Conn, error) {
	b := newBuffered(c)
	tc := tls.Client(b, cfg)
	dl := time.Now().Add(d)
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	c.SetDeadline(dl)
	err := tc.HandshakeContext(ctx)
	c.SetDeadline(time.Time{})
	b.buffer()
	return &Conn{Conn: tc, b: b}, err
}

// Conn is a TLS connection of the framed protocols. crypto/tls writes
// each record (16 KiB at most) to the socket on its own and reads the
// socket record by record: a megabyte of bulk data cost 64 system calls
// each way, a third of TLS's CPU. Conn sends what one Write made in as
// few writes as its buffer allows, and reads ahead.
type Conn struct {
	*tls.Conn
	b *buffered
}

// Write writes p as TLS records and sends them before it returns.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if ferr := c.b.flush(); err == nil {
		err = ferr
	}
	return n, err
}

// Close sends TLS's closing alert at once and closes the connection.
func (c *Conn) Close() error {
	c.b.direct()
	return c.Conn.Close()
}

const bufSize = 256 << 10

// buffered is the socket under a Conn: writes go to a buffer once the
// handshake is done (it flushes its own messages as it goes), reads come
// through a read-ahead buffer.
type buffered struct {
	net.Conn
	r  *bufio.Reader
	mu sync.Mutex
	w  *bufio.Writer // nil: write through
}

func newBuffered(c net.Conn) *buffered {
	return &buffered{Conn: c, r: bufio.NewReaderSize(c, bufSize)}
}

func (b *buffered) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *buffered) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil {
		return b.Conn.Write(p)
	}
	return b.w.Write(p)
}

func (b *buffered) buffer() {
	b.mu.Lock()
	b.w = bufio.NewWriterSize(b.Conn, bufSize)
	b.mu.Unlock()
}

func (b *buffered) flush() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w == nil {
		return nil
	}
	return b.w.Flush()
}

// direct writes through from now on, after what is buffered.
func (b *buffered) direct() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.w != nil {
		b.w.Flush()
		b.w = nil
	}
}
