package grpcx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/version"
)

type mgsStub struct {
	nacregrpc.UnimplementedMGSServer
	err error // what Hello fails with
}

func (m mgsStub) Hello(context.Context, *pb.HelloRequest) (*pb.HelloReply, error) {
	if m.err != nil {
		return nil, m.err
	}
	return &pb.HelloReply{Fsname: "x"}, nil
}

func serve(t *testing.T) string { return serveStub(t, mgsStub{}) }

func serveStub(t *testing.T, m mgsStub) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := NewServer(nil)
	nacregrpc.RegisterMGSServer(g, m)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

func TestMatchingVersionsTalk(t *testing.T) {
	cc, err := Dial(serve(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, err := nacregrpc.NewMGSClient(cc).Hello(context.Background(), &pb.HelloRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestOtherProtocolVersionRefusedNamingBoth(t *testing.T) {
	addr := serve(t)
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := nacregrpc.NewMGSClient(cc)
	_, err = c.Hello(context.Background(), &pb.HelloRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no Nacre protocol version") {
		t.Fatalf("peer without a version: %v", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), versionKey, "99")
	_, err = c.Hello(ctx, &pb.HelloRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "protocol 99") || !strings.Contains(err.Error(), fmt.Sprintf("protocol %d", version.Protocol)) {
		t.Fatalf("version 99: %v", err)
	}
}

// A server's errors reach the caller as the *errno.Error they were, the
// leader of a not-the-leader refusal included; a bare errno keeps its
// meaning through the table.
func TestErrorsCrossAsData(t *testing.T) {
	for _, c := range []struct {
		name   string
		sent   error
		code   errno.Code
		leader *errno.Leader
		errno  syscall.Errno
	}{
		{"not the leader", errno.NotLeader("MGS", 2, "127.0.0.1:7001"), errno.Unavailable, &errno.Leader{ID: 2, Addr: "127.0.0.1:7001"}, syscall.EIO},
		{"no leader known", errno.NotLeader("MGS", 0, ""), errno.Unavailable, &errno.Leader{}, syscall.EIO},
		{"coded", errno.New(errno.ResourceExhausted, "MDT0000 is full"), errno.ResourceExhausted, nil, syscall.ENOSPC},
		{"bare errno", fmt.Errorf("create: %w", syscall.EEXIST), errno.AlreadyExists, nil, syscall.EEXIST},
		{"no kind", errors.New("boom"), errno.Unknown, nil, syscall.EIO},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := serveStub(t, mgsStub{err: c.sent})
			cc, err := Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			_, err = nacregrpc.NewMGSClient(cc).Hello(context.Background(), &pb.HelloRequest{})
			var e *errno.Error
			if !errors.As(err, &e) {
				t.Fatalf("got %T %v, want an *errno.Error", err, err)
			}
			if e.Code != c.code || e.Msg != c.sent.Error() || errno.ToErrno(err) != c.errno {
				t.Errorf("got code %v msg %q errno %v, want %v %q %v", e.Code, e.Msg, errno.ToErrno(err), c.code, c.sent.Error(), c.errno)
			}
			l, ok := errno.LeaderOf(err)
			if ok != (c.leader != nil) || (ok && l != *c.leader) {
				t.Errorf("leader %+v %v, want %+v", l, ok, c.leader)
			}
		})
	}
}

// An address that answers with something other than gRPC (an HTTP
// server, another protocol) gives Unimplemented, not a connection error
// to retry, and a service the server lacks gives Unimplemented too.
func TestNotTheService(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
				io.Copy(io.Discard, c)
			}()
		}
	}()
	cc, err := Dial(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = nacregrpc.NewMGSClient(cc).Hello(ctx, &pb.HelloRequest{})
	if errno.CodeOf(err) != errno.Unimplemented {
		t.Errorf("an HTTP server: %v (code %v), want Unimplemented", err, errno.CodeOf(err))
	}

	cc2, err := Dial(serve(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cc2.Close()
	_, err = nacregrpc.NewOSSClient(cc2).Hello(ctx, &pb.HelloRequest{})
	if errno.CodeOf(err) != errno.Unimplemented {
		t.Errorf("a service not served: %v (code %v), want Unimplemented", err, errno.CodeOf(err))
	}

	refused, _ := net.Listen("tcp", "127.0.0.1:0")
	gone := refused.Addr().String()
	refused.Close()
	cc3, err := Dial(gone)
	if err != nil {
		t.Fatal(err)
	}
	defer cc3.Close()
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	_, err = nacregrpc.NewMGSClient(cc3).Hello(short, &pb.HelloRequest{})
	switch c := errno.CodeOf(err); {
	case c != errno.Unavailable && c != errno.DeadlineExceeded:
		t.Errorf("nothing listening: %v (code %v), want Unavailable or DeadlineExceeded", err, c)
	case c == errno.Unavailable && !errors.Is(err, syscall.ECONNREFUSED):
		// The dial's error is the Cause, for messages that name it.
		t.Errorf("nothing listening: %v (cause %v) does not say the connection was refused", err, errors.Unwrap(err))
	}
}
