package rpc

import (
	"context"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/version"
)

type mgsStub struct {
	nacregrpc.UnimplementedMGSServer
}

func (mgsStub) Hello(context.Context, *pb.HelloRequest) (*pb.HelloReply, error) {
	return &pb.HelloReply{Fsname: "x"}, nil
}

func serve(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := NewServer(nil)
	nacregrpc.RegisterMGSServer(g, mgsStub{})
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
	if !IsVersionMismatch(err) || !strings.Contains(err.Error(), "protocol 99") || !strings.Contains(err.Error(), fmt.Sprintf("protocol %d", version.Protocol)) {
		t.Fatalf("version 99: %v", err)
	}
}

func TestErrnoTable(t *testing.T) {
	for _, e := range []syscall.Errno{syscall.ENOENT, syscall.EEXIST, syscall.EACCES, syscall.ENOSPC, syscall.EINVAL} {
		if got := ToErrno(Status(e)); got != e {
			t.Errorf("%v -> %v -> %v", e, Status(e), got)
		}
	}
	if !Retryable(status.Error(codes.Unavailable, "x")) || Retryable(status.Error(codes.NotFound, "x")) {
		t.Error("Retryable")
	}
	if ToErrno(NewErrno("op", int32(syscall.ENOTEMPTY), "")) != syscall.ENOTEMPTY || NewErrno("op", 0, "") != nil {
		t.Error("NewErrno")
	}
}

func TestNotTheService(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unimplemented, "unknown service nacre.v1.MGS"), true},
		{status.Error(codes.Unavailable, `connection error: desc = "error reading server preface: http2: frame too large"`), true},
		{status.Error(codes.Unavailable, "connection refused"), false},
		{status.Error(codes.DeadlineExceeded, "context deadline exceeded"), false},
		{nil, false},
	} {
		if got := NotTheService(c.err); got != c.want {
			t.Errorf("NotTheService(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
