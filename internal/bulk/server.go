package bulk

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"nacre/internal/errno"
	"nacre/internal/netguard"
	"nacre/internal/pki"
	"nacre/internal/version"
)

// ServerOptions configure Serve.
type ServerOptions struct {
	// Fsname is the file system served; a HELLO naming another is refused.
	Fsname string
	// Index is the target index reported in HELLO replies.
	Index uint32
	// Epoch names what the target's unsynced writes survive: it changes
	// when a restart may have lost writes it had acknowledged but not yet
	// synced (the OST's store decides; ost.Store.Epoch). Replies to the
	// requests that change data carry it (doc.go, "Epochs").
	Epoch uint64
	// Log receives one line per event (nil: discard).
	Log *slog.Logger
	// IOTimeout bounds reading the rest of a frame once its first byte has
	// arrived, and writing a reply (0: 30 s).
	IOTimeout time.Duration
	// IdleTimeout closes a connection that sends no request for that
	// long (0: 10 min; negative: never). Clients pool their connections
	// and send nothing while idle; a call that finds its pooled
	// connection closed is sent again on a new one (Client, "do"), so
	// this only costs an idle mount a new connection.
	IdleTimeout time.Duration
	// MaxConnsPerPeer bounds the connections one peer IP holds open
	// (0: netguard.DefaultMaxPerPeer; negative: no bound); the server
	// closes, counts (Stats.Refused) and logs the ones over it.
	MaxConnsPerPeer int
	// WarnEvery is the least interval between two log lines about one
	// peer's bad frames or refused connections (0: 10 s); the next line
	// counts those suppressed.
	WarnEvery time.Duration
	// CloseTimeout bounds how long Close waits for requests in flight
	// (0: 10 s).
	CloseTimeout time.Duration
	// Observe, if set, is called after every request with its opcode,
	// duration, payload bytes moved and outcome (for metrics).
	Observe func(op Op, d time.Duration, bytes int, err error)
	// InFlight, if set, counts the requests being served (the RPC queue
	// depth metric).
	InFlight interface {
		Inc()
		Dec()
	}

	// TLS, if set, makes every connection TLS (internal/pki's
	// ServerConfig): the handshake comes first, within
	// pki.HandshakeTimeout, and a peer it refuses is logged with why.
	TLS *tls.Config

	// protocol overrides version.Protocol (tests of version refusal).
	protocol uint16
}

// Stats are a server's counters.
type Stats struct {
	Accepted       uint64 // connections accepted
	Open           uint64 // connections open now
	Requests       uint64 // frames handled
	CRCErrors      uint64 // request payloads that failed their CRC32C
	ProtocolErrors uint64 // connections dropped for a framing or handshake error
	Refused        uint64 // connections closed at once: their peer held MaxConnsPerPeer
}

// Server serves the wire protocol on one listener.
type Server struct {
	ln           *netguard.Listener
	h            Handler
	opts         ServerOptions
	log          *slog.Logger
	warn         *netguard.Warner
	idleTimeout  time.Duration
	version      uint16
	ioTimeout    time.Duration
	closeTimeout time.Duration
	bufs         bufPool

	mu      sync.Mutex
	conns   map[*serverConn]struct{}
	closing bool

	wg         sync.WaitGroup // connection goroutines
	acceptDone chan struct{}
	closeOnce  sync.Once
	closeErr   error

	accepted, requests, crcErrors, protoErrors atomic.Uint64

	// corruptCRC makes the next n reply payloads carry a wrong CRC (tests).
	corruptCRC atomic.Int32
}

type serverConn struct {
	nc net.Conn
	// rw is what requests are read from and replies written to: nc, or
	// TLS over it. Closing is nc's: a TLS close would write, and Close
	// must not wait on a peer.
	rw    net.Conn
	br    *bufio.Reader
	rbuf  [HeaderSize + MaxExt]byte
	wbuf  [HeaderSize + MaxExt]byte
	hello bool
	busy  bool // guarded by Server.mu: a request is being handled
}

// Serve starts serving ln with h and returns at once; Close stops it.
func Serve(ln net.Listener, h Handler, opts ServerOptions) *Server {
	s := &Server{
		h:            h,
		opts:         opts,
		log:          opts.Log,
		idleTimeout:  opts.IdleTimeout,
		version:      opts.protocol,
		ioTimeout:    opts.IOTimeout,
		closeTimeout: opts.CloseTimeout,
		conns:        make(map[*serverConn]struct{}),
		acceptDone:   make(chan struct{}),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.version == 0 {
		s.version = version.Protocol
	}
	if s.ioTimeout == 0 {
		s.ioTimeout = 30 * time.Second
	}
	if s.closeTimeout == 0 {
		s.closeTimeout = 10 * time.Second
	}
	if s.idleTimeout == 0 {
		s.idleTimeout = 10 * time.Minute
	}
	s.warn = netguard.NewWarner(s.log, opts.WarnEvery)
	s.ln = netguard.LimitPeers(ln, opts.MaxConnsPerPeer, s.warn, "bulk data")
	go s.accept()
	return s
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	open := len(s.conns)
	s.mu.Unlock()
	return Stats{
		Accepted:       s.accepted.Load(),
		Open:           uint64(open),
		Requests:       s.requests.Load(),
		CRCErrors:      s.crcErrors.Load(),
		ProtocolErrors: s.protoErrors.Load(),
		Refused:        s.ln.Refused(),
	}
}

// Close stops accepting, closes idle connections, lets requests in flight
// finish (their connections close after the reply) and waits for them up
// to CloseTimeout; past it, it closes every connection and returns an error.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.ln.Close()
		s.mu.Lock()
		s.closing = true
		for sc := range s.conns {
			if !sc.busy {
				sc.nc.Close()
			}
		}
		s.mu.Unlock()
		<-s.acceptDone
		done := make(chan struct{})
		go func() {
			s.wg.Wait()
			close(done)
		}()
		t := time.NewTimer(s.closeTimeout)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.mu.Lock()
			n := 0
			for sc := range s.conns {
				if sc.busy {
					n++
				}
				sc.nc.Close()
			}
			s.mu.Unlock()
			s.closeErr = fmt.Errorf("bulk server on %s: %d requests still in flight after %v; connections closed",
				s.ln.Addr(), n, s.closeTimeout)
			s.log.Warn("bulk server closed with requests in flight", "addr", s.ln.Addr().String(), "in_flight", n)
		}
	})
	return s.closeErr
}

func (s *Server) accept() {
	defer close(s.acceptDone)
	var delay time.Duration
	for {
		nc, err := s.ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing || errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: back off, as net/http
			// does, instead of spinning.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("bulk accept failed; retrying", "addr", s.ln.Addr().String(), "err", err, "retry_in", delay)
			time.Sleep(delay)
			continue
		}
		delay = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		sc := &serverConn{nc: nc, rw: nc, br: bufio.NewReaderSize(nc, 32<<10)}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			return
		}
		s.conns[sc] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		s.accepted.Add(1)
		go s.serveConn(sc)
	}
}

// setBusy records whether sc is handling a request; it reports false when
// the server is closing, and the connection must then end.
func (s *Server) setBusy(sc *serverConn, busy bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc.busy = busy
	return !s.closing
}

func (s *Server) serveConn(sc *serverConn) {
	defer func() {
		sc.nc.Close()
		s.mu.Lock()
		delete(s.conns, sc)
		s.mu.Unlock()
		s.wg.Done()
	}()
	if s.opts.TLS != nil {
		tc, err := pki.Accept(sc.nc, s.opts.TLS, pki.HandshakeTimeout)
		if err != nil {
			s.warn.Warn(netguard.PeerIP(sc.nc.RemoteAddr()), "connection refused: TLS handshake failed", "port", "bulk data", "remote", sc.nc.RemoteAddr().String(), "err", err)
			return
		}
		sc.rw, sc.br = tc, bufio.NewReaderSize(tc, 32<<10)
	}
	if sc.rw == nil {
		sc.rw = sc.nc
	}
	for {
		if !s.setBusy(sc, false) {
			return
		}
		// Between requests: pooled client connections sit idle for long,
		// but not for ever.
		var idle time.Time
		if s.idleTimeout > 0 {
			idle = time.Now().Add(s.idleTimeout)
		}
		sc.nc.SetReadDeadline(idle)
		if _, err := sc.br.Peek(1); err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Debug("bulk connection ended", "peer", sc.nc.RemoteAddr().String(), "err", err)
			}
			return
		}
		if !s.setBusy(sc, true) {
			return
		}
		if !s.serveOne(sc) {
			return
		}
	}
}

// serveOne reads one request and answers it; false ends the connection.
func (s *Server) serveOne(sc *serverConn) bool {
	sc.nc.SetReadDeadline(time.Now().Add(s.ioTimeout))
	h, ext, err := readHeader(sc.br, sc.rbuf[:])
	if err != nil {
		s.protoErrors.Add(1)
		if errors.Is(err, ErrFrameTooLarge) {
			s.replyErr(sc, &h, syscall.EMSGSIZE, fmt.Sprintf("frame refused: payload of %d bytes exceeds the %d-byte limit", h.payloadLen, MaxPayload))
		}
		s.warnPeer(sc, "bulk connection dropped: bad frame", "err", err)
		return false
	}
	var pbuf *[]byte
	var payload []byte
	var crc uint32
	if h.payloadLen > 0 {
		pbuf, crc, err = s.readBody(sc.br, int(h.payloadLen))
		defer func() { s.bufs.put(pbuf) }()
		if err != nil {
			s.warnPeer(sc, "bulk connection dropped inside a frame", "op", h.op.String(), "payload", h.payloadLen, "err", err)
			return false
		}
		payload = (*pbuf)[:h.payloadLen]
	}
	sc.nc.SetReadDeadline(time.Time{})
	s.requests.Add(1)
	if s.opts.InFlight != nil {
		s.opts.InFlight.Inc()
		defer s.opts.InFlight.Dec()
	}
	start := time.Now()
	n, keep, err := s.dispatch(sc, &h, ext, payload, crc)
	if s.opts.Observe != nil {
		s.opts.Observe(h.op, time.Since(start), n, err)
	}
	return keep
}

// dispatch handles one request whose payload has the CRC crc. It returns
// the payload bytes moved, whether the connection may go on, and the
// request's error (for Observe).
func (s *Server) dispatch(sc *serverConn, h *header, ext, payload []byte, crc uint32) (int, bool, error) {
	if h.flags&flagReply != 0 {
		return s.refuse(sc, h, "a reply frame was sent to the server")
	}
	if !sc.hello && h.op != OpHello {
		return s.refuse(sc, h, fmt.Sprintf("expected HELLO as the first frame, got %s", h.op))
	}
	if h.version != s.version {
		return s.refuse(sc, h, errno.VersionMismatch(strconv.Itoa(int(h.version)), int(s.version), "client", "server").Msg)
	}
	if h.payloadLen > 0 && crc != h.payloadCRC {
		s.crcErrors.Add(1)
		err := fmt.Errorf("%s object %s at %d: request payload CRC32C mismatch (%d bytes): %w", h.op, h.obj, h.off, len(payload), syscall.EIO)
		s.warnPeer(sc, "bulk payload corrupt", "op", h.op.String(), "object", h.obj.String(), "offset", h.off, "bytes", len(payload))
		return 0, s.replyErr(sc, h, syscall.EIO, "request payload CRC32C mismatch; data not stored"), err
	}
	if err := checkRequest(h, ext, payload); err != nil {
		return 0, s.replyErr(sc, h, syscall.EPROTO, err.Error()), err
	}
	switch h.op {
	case OpHello:
		return s.hello(sc, h, payload)
	case OpRead:
		buf := s.bufs.get(int(h.length))
		defer s.bufs.put(buf)
		var n int
		err := s.guard(func() (err error) {
			n, err = s.h.Read(h.obj, h.off, (*buf)[:h.length])
			if err == nil && (n < 0 || uint64(n) > h.length) {
				err = fmt.Errorf("handler read %d bytes into a %d-byte buffer: %w", n, h.length, syscall.EIO)
			}
			return err
		})
		if err != nil {
			return 0, s.replyHandlerErr(sc, h, err), err
		}
		return n, s.reply(sc, h, 0, uint64(n), 0, (*buf)[:n]), nil
	case OpWrite:
		meta, _ := optMeta(ext)
		err := s.guard(func() error { return s.h.Write(h.obj, h.off, payload, meta) })
		return s.done(sc, h, len(payload), err)
	case OpPunch:
		return s.done(sc, h, 0, s.guard(func() error { return s.h.Punch(h.obj, h.off, h.length) }))
	case OpTruncate:
		meta, _ := optMeta(ext)
		return s.done(sc, h, 0, s.guard(func() error { return s.h.Truncate(h.obj, h.off, meta) }))
	case OpGetAttr:
		var a ObjAttr
		err := s.guard(func() (err error) { a, err = s.h.GetAttr(h.obj); return err })
		if err != nil {
			return 0, s.replyHandlerErr(sc, h, err), err
		}
		a.put(sc.wbuf[HeaderSize:])
		return 0, s.reply(sc, h, 0, 0, attrSize, nil), nil
	case OpSync:
		return s.done(sc, h, 0, s.guard(func() error { return s.h.Sync(h.obj) }))
	case OpSetAttr:
		meta, _ := optMeta(ext)
		return s.done(sc, h, 0, s.guard(func() error { return s.h.SetAttr(h.obj, meta) }))
	}
	err := fmt.Errorf("unknown opcode %d: %w", uint8(h.op), syscall.ENOSYS)
	return 0, s.replyErr(sc, h, syscall.ENOSYS, fmt.Sprintf("unknown opcode %d", uint8(h.op))), err
}

// checkRequest checks the fields each op relies on. The frame has been read
// in full, so a bad request is answered and the connection goes on.
func checkRequest(h *header, ext, payload []byte) error {
	switch h.op {
	case OpHello:
		if len(payload) > maxFsname {
			return fmt.Errorf("HELLO names a file system of %d bytes, limit %d", len(payload), maxFsname)
		}
		return nil
	case OpWrite:
		if h.length != uint64(len(payload)) {
			return fmt.Errorf("WRITE length %d but payload of %d bytes", h.length, len(payload))
		}
	case OpRead:
		if h.length > MaxPayload {
			return fmt.Errorf("READ of %d bytes exceeds the %d-byte frame limit", h.length, MaxPayload)
		}
	}
	if h.op != OpWrite && h.op != OpHello && len(payload) != 0 {
		return fmt.Errorf("%s carries an unexpected payload of %d bytes", h.op, len(payload))
	}
	switch h.op {
	case OpWrite, OpTruncate:
		if len(ext) != 0 && len(ext) < metaSize {
			return fmt.Errorf("%s meta extension of %d bytes, want %d", h.op, len(ext), metaSize)
		}
	case OpSetAttr:
		if len(ext) < metaSize {
			return fmt.Errorf("SETATTR needs a meta extension of %d bytes, got %d", metaSize, len(ext))
		}
	}
	return nil
}

// optMeta decodes an optional meta extension (checked by checkRequest).
func optMeta(ext []byte) (*ObjMeta, error) {
	if len(ext) == 0 {
		return nil, nil
	}
	m, err := decodeMeta(ext)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

func (s *Server) hello(sc *serverConn, h *header, payload []byte) (int, bool, error) {
	if fs := string(payload); fs != "" && fs != s.opts.Fsname {
		return s.refuse(sc, h, fmt.Sprintf("client expects file system %q, but this server holds target %04x of file system %q",
			fs, s.opts.Index, s.opts.Fsname))
	}
	sc.hello = true
	rh := *h
	rh.off = uint64(s.opts.Index) // HELLO replies carry the target index in offset
	return 0, s.reply(sc, &rh, 0, 0, 0, []byte(s.opts.Fsname)), nil
}

// guard runs a handler call, turning a panic into EIO so that one bad
// request cannot take the server down.
func (s *Server) guard(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("bulk handler panicked", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("handler panicked: %v: %w", r, syscall.EIO)
		}
	}()
	return f()
}

func (s *Server) done(sc *serverConn, h *header, n int, err error) (int, bool, error) {
	if err != nil {
		return 0, s.replyHandlerErr(sc, h, err), err
	}
	return n, s.reply(sc, h, 0, s.opts.Epoch, 0, nil), nil
}

// refuse answers EPROTO with msg and ends the connection.
func (s *Server) refuse(sc *serverConn, h *header, msg string) (int, bool, error) {
	s.protoErrors.Add(1)
	s.warnPeer(sc, "bulk request refused", "op", h.op.String(), "reason", msg)
	s.replyErr(sc, h, syscall.EPROTO, msg)
	return 0, false, fmt.Errorf("%s: %w", msg, syscall.EPROTO)
}

// PublicError is a handler error with a message meant for the client
// (what is wrong and how to fix it, with no server-local paths), such as a
// target refusing writes when it is full.
type PublicError interface {
	error
	Public() string
}

// replyHandlerErr sends a handler error as its errno alone, or with its
// public message if it has one; the details (paths, causes) stay in the
// server's log.
func (s *Server) replyHandlerErr(sc *serverConn, h *header, err error) bool {
	e := errno.ToErrno(err)
	if e == 0 || e > 0xffff {
		e = syscall.EIO
	}
	lvl := slog.LevelWarn
	switch e {
	case syscall.ENOENT:
		// A dangling reference or a destroyed object: the client reports it.
		lvl = slog.LevelDebug
	case syscall.ENOSPC:
		// A full target refuses every write: a line each would fill the
		// log, which sits on that same full device. The client gets the
		// message, and the MDT logs when an OST becomes full.
		lvl = slog.LevelDebug
	}
	s.log.Log(context.Background(), lvl, "bulk request failed", "op", h.op.String(), "object", h.obj.String(), "offset", h.off, "err", err)
	if pe, ok := errors.AsType[PublicError](err); ok {
		return s.replyErr(sc, h, e, pe.Public())
	}
	return s.reply(sc, h, e, 0, 0, nil)
}

func (s *Server) replyErr(sc *serverConn, h *header, e syscall.Errno, msg string) bool {
	if len(msg) > maxMsg {
		msg = msg[:maxMsg]
	}
	return s.reply(sc, h, e, 0, 0, []byte(msg))
}

// reply sends a reply to h whose extension (extLen bytes) has been
// written to sc.wbuf[HeaderSize:]. It reports whether the write succeeded.
func (s *Server) reply(sc *serverConn, h *header, e syscall.Errno, length uint64, extLen int, payload []byte) bool {
	rh := header{
		version:    s.version,
		op:         h.op,
		flags:      flagReply,
		reqID:      h.reqID,
		obj:        h.obj,
		off:        h.off,
		length:     length,
		status:     uint16(e),
		payloadLen: uint32(len(payload)),
		payloadCRC: payloadCRC(payload),
	}
	if len(payload) > 0 && takeOne(&s.corruptCRC) {
		rh.payloadCRC ^= 1
	}
	frame := sc.wbuf[:HeaderSize+extLen]
	rh.put(frame)
	sc.nc.SetWriteDeadline(time.Now().Add(s.ioTimeout))
	var err error
	if len(payload) == 0 {
		_, err = sc.rw.Write(frame)
	} else {
		bufs := net.Buffers{frame, payload}
		_, err = bufs.WriteTo(sc.rw)
	}
	if err != nil {
		s.log.Debug("bulk reply not sent", "peer", sc.nc.RemoteAddr().String(), "op", h.op.String(), "err", err)
		return false
	}
	return true
}

// takeOne decrements a positive counter and reports whether it did.
func takeOne(c *atomic.Int32) bool {
	for {
		n := c.Load()
		if n <= 0 {
			return false
		}
		if c.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// warnPeer logs a warning about sc's peer, at most one line per peer per
// WarnEvery: a peer that sends garbage on every connection must not fill
// the log.
func (s *Server) warnPeer(sc *serverConn, msg string, args ...any) {
	s.warn.Warn(netguard.PeerIP(sc.nc.RemoteAddr()), msg, append(args, "remote", sc.nc.RemoteAddr().String())...)
}

// readBody reads a request payload of n bytes into a pooled buffer that
// grows a size class at a time as the bytes arrive: a header may claim
// MaxPayload, and a peer that sends one and stops must cost a 64 KiB
// buffer, not 4 MiB. Each class is four times the one before, so what
// is reserved stays within four times what has come, and the bytes
// copied growing are under a third of the payload. It returns the
// buffer (to put back in any case) and the payload's CRC32C.
func (s *Server) readBody(r io.Reader, n int) (*[]byte, uint32, error) {
	b := s.bufs.get(min(n, bufClasses[0]))
	var crc uint32
	got := 0
	for {
		end := min(n, cap(*b))
		var err error
		crc, err = readPayloadOn(r, (*b)[got:end], crc)
		if err != nil {
			return b, crc, err
		}
		got = end
		if got == n {
			return b, crc, nil
		}
		nb := s.bufs.get(min(n, 4*cap(*b)))
		copy(*nb, (*b)[:got])
		s.bufs.put(b)
		b = nb
	}
}

// bufClasses are the sizes of pooled payload buffers: a 1 MiB stripe
// chunk does not pin a 4 MiB buffer, and a payload whose bytes have not
// come yet does not pin a large one (readBody).
var bufClasses = [...]int{64 << 10, 256 << 10, 1 << 20, MaxPayload}

// bufPool recycles payload buffers, one pool per class. sync.Pool lets
// the collector take buffers back once they go unused, so a burst of
// connections leaves no memory pinned behind it.
type bufPool struct{ pools [len(bufClasses)]sync.Pool }

// get returns a buffer of the smallest class that holds n bytes.
func (p *bufPool) get(n int) *[]byte {
	for i, size := range bufClasses {
		if n <= size {
			if b, ok := p.pools[i].Get().(*[]byte); ok {
				return b
			}
			b := make([]byte, size)
			return &b
		}
	}
	b := make([]byte, n)
	return &b
}

func (p *bufPool) put(b *[]byte) {
	for i, size := range bufClasses {
		if cap(*b) == size {
			*b = (*b)[:size]
			p.pools[i].Put(b)
			return
		}
	}
}
