// Package mdsapi binds the metadata service (api/mds.proto) to the framed
// RPC of internal/frpc: the method ids, the server-side table that
// dispatches to a nacrepb.MDSServer, and a nacrepb.MDSClient that the
// client library uses instead of gRPC on the metadata hot path.
package mdsapi

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "nacre/api/nacrepb"
	"nacre/internal/frpc"
)

// Method ids; never renumber, only append.
const (
	MethodMutate uint16 = 1 + iota
	MethodLookup
	MethodGetattr
	MethodReaddir
	MethodGetxattr
	MethodListxattr
	MethodFid2Path
	MethodStatfs
	MethodOpens
)

// Opener is the MDS's record of the files clients have open
// (OpenFiles.Opens), served here too: a mount calls it at every first open.
type Opener interface {
	Opens(context.Context, *pb.OpensRequest) (*pb.OpensReply, error)
}

// Methods is the server table for s (with Opens if s is an Opener).
func Methods(s pb.MDSServer) map[uint16]frpc.Method {
	m := map[uint16]frpc.Method{
		MethodMutate:    frpc.Handle(s.Mutate),
		MethodLookup:    frpc.Handle(s.Lookup),
		MethodGetattr:   frpc.Handle(s.Getattr),
		MethodReaddir:   frpc.Handle(s.Readdir),
		MethodGetxattr:  frpc.Handle(s.Getxattr),
		MethodListxattr: frpc.Handle(s.Listxattr),
		MethodFid2Path:  frpc.Handle(s.Fid2Path),
		MethodStatfs:    frpc.Handle(s.Statfs),
	}
	if o, ok := s.(Opener); ok {
		m[MethodOpens] = frpc.Handle(o.Opens)
	}
	return m
}

// Client is a nacrepb.MDSClient over framed RPC.
type Client struct{ c *frpc.Client }

var _ pb.MDSClient = (*Client)(nil)

// NewClient calls the MDS whose framed RPC listens on addr.
func NewClient(addr, fsname string) *Client {
	return &Client{c: frpc.Dial(addr, frpc.ClientOptions{Fsname: fsname})}
}

// Close drops the connections.
func (c *Client) Close() error { return c.c.Close() }

func call[Resp any, PResp interface {
	*Resp
	protoMessage
}](ctx context.Context, c *frpc.Client, m uint16, req protoMessage) (PResp, error) {
	resp := PResp(new(Resp))
	if err := c.Call(ctx, m, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *Client) Hello(ctx context.Context, in *pb.HelloRequest, _ ...grpc.CallOption) (*pb.HelloReply, error) {
	return &pb.HelloReply{}, nil
}

func (c *Client) Mutate(ctx context.Context, in *pb.Command, _ ...grpc.CallOption) (*pb.Reply, error) {
	return call[pb.Reply](ctx, c.c, MethodMutate, in)
}

func (c *Client) Lookup(ctx context.Context, in *pb.LookupRequest, _ ...grpc.CallOption) (*pb.Reply, error) {
	return call[pb.Reply](ctx, c.c, MethodLookup, in)
}

func (c *Client) Getattr(ctx context.Context, in *pb.GetattrRequest, _ ...grpc.CallOption) (*pb.Reply, error) {
	return call[pb.Reply](ctx, c.c, MethodGetattr, in)
}

func (c *Client) Readdir(ctx context.Context, in *pb.ReaddirRequest, _ ...grpc.CallOption) (*pb.ReaddirReply, error) {
	return call[pb.ReaddirReply](ctx, c.c, MethodReaddir, in)
}

func (c *Client) Getxattr(ctx context.Context, in *pb.XattrRequest, _ ...grpc.CallOption) (*pb.XattrReply, error) {
	return call[pb.XattrReply](ctx, c.c, MethodGetxattr, in)
}

func (c *Client) Listxattr(ctx context.Context, in *pb.XattrRequest, _ ...grpc.CallOption) (*pb.XattrReply, error) {
	return call[pb.XattrReply](ctx, c.c, MethodListxattr, in)
}

func (c *Client) Fid2Path(ctx context.Context, in *pb.Fid2PathRequest, _ ...grpc.CallOption) (*pb.Fid2PathReply, error) {
	return call[pb.Fid2PathReply](ctx, c.c, MethodFid2Path, in)
}

func (c *Client) Statfs(ctx context.Context, in *pb.StatfsRequest, _ ...grpc.CallOption) (*pb.StatfsReply, error) {
	return call[pb.StatfsReply](ctx, c.c, MethodStatfs, in)
}

// Opens is OpenFiles.Opens over framed RPC.
func (c *Client) Opens(ctx context.Context, in *pb.OpensRequest) (*pb.OpensReply, error) {
	return call[pb.OpensReply](ctx, c.c, MethodOpens, in)
}

type protoMessage = interface {
	ProtoReflect() protoreflect.Message
}
