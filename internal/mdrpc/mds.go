package mdrpc

import (
	"context"
	"crypto/tls"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
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
	MethodSync
	MethodReplay
)

// Opener is the MDS's record of the files clients have open
// (OpenFiles.Opens), served here too: a mount calls it at every first open.
type Opener interface {
	Opens(context.Context, *pb.OpensRequest) (*pb.OpensReply, error)
}

// MDSService is the metadata service (api/services.proto's MDS) as this
// RPC carries it, without gRPC's call options: the MDS serves it, MDS
// calls it, and the client library calls it over this RPC or gRPC alike.
type MDSService interface {
	Mutate(context.Context, *pb.Command) (*pb.Reply, error)
	Lookup(context.Context, *pb.LookupRequest) (*pb.Reply, error)
	Getattr(context.Context, *pb.GetattrRequest) (*pb.Reply, error)
	Readdir(context.Context, *pb.ReaddirRequest) (*pb.ReaddirReply, error)
	Getxattr(context.Context, *pb.XattrRequest) (*pb.XattrReply, error)
	Listxattr(context.Context, *pb.XattrRequest) (*pb.XattrReply, error)
	Fid2Path(context.Context, *pb.Fid2PathRequest) (*pb.Fid2PathReply, error)
	Statfs(context.Context, *pb.StatfsRequest) (*pb.StatfsReply, error)
	Sync(context.Context, *pb.SyncRequest) (*pb.SyncReply, error)
	Replay(context.Context, *pb.ReplayRequest) (*pb.ReplayReply, error)
}

// MDSMethods is the server table for s (with Opens if s is an Opener).
func MDSMethods(s MDSService) map[uint16]Method {
	m := map[uint16]Method{
		MethodMutate:    Handle(s.Mutate),
		MethodLookup:    Handle(s.Lookup),
		MethodGetattr:   Handle(s.Getattr),
		MethodReaddir:   Handle(s.Readdir),
		MethodGetxattr:  Handle(s.Getxattr),
		MethodListxattr: Handle(s.Listxattr),
		MethodFid2Path:  Handle(s.Fid2Path),
		MethodStatfs:    Handle(s.Statfs),
		MethodSync:      Handle(s.Sync),
		MethodReplay:    Handle(s.Replay),
	}
	if o, ok := s.(Opener); ok {
		m[MethodOpens] = Handle(o.Opens)
	}
	return m
}

// MDS calls the metadata service of one server over this RPC.
type MDS struct{ c *Client }

var _ MDSService = (*MDS)(nil)

// NewMDS calls the MDS whose framed RPC listens on addr, over TLS with
// tc if it is not nil.
func NewMDS(addr, fsname string, tc *tls.Config) *MDS {
	return &MDS{c: Dial(addr, ClientOptions{Fsname: fsname, TLS: tc})}
}

// Close drops the connections.
func (c *MDS) Close() error { return c.c.Close() }

func call[Resp any, PResp interface {
	*Resp
	proto.Message
}](ctx context.Context, c *Client, m uint16, req proto.Message) (PResp, error) {
	resp := PResp(new(Resp))
	if err := c.Call(ctx, m, req, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

func (c *MDS) Mutate(ctx context.Context, in *pb.Command) (*pb.Reply, error) {
	return call[pb.Reply](ctx, c.c, MethodMutate, in)
}

func (c *MDS) Lookup(ctx context.Context, in *pb.LookupRequest) (*pb.Reply, error) {
	return call[pb.Reply](ctx, c.c, MethodLookup, in)
}

func (c *MDS) Getattr(ctx context.Context, in *pb.GetattrRequest) (*pb.Reply, error) {
	return call[pb.Reply](ctx, c.c, MethodGetattr, in)
}

func (c *MDS) Readdir(ctx context.Context, in *pb.ReaddirRequest) (*pb.ReaddirReply, error) {
	return call[pb.ReaddirReply](ctx, c.c, MethodReaddir, in)
}

func (c *MDS) Getxattr(ctx context.Context, in *pb.XattrRequest) (*pb.XattrReply, error) {
	return call[pb.XattrReply](ctx, c.c, MethodGetxattr, in)
}

func (c *MDS) Listxattr(ctx context.Context, in *pb.XattrRequest) (*pb.XattrReply, error) {
	return call[pb.XattrReply](ctx, c.c, MethodListxattr, in)
}

func (c *MDS) Fid2Path(ctx context.Context, in *pb.Fid2PathRequest) (*pb.Fid2PathReply, error) {
	return call[pb.Fid2PathReply](ctx, c.c, MethodFid2Path, in)
}

func (c *MDS) Statfs(ctx context.Context, in *pb.StatfsRequest) (*pb.StatfsReply, error) {
	return call[pb.StatfsReply](ctx, c.c, MethodStatfs, in)
}

// Opens is OpenFiles.Opens over framed RPC.
func (c *MDS) Opens(ctx context.Context, in *pb.OpensRequest) (*pb.OpensReply, error) {
	return call[pb.OpensReply](ctx, c.c, MethodOpens, in)
}

func (c *MDS) Sync(ctx context.Context, in *pb.SyncRequest) (*pb.SyncReply, error) {
	return call[pb.SyncReply](ctx, c.c, MethodSync, in)
}

func (c *MDS) Replay(ctx context.Context, in *pb.ReplayRequest) (*pb.ReplayReply, error) {
	return call[pb.ReplayReply](ctx, c.c, MethodReplay, in)
}
