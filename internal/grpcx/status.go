package grpcx

import (
	"io"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
)

// toStatus is err as a server sends it: a status with err's code (the
// errno table's for a bare errno, Unknown for an error of no kind) and
// message, and a pb.Failure detail when err says who leads.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	e := errno.From(err)
	st := status.New(codes.Code(e.Code), e.Msg)
	if e.Leader != nil || e.Reason != "" {
		if d, derr := st.WithDetails(e.Failure()); derr == nil {
			st = d
		}
	}
	return st.Err()
}

// peerState is what a connection's dialer learnt of its server.
type peerState struct {
	// notGRPC: the server answered with something other than HTTP/2.
	notGRPC atomic.Bool
	// dialErr: why the last dial failed (nil after one that worked).
	dialErr atomic.Pointer[error]
}

// fromStatus is a call's error as callers see it: an *errno.Error with the
// status's code, message and detail. A call that failed because the
// server dialled is another kind of server is Unimplemented; one that
// failed because no connection could be made has the dial's error as
// its Cause.
func fromStatus(err error, peer *peerState) error {
	if err == nil || err == io.EOF {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, d := range st.Details() {
		if f, ok := d.(*pb.Failure); ok {
			return errno.FromFailure(f)
		}
	}
	e := errno.New(errno.Code(st.Code()), st.Message())
	if st.Code() == codes.Unavailable {
		if peer.notGRPC.Load() {
			return errno.Errorf(errno.Unimplemented, "the server answers, but not as a gRPC server (%s)", st.Message())
		}
		if p := peer.dialErr.Load(); p != nil {
			e.Cause = *p
		}
	}
	return e
}

// clientStream converts the errors of a client stream.
type clientStream struct {
	grpc.ClientStream
	peer *peerState
}

func (s clientStream) SendMsg(m any) error { return fromStatus(s.ClientStream.SendMsg(m), s.peer) }
func (s clientStream) RecvMsg(m any) error { return fromStatus(s.ClientStream.RecvMsg(m), s.peer) }
func (s clientStream) CloseSend() error    { return fromStatus(s.ClientStream.CloseSend(), s.peer) }

// sniffConn watches the first frame a server sends: an HTTP/2 server (every
// gRPC server) starts with a SETTINGS frame, whose type byte is the fourth
// of its header. Anything else is a server of another kind (an HTTP/1
// server, another protocol on the port), which gRPC only reports in words.
type sniffConn struct {
	net.Conn
	seen    int
	notGRPC *atomic.Bool
}

const http2Settings = 0x4

func (c *sniffConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if c.seen <= 3 && c.seen+n > 3 {
		c.notGRPC.Store(b[3-c.seen] != http2Settings)
	}
	c.seen += n
	return n, err
}
