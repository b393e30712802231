package mdrpc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/version"
)

const (
	mEcho uint16 = 1 + iota
	mFail
	mSlow
	mPanic
	mNotLeader
)

func methods() map[uint16]Method {
	return map[uint16]Method{
		mEcho: Handle(func(ctx context.Context, r *pb.LookupRequest) (*pb.Reply, error) {
			return &pb.Reply{Message: string(r.Name)}, nil
		}),
		mFail: Handle(func(ctx context.Context, r *pb.LookupRequest) (*pb.Reply, error) {
			return nil, errno.Errorf(errno.NotFound, "no %s", r.Name)
		}),
		mSlow: Handle(func(ctx context.Context, r *pb.LookupRequest) (*pb.Reply, error) {
			time.Sleep(300 * time.Millisecond)
			return &pb.Reply{}, nil
		}),
		mPanic: Handle(func(ctx context.Context, r *pb.LookupRequest) (*pb.Reply, error) {
			panic("boom")
		}),
		mNotLeader: Handle(func(ctx context.Context, r *pb.LookupRequest) (*pb.Reply, error) {
			return nil, fmt.Errorf("lookup: %w", errno.NotLeader("MDT0000", 2, "127.0.0.1:7001"))
		}),
	}
}

func start(t *testing.T, fsname string) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, methods(), ServerOptions{Fsname: fsname})
	t.Cleanup(s.Close)
	return s
}

func TestCallsRoundTripConcurrently(t *testing.T) {
	s := start(t, "fs")
	c := Dial(s.Addr().String(), ClientOptions{Fsname: "fs"})
	defer c.Close()
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				name := strings.Repeat("x", w*37+i)
				var r pb.Reply
				if err := c.Call(context.Background(), mEcho, &pb.LookupRequest{Name: []byte(name)}, &r); err != nil || r.Message != name {
					t.Errorf("echo %d/%d: %q %v", w, i, r.Message, err)
					return
				}
			}
		}(w)
	}
	wg.Wait()
}

func TestErrorsKeepTheirCode(t *testing.T) {
	s := start(t, "fs")
	c := Dial(s.Addr().String(), ClientOptions{})
	defer c.Close()
	var r pb.Reply
	err := c.Call(context.Background(), mFail, &pb.LookupRequest{Name: []byte("a")}, &r)
	if errno.CodeOf(err) != errno.NotFound || !strings.Contains(err.Error(), "no a") {
		t.Fatalf("got %v", err)
	}
	err = c.Call(context.Background(), 99, &pb.LookupRequest{}, &r)
	if errno.CodeOf(err) != errno.Unimplemented {
		t.Fatalf("unknown method: %v", err)
	}
	err = c.Call(context.Background(), mPanic, &pb.LookupRequest{}, &r)
	if errno.CodeOf(err) != errno.Internal {
		t.Fatalf("panic: %v", err)
	}
	// A not-the-leader refusal, wrapped by the handler, reaches the
	// caller as data: the leader to follow, and a call to retry.
	err = c.Call(context.Background(), mNotLeader, &pb.LookupRequest{}, &r)
	if l, ok := errno.LeaderOf(err); !ok || l != (errno.Leader{ID: 2, Addr: "127.0.0.1:7001"}) || !errno.Retryable(err) ||
		!strings.HasPrefix(err.Error(), "lookup: MDT0000: not the leader") {
		t.Fatalf("not the leader: %v (leader %+v, %v)", err, l, ok)
	}
	// The connection survives handler errors.
	if err := c.Call(context.Background(), mEcho, &pb.LookupRequest{Name: []byte("ok")}, &r); err != nil {
		t.Fatal(err)
	}
}

func TestWrongFileSystemAndVersionRefused(t *testing.T) {
	s := start(t, "alpha")
	c := Dial(s.Addr().String(), ClientOptions{Fsname: "beta"})
	defer c.Close()
	var r pb.Reply
	err := c.Call(context.Background(), mEcho, &pb.LookupRequest{}, &r)
	if errno.CodeOf(err) != errno.FailedPrecondition || !strings.Contains(err.Error(), `"alpha"`) || !strings.Contains(err.Error(), `"beta"`) {
		t.Fatalf("other fsname: %v", err)
	}
	// A raw peer speaking another protocol version.
	nc, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write(frame(nil, header{version: version.Protocol + 1, code: MethodHello, id: 1}, nil))
	h, body, err := readFrame(bufio.NewReader(nc), nil)
	if err != nil || errno.Code(h.code) != errno.FailedPrecondition || !strings.Contains(string(body), "protocol") {
		t.Fatalf("other version: code %d %q %v", h.code, body, err)
	}
}

func TestGarbageAndCorruptFramesDropTheConnection(t *testing.T) {
	s := start(t, "fs")
	for _, raw := range [][]byte{
		[]byte("GET / HTTP/1.1\r\n\r\n........"),
		func() []byte {
			b := frame(nil, header{version: version.Protocol, code: MethodHello, id: 1}, []byte("fs"))
			b[len(b)-1] ^= 0xff // payload CRC no longer matches
			return b
		}(),
	} {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(raw)
		nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		var ne net.Error
		if _, _, err := readFrame(bufio.NewReader(nc), nil); err == nil {
			t.Fatalf("server answered a bad frame %q", raw[:8])
		} else if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("server kept a connection that sent garbage")
		}
		nc.Close()
	}
	// The server still serves.
	c := Dial(s.Addr().String(), ClientOptions{})
	defer c.Close()
	var r pb.Reply
	if err := c.Call(context.Background(), mEcho, &pb.LookupRequest{Name: []byte("x")}, &r); err != nil {
		t.Fatal(err)
	}
}

func TestCancellationAndDeadline(t *testing.T) {
	s := start(t, "fs")
	c := Dial(s.Addr().String(), ClientOptions{})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	var r pb.Reply
	start := time.Now()
	err := c.Call(ctx, mSlow, &pb.LookupRequest{}, &r)
	if errno.CodeOf(err) != errno.DeadlineExceeded || time.Since(start) > 250*time.Millisecond {
		t.Fatalf("deadline: %v after %v", err, time.Since(start))
	}
	// The next call works on a fresh connection.
	if err := c.Call(context.Background(), mEcho, &pb.LookupRequest{Name: []byte("y")}, &r); err != nil || r.Message != "y" {
		t.Fatal(err)
	}
}

func TestServerRestartIsUnavailableThenReconnects(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	s := Serve(ln, methods(), ServerOptions{})
	c := Dial(addr, ClientOptions{})
	defer c.Close()
	var r pb.Reply
	if err := c.Call(context.Background(), mEcho, &pb.LookupRequest{}, &r); err != nil {
		t.Fatal(err)
	}
	s.Close()
	err := c.Call(context.Background(), mEcho, &pb.LookupRequest{}, &r)
	if errno.CodeOf(err) != errno.Unavailable {
		t.Fatalf("server down: %v", err)
	}
	ln2, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port taken meanwhile: %v", err)
	}
	s2 := Serve(ln2, methods(), ServerOptions{})
	defer s2.Close()
	if err := c.Call(context.Background(), mEcho, &pb.LookupRequest{Name: []byte("back")}, &r); err != nil || r.Message != "back" {
		t.Fatalf("after restart: %v", err)
	}
}

func FuzzReadFrame(f *testing.F) {
	f.Add(frame(nil, header{version: 1, code: 2, id: 3}, []byte("payload")))
	f.Add([]byte("NCRM"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, body, err := readFrame(strings.NewReader(string(b)), nil)
		if err == nil && (len(body) != int(h.n) || h.n > MaxPayload) {
			t.Fatalf("accepted inconsistent frame %+v", h)
		}
	})
}

func BenchmarkCall(b *testing.B) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	s := Serve(ln, methods(), ServerOptions{})
	defer s.Close()
	c := Dial(ln.Addr().String(), ClientOptions{})
	defer c.Close()
	req := &pb.LookupRequest{Name: []byte("some-file-name")}
	var r pb.Reply
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := c.Call(context.Background(), mEcho, req, &r); err != nil {
			b.Fatal(err)
		}
	}
	_ = proto.Size(&r)
}
