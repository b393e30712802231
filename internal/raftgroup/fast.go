package raftgroup

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/netguard"
	"nacre/internal/pki"
)

// The fast path for raft messages.
//
// A round trip of raft messages over the gRPC stream (sender goroutine,
// HTTP/2 framing and gRPC's writer goroutine on one side, gRPC's reader
// goroutine and the stream handler on the other) is most of a replicated
// commit's overhead over a single replica. So messages travel over plain
// TCP connections instead, on the same port as gRPC: a process
// that calls GRPCTransport.Listener serves both on one listener, telling
// the protocols apart by the first bytes a client sends (gRPC's HTTP/2
// preface, or fastPreface). Snapshots and the RaftAdmin service stay on
// gRPC, and a peer that does not answer the preface is reached over the
// gRPC stream, as before.
//
// The loop hands a Ready's messages to the transport one batch per
// replica (Group.flushOut, GRPCTransport.SendBatch); while nothing is
// queued for that replica, it writes the batch itself as one frame
// instead of waking the sender goroutine: fewer write system calls and
// goroutine wake-ups per metadata operation (docs/benchmarks.md,
// replicated metadata, has the server CPU per operation).
//
// The protocol: the dialling side sends fastPreface, the accepting side
// answers fastPreface, and from then on the dialling side sends frames,
// one per RaftBatch, and the accepting side sends nothing:
//
//	0 4  payload length (little endian, at most maxFastFrame)
//	4 4  CRC-32C of the payload
//	8 -  payload: a nacrepb.RaftBatch
//
// With TLS (WithTLS), both sides start TLS right after the prefaces,
// and the accepting side takes frames only from a peer holding a node
// certificate: the prefaces carry nothing, the frames everything.
//
// Nothing is acknowledged: raft tolerates loss, and a broken connection
// is reported to raft as the peer being unreachable, as with the stream.

const (
	fastPreface  = "NRAFT01\n"
	maxFastFrame = 64 << 20
	sniffTimeout = 5 * time.Second
	// fastFrameTimeout bounds receiving one frame once its first byte
	// has arrived.
	fastFrameTimeout = 30 * time.Second
)

var errNoFastPath = errors.New("peer does not speak the raft fast path")

// Listener makes t serve the raft fast path on ln, which the caller's
// gRPC server keeps serving through the returned listener (use it in
// place of ln). From then on t sends messages to its peers over the fast
// path.
func (t *GRPCTransport) Listener(ln net.Listener) net.Listener {
	s := &splitListener{Listener: ln, t: t, conns: make(chan net.Conn), done: make(chan struct{})}
	t.fast.Store(true)
	go s.acceptLoop()
	return s
}

// splitListener hands gRPC connections to Accept and keeps the fast ones.
type splitListener struct {
	net.Listener
	t     *GRPCTransport
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	err   error
}

func (s *splitListener) acceptLoop() {
	for {
		c, err := s.Listener.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.closeWith(err)
			return
		}
		go s.sniff(c)
	}
}

func (s *splitListener) sniff(c net.Conn) {
	buf := make([]byte, len(fastPreface))
	c.SetReadDeadline(time.Now().Add(sniffTimeout))
	n, err := io.ReadFull(c, buf)
	c.SetReadDeadline(time.Time{})
	if err == nil && string(buf) == fastPreface {
		s.t.serveFast(c)
		return
	}
	if n == 0 && err != nil {
		c.Close()
		return
	}
	select {
	case s.conns <- &prefixConn{Conn: c, prefix: buf[:n]}:
	case <-s.done:
		c.Close()
	}
}

func (s *splitListener) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case <-s.done:
		return nil, s.err
	}
}

func (s *splitListener) Close() error {
	err := s.Listener.Close()
	s.closeWith(net.ErrClosed)
	return err
}

// closeWith ends Accept with err (the first one wins).
func (s *splitListener) closeWith(err error) {
	s.once.Do(func() {
		s.err = err
		close(s.done)
	})
}

// prefixConn replays the bytes read while sniffing.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// serveFast receives frames on an accepted fast connection until it
// breaks or the transport closes.
func (t *GRPCTransport) serveFast(c net.Conn) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		c.Close()
		return
	}
	t.fastIn[c] = struct{}{}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.fastIn, c)
		t.mu.Unlock()
		c.Close()
	}()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if _, err := c.Write([]byte(fastPreface)); err != nil {
		return
	}
	var rw net.Conn = c // what frames are read from: c, or TLS over it
	if t.creds != nil {
		tc, err := pki.Accept(c, t.creds.ServerConfig(), pki.HandshakeTimeout)
		if err == nil {
			err = pki.Need(pki.PeerCert(tc.ConnectionState()), pki.RoleNode, "the raft fast path")
		}
		if err != nil {
			t.log.Warn("raft fast path: connection refused", "remote", c.RemoteAddr().String(), "err", err)
			return
		}
		// The deferred close of c ends tc too.
		rw = tc
	}
	r := bufio.NewReaderSize(rw, 256<<10)
	var hdr [8]byte
	var buf []byte
	for {
		// Idle between frames for as long as the peer likes (a follower
		// without traffic); once a frame starts, it comes whole within
		// fastFrameTimeout, or the connection ends.
		c.SetReadDeadline(time.Time{})
		if _, err := r.Peek(1); err != nil {
			return
		}
		c.SetReadDeadline(time.Now().Add(fastFrameTimeout))
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		n := binary.LittleEndian.Uint32(hdr[:4])
		if n > maxFastFrame {
			t.log.Warn("raft fast path: oversized frame; closing", "bytes", n, "from", c.RemoteAddr())
			return
		}
		// The buffer grows as the bytes arrive: a length alone must not
		// reserve up to 64 MiB.
		var err error
		if buf, err = netguard.ReadGrowing(r, buf, int(n)); err != nil {
			return
		}
		if crc32.Checksum(buf, crcTable) != binary.LittleEndian.Uint32(hdr[4:]) {
			t.log.Warn("raft fast path: frame checksum mismatch; closing", "from", c.RemoteAddr())
			return
		}
		if fault.Hit(FaultIsolate) != nil {
			continue
		}
		b := &nacrepb.RaftBatch{}
		if err := proto.Unmarshal(buf, b); err != nil {
			t.log.Warn("raft fast path: undecodable batch dropped", "err", err)
			continue
		}
		t.deliver(b)
	}
}

// fastConn is the dialling side of a fast connection. The accepting side
// never sends after its preface, so a read returns only when the
// connection ends: a goroutine waits for that and marks the connection
// dead. Without it a peer that restarted would be noticed only by the
// second write after its death (the first one succeeds locally and is
// lost), which could cost an election a whole timeout.
type fastConn struct {
	c    net.Conn
	buf  []byte
	dead atomic.Bool
}

func (f *fastConn) watch() {
	var b [1]byte
	f.c.Read(b[:])
	f.dead.Store(true)
	f.c.Close()
}

// dialFast opens a fast connection to addr, over TLS with creds if not
// nil.
func dialFast(addr string, creds *pki.Creds) (*fastConn, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte(fastPreface)); err != nil {
		c.Close()
		return nil, err
	}
	reply := make([]byte, len(fastPreface))
	if _, err := io.ReadFull(c, reply); err != nil || !bytes.Equal(reply, []byte(fastPreface)) {
		c.Close()
		return nil, fmt.Errorf("%w (%v)", errNoFastPath, err)
	}
	c.SetDeadline(time.Time{})
	if creds != nil {
		tc, err := pki.Connect(context.Background(), c, creds.ClientConfig(), 3*time.Second)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("raft fast path to %s: TLS handshake: %w", addr, err)
		}
		c = tc
	}
	f := &fastConn{c: c}
	go f.watch()
	return f, nil
}

// send writes one batch as one frame, in one write, within d.
func (f *fastConn) send(b *nacrepb.RaftBatch, d time.Duration) error {
	f.buf = append(f.buf[:0], make([]byte, 8)...)
	var err error
	f.buf, err = proto.MarshalOptions{}.MarshalAppend(f.buf, b)
	if err != nil {
		return err
	}
	p := f.buf[8:]
	binary.LittleEndian.PutUint32(f.buf[:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(f.buf[4:8], crc32.Checksum(p, crcTable))
	f.c.SetWriteDeadline(time.Now().Add(d))
	_, err = f.c.Write(f.buf)
	if cap(f.buf) > 8<<20 {
		f.buf = nil // do not pin a large buffer
	}
	return err
}

func (f *fastConn) close() { f.c.Close() }
