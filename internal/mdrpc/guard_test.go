package mdrpc

import (
	"context"
	"encoding/binary"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/version"
	"nacre/test/testlog"
	"nacre/test/testnet"
)

func startWith(t *testing.T, o ServerOptions) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.Fsname = "fs"
	s := Serve(ln, methods(), o)
	t.Cleanup(s.Close)
	return s
}

// helloHeader is the header of a hello request whose payload is n bytes.
func helloHeader(n uint32) []byte {
	b := make([]byte, HeaderSize)
	header{version: version.Protocol, code: MethodHello, id: 1, n: n}.put(b)
	return b
}

// TestHalfFrameTimesOut: a peer that sends part of a frame and stops
// loses its connection after FrameTimeout; one that sends nothing after
// IdleTimeout.
func TestHalfFrameTimesOut(t *testing.T) {
	const frameTimeout, idleTimeout = 200 * time.Millisecond, 1500 * time.Millisecond
	s := startWith(t, ServerOptions{FrameTimeout: frameTimeout, IdleTimeout: idleTimeout})
	for _, c := range []struct {
		name string
		sent []byte
		by   time.Duration
	}{
		{"half a header", helloHeader(2)[:HeaderSize/2], frameTimeout},
		{"a header and half its payload", append(helloHeader(1000), make([]byte, 500)...), frameTimeout},
		{"nothing", nil, idleTimeout},
	} {
		testnet.ExpectClosedAfter(t, s.Addr().String(), c.name, c.sent, c.by)
	}
}

// TestIdleConnectionsClosedByTheServerAreRedialled: a client whose pooled
// connections the server closed while idle calls without an error.
func TestIdleConnectionsClosedByTheServerAreRedialled(t *testing.T) {
	s := startWith(t, ServerOptions{IdleTimeout: 200 * time.Millisecond})
	c := Dial(s.Addr().String(), ClientOptions{})
	defer c.Close()
	// Several pooled connections: concurrent slow calls.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var r pb.Reply
			if err := c.Call(context.Background(), mSlow, &pb.LookupRequest{}, &r); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for s.Open() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.Open(); n > 0 {
		t.Fatalf("%d idle connections still open past IdleTimeout", n)
	}
	var r pb.Reply
	if err := c.Call(context.Background(), mEcho, &pb.LookupRequest{Name: []byte("again")}, &r); err != nil || r.Message != "again" {
		t.Fatalf("call after the server closed the idle connections: %v", err)
	}
}

// TestHeaderDoesNotReserveItsClaim: headers that claim MaxPayload and
// send a few bytes of it make the server allocate about what came, not
// what they claim.
func TestHeaderDoesNotReserveItsClaim(t *testing.T) {
	s := startWith(t, ServerOptions{})
	const conns = 16
	// A whole frame to finish one of them with, made before counting.
	// (Not a hello: the refusal of a call before hello is short.)
	full := frame(nil, header{version: version.Protocol, code: mEcho, id: 1}, make([]byte, MaxPayload))
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var ncs []net.Conn
	for range conns {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write(full[:HeaderSize+2])
		ncs = append(ncs, nc)
	}
	// The server has read the headers once it holds the connections in
	// their frames; give it a moment to reach the payload read.
	deadline := time.Now().Add(3 * time.Second)
	for s.Open() < conns && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	// 16 connections: their 64 KiB bufio readers and 64 KiB first
	// payload buffers are 2 MiB; reserving the claims would be 256 MiB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("%d connections whose headers claim %d bytes each made the server allocate %d MiB", conns, MaxPayload, got>>20)
	}
	// The frames still complete when their bytes come.
	nc := ncs[0]
	go nc.Write(full[HeaderSize+2:])
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	h, _, err := readFrame(nc, nil)
	if err != nil {
		t.Fatalf("reply to the completed frame: %v", err)
	}
	if h.code == 0 {
		t.Fatal("a call before hello was answered OK")
	}
}

// TestConnectionsPerPeerAreBounded: past MaxConnsPerPeer, connections of
// one peer are closed at once and counted; a slot freed is taken again.
func TestConnectionsPerPeerAreBounded(t *testing.T) {
	var logs testlog.Buffer
	s := startWith(t, ServerOptions{MaxConnsPerPeer: 3, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	var held []*Client
	for range 3 {
		c := Dial(s.Addr().String(), ClientOptions{})
		var r pb.Reply
		if err := c.Call(context.Background(), mEcho, &pb.LookupRequest{}, &r); err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	for range 5 {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(append(helloHeader(2), "fs"...))
		if !testnet.ClosedWithin(nc, 3*time.Second) {
			t.Fatal("a connection over the peer's bound is still open")
		}
		nc.Close()
	}
	if n := s.Refused(); n != 5 {
		t.Fatalf("refused %d connections, want 5", n)
	}
	if n := strings.Count(logs.String(), "connection refused"); n != 1 {
		t.Fatalf("%d log lines for 5 refusals of one peer within 10 s, want 1:\n%s", n, logs.String())
	}
	held[0].Close()
	c := Dial(s.Addr().String(), ClientOptions{})
	defer c.Close()
	var r pb.Reply
	deadline := time.Now().Add(3 * time.Second)
	for {
		err := c.Call(context.Background(), mEcho, &pb.LookupRequest{}, &r)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a connection in a freed slot: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range held[1:] {
		c.Close()
	}
}

// TestBadFramesAreLoggedOncePerPeer: a peer that sends garbage on many
// connections costs one warning per interval.
func TestBadFramesAreLoggedOncePerPeer(t *testing.T) {
	var logs testlog.Buffer
	s := startWith(t, ServerOptions{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	for range 20 {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(binary.LittleEndian.AppendUint32([]byte("GARBAGE GARBAGE GARBAGE!"), 0xffffffff))
		testnet.ClosedWithin(nc, 3*time.Second)
		nc.Close()
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d warnings for 20 bad connections of one peer, want 1:\n%s", n, logs.String())
	}
}
