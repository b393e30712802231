package mdrpc

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"nacre/internal/errno"
	"nacre/internal/netguard"
	"nacre/internal/pki"
	"nacre/internal/version"
)

// Method is one served method: it decodes its request from the payload and
// returns the reply to encode.
type Method func(ctx context.Context, payload []byte) (proto.Message, error)

// Handle adapts a typed handler to a Method.
func Handle[Req any, PReq interface {
	*Req
	proto.Message
}, Resp proto.Message](h func(context.Context, PReq) (Resp, error)) Method {
	return func(ctx context.Context, payload []byte) (proto.Message, error) {
		req := PReq(new(Req))
		if err := proto.Unmarshal(payload, req); err != nil {
			return nil, errno.Errorf(errno.InvalidArgument, "decode request: %v", err)
		}
		return h(ctx, req)
	}
}

// ServerOptions configure a server.
type ServerOptions struct {
	Fsname string
	Log    *slog.Logger
	// Observe, if set, is told about every served call.
	Observe func(method uint16, d time.Duration, err error)
	// FrameTimeout bounds reading the rest of a request once its first
	// byte has arrived, and writing a reply (0: 30 s): a peer that stops
	// halfway through a frame loses its connection instead of holding
	// it, and its buffer, for ever.
	FrameTimeout time.Duration
	// IdleTimeout closes a connection that sends no request for that
	// long (0: 10 min; negative: never). Clients pool their connections
	// and send nothing while idle; the Client redials one the server
	// closed without failing the call (Client.Call), so this only costs
	// an idle mount a new connection.
	IdleTimeout time.Duration
	// MaxConnsPerPeer bounds the connections one peer IP holds open
	// (0: netguard.DefaultMaxPerPeer; negative: no bound); the server
	// closes, counts (Server.Refused) and logs the ones over it.
	MaxConnsPerPeer int
	// WarnEvery is the least interval between two log lines about one
	// peer's bad frames or refused connections (0: 10 s); the next line
	// counts those suppressed.
	WarnEvery time.Duration
	// TLS, if set, makes every connection TLS (internal/pki's
	// ServerConfig): the handshake comes first, within
	// pki.HandshakeTimeout, and a peer it refuses is logged with why. A
	// method's context carries the peer's certificate (pki.PeerOf).
	TLS *tls.Config
}

const (
	defaultFrameTimeout = 30 * time.Second
	defaultIdleTimeout  = 10 * time.Minute
)

// Server serves methods on a listener.
type Server struct {
	ln      *netguard.Listener
	warn    *netguard.Warner
	methods map[uint16]Method
	opts    ServerOptions
	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// Serve starts serving methods on ln.
func Serve(ln net.Listener, methods map[uint16]Method, o ServerOptions) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.FrameTimeout <= 0 {
		o.FrameTimeout = defaultFrameTimeout
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = defaultIdleTimeout
	}
	w := netguard.NewWarner(o.Log, o.WarnEvery)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{ln: netguard.LimitPeers(ln, o.MaxConnsPerPeer, w, "metadata RPC"), warn: w, methods: methods, opts: o, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s
}

// Addr is the listen address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Refused is how many connections the server closed at once because
// their peer held MaxConnsPerPeer open.
func (s *Server) Refused() uint64 { return s.ln.Refused() }

// Open is how many connections the server holds open now.
func (s *Server) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Close stops accepting, cancels running calls and closes connections.
func (s *Server) Close() {
	s.ln.Close()
	s.cancel()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

func (s *Server) serveConn(raw net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, raw)
		s.mu.Unlock()
		raw.Close()
	}()
	c := raw
	peer := c.RemoteAddr().String()
	ctx := s.ctx
	if s.opts.TLS != nil {
		tc, err := pki.Accept(c, s.opts.TLS, pki.HandshakeTimeout)
		if err != nil {
			s.warn.Warn(netguard.PeerIP(c.RemoteAddr()), "connection refused: TLS handshake failed", "port", "metadata RPC", "remote", peer, "err", err)
			return
		}
		// Closing raw (Close, the deferred close) ends tc too, and
		// does not wait on the peer as a TLS close would.
		c = tc
		// Methods learn who asks (pki.PeerOf): the MDS maps ids by it.
		ctx = pki.WithPeer(ctx, pki.PeerCert(tc.ConnectionState()))
	}
	br := bufio.NewReaderSize(c, 64<<10)
	var in, out []byte
	hello := false
	for {
		// Between requests: a pooled client connection may sit idle for
		// long, but not for ever.
		var idle time.Time
		if s.opts.IdleTimeout > 0 {
			idle = time.Now().Add(s.opts.IdleTimeout)
		}
		c.SetReadDeadline(idle)
		if _, err := br.Peek(1); err != nil {
			if !errors.Is(err, net.ErrClosed) && !isEOF(err) {
				s.opts.Log.Debug("framed RPC connection closed", "remote", peer, "err", err)
			}
			return
		}
		// The first byte is in: the rest of the frame comes now or never.
		c.SetReadDeadline(time.Now().Add(s.opts.FrameTimeout))
		h, payload, err := readFrame(br, in)
		if cap(payload) <= keepBuf {
			in = payload
		} else {
			in = nil
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
				s.warn.Warn(netguard.PeerIP(c.RemoteAddr()), "framed RPC connection dropped: bad or incomplete frame", "remote", peer, "err", err)
			}
			return
		}
		var reply proto.Message
		var callErr error
		switch {
		case h.version != version.Protocol:
			callErr = errno.VersionMismatch(strconv.Itoa(int(h.version)), version.Protocol, "client", "server")
		case h.code == MethodHello:
			if fs := string(payload); fs != "" && fs != s.opts.Fsname {
				callErr = errno.Errorf(errno.FailedPrecondition, "this server serves file system %q, not %q", s.opts.Fsname, fs)
			}
			hello = true
		case !hello:
			callErr = errno.New(errno.FailedPrecondition, "the first request on a connection must be hello")
		default:
			reply, callErr = s.call(ctx, h.code, payload)
		}
		out = s.reply(out, h, reply, callErr)
		c.SetWriteDeadline(time.Now().Add(s.opts.FrameTimeout))
		if _, err := c.Write(out); err != nil {
			return
		}
		if cap(out) > keepBuf {
			out = nil
		}
		if callErr != nil && errno.CodeOf(callErr) == errno.FailedPrecondition && (!hello || h.code == MethodHello) {
			return
		}
	}
}

func isEOF(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

func (s *Server) call(ctx context.Context, method uint16, payload []byte) (reply proto.Message, err error) {
	m := s.methods[method]
	if m == nil {
		return nil, errno.Errorf(errno.Unimplemented, "framed RPC method %d is not served here", method)
	}
	start := time.Now()
	defer func() {
		if r := recover(); r != nil {
			err = errno.Errorf(errno.Internal, "method %d panicked: %v\n%s", method, r, debug.Stack())
		}
		if s.opts.Observe != nil {
			s.opts.Observe(method, time.Since(start), err)
		}
	}()
	return m(ctx, payload)
}

// reply builds the reply frame in buf: the reply encoded in place after
// the header (the metadata hot path), or the error.
func (s *Server) reply(buf []byte, req header, reply proto.Message, err error) []byte {
	h := header{version: version.Protocol, id: req.id}
	if err == nil {
		out, merr := proto.MarshalOptions{}.MarshalAppend(headroom(buf), reply)
		if merr == nil {
			return seal(out, h)
		}
		err = errno.Errorf(errno.Internal, "encode reply: %v", merr)
	}
	e := errno.From(err)
	h.code = uint16(e.Code)
	if req.version != version.Protocol {
		// A peer of another version reads the refusal as text.
		return frame(buf, h, []byte(e.Msg))
	}
	payload, _ := proto.Marshal(e.Failure())
	return frame(buf, h, payload)
}
