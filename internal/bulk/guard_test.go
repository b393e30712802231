package bulk

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"nacre/internal/version"
	"nacre/test/testlog"
	"nacre/test/testnet"
	"nacre/test/wait"
)

// TestHalfFrameTimesOut: a peer that sends part of a frame and stops
// loses its connection after IOTimeout; one that sends nothing after
// IdleTimeout.
func TestHalfFrameTimesOut(t *testing.T) {
	const ioTimeout, idleTimeout = 200 * time.Millisecond, 1500 * time.Millisecond
	s, _ := serve(t, newMem(objA), ServerOptions{IOTimeout: ioTimeout, IdleTimeout: idleTimeout}, ClientOptions{})
	hello := frame(header{version: version.Protocol, op: OpHello, reqID: 1}, nil, []byte("testfs"))
	write := frame(header{version: version.Protocol, op: OpWrite, reqID: 2, obj: objA, length: 1 << 20}, nil, make([]byte, 1<<20))
	for _, c := range []struct {
		name string
		sent []byte
		by   time.Duration
	}{
		{"half a header", hello[:HeaderSize/2], ioTimeout},
		{"a header and half its payload", append(append([]byte{}, hello...), write[:HeaderSize+1<<19]...), ioTimeout},
		{"nothing", nil, idleTimeout},
	} {
		testnet.ExpectClosedAfter(t, s.Addr().String(), c.name, c.sent, c.by)
	}
}

// TestIdleConnectionsClosedByTheServerAreRedialled: a client whose pooled
// connections the server closed while idle calls without an error.
func TestIdleConnectionsClosedByTheServerAreRedialled(t *testing.T) {
	s, c := serve(t, newMem(objA), ServerOptions{IdleTimeout: 200 * time.Millisecond}, ClientOptions{})
	ctx := ctxT(t)
	if err := c.Write(ctx, objA, 0, []byte("before"), nil); err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the server to close the idle connection", func() bool { return s.Stats().Open == 0 })
	p := make([]byte, 6)
	if n, err := c.Read(ctx, objA, 0, p); err != nil || string(p[:n]) != "before" {
		t.Fatalf("read after the server closed the idle connection: %q %v", p[:n], err)
	}
}

// TestHeaderDoesNotReserveItsClaim: valid headers that claim MaxPayload
// and send a few bytes of it make the server allocate about what came,
// not what they claim.
func TestHeaderDoesNotReserveItsClaim(t *testing.T) {
	s, _ := serve(t, newMem(objA), ServerOptions{}, ClientOptions{})
	const conns = 16
	hello := frame(header{version: version.Protocol, op: OpHello, reqID: 1}, nil, []byte("testfs"))
	// A whole frame to finish one of them with, made before counting.
	write := frame(header{version: version.Protocol, op: OpWrite, reqID: 2, obj: objA, length: MaxPayload}, nil, make([]byte, MaxPayload))
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var ncs []net.Conn
	for range conns {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write(hello)
		nc.Write(write[:HeaderSize+100])
		ncs = append(ncs, nc)
	}
	wait.For(t, 5*time.Second, "the server to read the headers", func() bool { return s.Stats().Requests >= conns })
	time.Sleep(200 * time.Millisecond)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// 16 connections: their 32 KiB readers and 64 KiB first payload
	// buffers are 1.5 MiB; reserving the claims would be 64 MiB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 12<<20 {
		t.Fatalf("%d connections whose headers claim %d bytes each made the server allocate %d MiB", conns, MaxPayload, got>>20)
	}
	// A frame still completes when its bytes come, through every size
	// class.
	nc := ncs[0]
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { nc.Write(write[HeaderSize+100:]) })
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var rb [HeaderSize + MaxExt]byte
	for range 2 { // the hello's reply, then the write's
		h, _, err := readHeader(nc, rb[:])
		if err == nil && h.payloadLen > 0 {
			_, err = io.CopyN(io.Discard, nc, int64(h.payloadLen))
		}
		if err != nil || h.status != 0 {
			t.Fatalf("reply to the completed frames: status %d, %v", h.status, err)
		}
	}
	if s.Stats().CRCErrors != 0 {
		t.Fatal("the payload grown over several buffers failed its CRC")
	}
}

// TestConnectionsPerPeerAreBounded: past MaxConnsPerPeer, connections of
// one peer are closed at once, counted and logged once; a slot freed is
// taken again.
func TestConnectionsPerPeerAreBounded(t *testing.T) {
	var logs testlog.Buffer
	s, _ := serve(t, newMem(objA), ServerOptions{MaxConnsPerPeer: 3, Log: slog.New(slog.NewTextHandler(&logs, nil))}, ClientOptions{})
	var held []*rawConn
	for range 3 {
		r := dialRaw(t, s.Addr().String())
		r.hello("")
		held = append(held, r)
	}
	for range 5 {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if !testnet.ClosedWithin(nc, 3*time.Second) {
			t.Fatal("a connection over the peer's bound is still open")
		}
		nc.Close()
	}
	if n := s.Stats().Refused; n != 5 {
		t.Fatalf("refused %d connections, want 5", n)
	}
	if n := strings.Count(logs.String(), "connection refused"); n != 1 {
		t.Fatalf("%d log lines for 5 refusals of one peer within 10 s, want 1:\n%s", n, logs.String())
	}
	held[0].nc.Close()
	wait.For(t, 5*time.Second, "the closed connection's slot", func() bool { return s.Stats().Open == 2 })
	r := dialRaw(t, s.Addr().String())
	r.hello("")
}

// TestBadFramesAreLoggedOncePerPeer: a peer that sends garbage on many
// connections costs one warning per interval, which counts the others.
func TestBadFramesAreLoggedOncePerPeer(t *testing.T) {
	var logs testlog.Buffer
	s, _ := serve(t, newMem(objA), ServerOptions{Log: slog.New(slog.NewTextHandler(&logs, nil)), WarnEvery: 300 * time.Millisecond}, ClientOptions{})
	bad := func(n int) {
		for range n {
			nc, err := net.Dial("tcp", s.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			nc.Write(bytes.Repeat([]byte{0xff}, HeaderSize))
			testnet.ClosedWithin(nc, 3*time.Second)
			nc.Close()
		}
	}
	bad(20)
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings for 20 bad connections of one peer, want 1:\n%s", n, logs.String())
	}
	time.Sleep(300 * time.Millisecond)
	bad(1)
	if out := logs.String(); strings.Count(out, "level=WARN") != 2 || !strings.Contains(out, "suppressed=19") {
		t.Fatalf("after the interval: want a second warning counting 19 suppressed:\n%s", out)
	}
}
