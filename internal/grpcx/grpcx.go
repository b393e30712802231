// Package grpcx sets up Nacre's gRPC servers and client connections, and
// is the adapter between gRPC's status errors and internal/errno: what a
// handler returns (an *errno.Error, an errno, any error) leaves the server
// as a status whose code is its errno.Code, with a pb.Failure detail when
// it carries more than words (a not-the-leader refusal); what a call on a
// connection from Dial returns is an *errno.Error again. Above this package
// nothing looks at gRPC status codes or at an error's text.
//
// With TLS (WithTLS, WithServerTLS: internal/pki's credentials) every
// connection is TLS 1.3 with both sides' certificates checked, a server
// logs each peer it refuses and why, and a call needs the role its method
// needs (methodRole): Raft and target registration a node's certificate,
// the admin services an admin's or a node's; a call without it fails with
// PermissionDenied naming the role and the fix.
//
// Every call carries the caller's protocol version in the metadata key
// "nacre-protocol"; a server that speaks another version refuses the call
// with FailedPrecondition and a message naming both versions, and so does a
// client that learns the server's version from Hello.
package grpcx

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"nacre/internal/errno"
	"nacre/internal/netguard"
	"nacre/internal/pki"
	"nacre/internal/version"
)

const versionKey = "nacre-protocol"

// Observer is told about every served call (for metrics).
type Observer func(method string, d time.Duration, err error)

// ServerOption tunes NewServer.
type ServerOption func(*serverOpts)

type serverOpts struct {
	inflight Gauge
	creds    *pki.Creds
	warn     *netguard.Warner
}

// Gauge is the part of a Prometheus gauge the server needs.
type Gauge interface {
	Inc()
	Dec()
}

// WithInFlight counts the calls being served (the RPC queue depth).
func WithInFlight(g Gauge) ServerOption { return func(o *serverOpts) { o.inflight = g } }

// WithServerTLS makes the server accept only TLS 1.3 connections from
// peers holding a certificate of c's CA, and check each call's role
// (methodRole). Refused peers are logged through w: who (address,
// certificate) and why. A nil c leaves the server without TLS.
func WithServerTLS(c *pki.Creds, w *netguard.Warner) ServerOption {
	return func(o *serverOpts) { o.creds, o.warn = c, w }
}

// NewServer returns a gRPC server that checks protocol versions, turns
// handler panics into Internal errors, sends handler errors as statuses
// (toStatus), and reports calls to obs (may be nil).
func NewServer(obs Observer, opts ...ServerOption) *grpc.Server {
	var so serverOpts
	for _, o := range opts {
		o(&so)
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		if err := checkVersion(ctx); err != nil {
			return nil, toStatus(err)
		}
		if err := so.checkRole(ctx, info.FullMethod); err != nil {
			return nil, toStatus(err)
		}
		if so.inflight != nil {
			so.inflight.Inc()
			defer so.inflight.Dec()
		}
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				err = errno.Errorf(errno.Internal, "%s panicked: %v\n%s", info.FullMethod, r, debug.Stack())
			}
			if obs != nil {
				obs(info.FullMethod, time.Since(start), err)
			}
			err = toStatus(err)
		}()
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := checkVersion(ss.Context()); err != nil {
			return toStatus(err)
		}
		if err := so.checkRole(ss.Context(), info.FullMethod); err != nil {
			return toStatus(err)
		}
		return toStatus(h(srv, ss))
	}
	creds := insecure.NewCredentials()
	if so.creds != nil {
		creds = serverCreds{credentials.NewTLS(so.creds.ServerConfig()), so.warn}
	}
	return grpc.NewServer(
		grpc.Creds(creds),
		grpc.UnaryInterceptor(unary),
		grpc.StreamInterceptor(stream),
		// gRPC fills a message's buffers as its bytes arrive, so a
		// length prefix reserves nothing before them; the bound is what
		// one finished message may hold.
		grpc.MaxRecvMsgSize(64<<20),
		grpc.MaxSendMsgSize(64<<20),
		// Clients open a stream per call and a few long-lived ones (lock
		// callbacks, Raft); a thousand per connection leaves room for
		// any of them, and none for a peer opening streams without end.
		grpc.MaxConcurrentStreams(1024),
		// A connection that does not finish the HTTP/2 handshake (TLS
		// bytes, garbage, half a preface) is closed after this, not
		// gRPC's 120 s.
		grpc.ConnectionTimeout(10*time.Second),
		// A peer that goes quiet, also halfway through a frame, is
		// pinged and closed if it does not answer. Nacre's clients
		// ping every 10 s themselves (Dial), which counts as activity,
		// and answer pings, so healthy idle connections stay.
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
	)
}

func checkVersion(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	v := md.Get(versionKey)
	if len(v) == 0 {
		return errno.Errorf(errno.FailedPrecondition,
			"incompatible peer: it sent no Nacre protocol version; this server speaks protocol %d", version.Protocol)
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n != version.Protocol {
		return errno.VersionMismatch(v[0], version.Protocol, "client", "server")
	}
	return nil
}

// DialOption tunes Dial.
type DialOption func(*dialOpts)

type dialOpts struct{ creds *pki.Creds }

// WithTLS makes the connection TLS 1.3, presenting c's certificate and
// accepting only a server with a node certificate of c's CA. A nil c
// dials without TLS.
func WithTLS(c *pki.Creds) DialOption { return func(o *dialOpts) { o.creds = c } }

// Dial returns a client connection to addr. It does not wait for the
// server: the first call does, within its deadline. addr may list several
// servers separated by commas (the replicas of a replicated MGS): the
// connection uses the first that answers and moves on when it fails.
//
// Calls on the connection return *errno.Error for what the server or the
// transport refused (fromStatus): Unavailable when no server answers,
// Unimplemented when the server does not serve the method or is not a
// gRPC server at all.
func Dial(addr string, opts ...DialOption) (*grpc.ClientConn, error) {
	var do dialOpts
	for _, o := range opts {
		o(&do)
	}
	creds := insecure.NewCredentials()
	if do.creds != nil {
		creds = credentials.NewTLS(do.creds.ClientConfig())
	}
	var peer peerState
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, inv grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx = metadata.AppendToOutgoingContext(ctx, versionKey, strconv.Itoa(version.Protocol))
		return fromStatus(inv(ctx, method, req, reply, cc, opts...), &peer)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, s grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx = metadata.AppendToOutgoingContext(ctx, versionKey, strconv.Itoa(version.Protocol))
		cs, err := s(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, fromStatus(err, &peer)
		}
		return clientStream{cs, &peer}, nil
	}
	// "h:p " or "a, b": an address typed or pasted with blanks.
	var parts []string
	for _, a := range strings.Split(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			parts = append(parts, a)
		}
	}
	addr = strings.Join(parts, ",")
	bc := backoff.DefaultConfig
	bc.BaseDelay = 50 * time.Millisecond
	bc.MaxDelay = time.Second
	cc, err := grpc.NewClient("passthrough:///"+addr,
		multiAddr(parts),
		grpc.WithTransportCredentials(creds),
		grpc.WithUnaryInterceptor(unary),
		grpc.WithStreamInterceptor(stream),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 2 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", a)
			if err != nil {
				peer.dialErr.Store(&err)
				return nil, err
			}
			peer.dialErr.Store(nil)
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetNoDelay(true)
			}
			if do.creds != nil {
				// The server's first bytes are TLS's, not HTTP/2's.
				return c, nil
			}
			return &sniffConn{Conn: c, notGRPC: &peer.notGRPC}, nil
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return cc, nil
}

// multiAddr resolves the addresses of Dial when there are several (one
// needs nothing: the passthrough resolver dials it).
func multiAddr(addrs []string) grpc.DialOption {
	if len(addrs) < 2 {
		return grpc.EmptyDialOption{}
	}
	r := manual.NewBuilderWithScheme("passthrough")
	var st resolver.State
	for _, a := range addrs {
		st.Addresses = append(st.Addresses, resolver.Address{Addr: a})
	}
	r.InitialState(st)
	return grpc.WithResolvers(r)
}

// CheckHostPort checks that addr is HOST:PORT with a port from 1 to
// 65535 and returns the host, for messages about addresses given by hand.
func CheckHostPort(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("port %q is not a number from 1 to 65535", port)
	}
	return host, nil
}

// SwapConn is a client connection whose servers can be replaced under the
// clients made on it: a replicated MGS's replicas, replaced one after the
// other while a target or a mount runs (Swap). Calls in flight finish on
// the old connection, closed a while later.
type SwapConn struct {
	opts  []DialOption
	mu    sync.Mutex
	addrs string
	p     atomic.Pointer[grpc.ClientConn]
}

// DialSwap dials addr (as Dial) into a SwapConn.
func DialSwap(addr string, opts ...DialOption) (*SwapConn, error) {
	cc, err := Dial(addr, opts...)
	if err != nil {
		return nil, err
	}
	s := &SwapConn{addrs: addr, opts: opts}
	s.p.Store(cc)
	return s, nil
}

// Swap dials addrs if they are not the addresses dialled; it reports
// whether it did.
func (s *SwapConn) Swap(addrs []string) (bool, error) {
	if len(addrs) == 0 {
		return false, nil
	}
	list := strings.Join(addrs, ",")
	s.mu.Lock()
	defer s.mu.Unlock()
	if list == s.addrs {
		return false, nil
	}
	cc, err := Dial(list, s.opts...)
	if err != nil {
		return false, err
	}
	old := s.p.Swap(cc)
	s.addrs = list
	time.AfterFunc(30*time.Second, func() { old.Close() })
	return true, nil
}

// Follow is Swap, logging a change or a failure to dial: a target or
// client following the MGS replicas the MGS lists. It reports whether it
// changed the addresses.
func (s *SwapConn) Follow(addrs []string, log *slog.Logger) bool {
	was := s.Addrs()
	swapped, err := s.Swap(addrs)
	if err != nil {
		log.Warn("dial the MGS replicas", "mgs", addrs, "err", err)
	} else if swapped {
		log.Info("MGS replicas changed: following them", "was", was, "mgs", s.Addrs())
	}
	return swapped && err == nil
}

// Addrs are the addresses dialled now.
func (s *SwapConn) Addrs() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs
}

// Close closes the connection.
func (s *SwapConn) Close() error { return s.p.Load().Close() }

func (s *SwapConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return s.p.Load().Invoke(ctx, method, args, reply, opts...)
}

func (s *SwapConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return s.p.Load().NewStream(ctx, desc, method, opts...)
}
