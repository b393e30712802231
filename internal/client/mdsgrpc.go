package client

import (
	"context"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/mdrpc"
)

// grpcMDS calls the metadata service over gRPC, for a replica that
// advertises no metadata RPC address.
type grpcMDS struct{ c nacregrpc.MDSClient }

var _ mdrpc.MDSService = grpcMDS{}

func (g grpcMDS) Mutate(ctx context.Context, in *pb.Command) (*pb.Reply, error) {
	return g.c.Mutate(ctx, in)
}

func (g grpcMDS) Lookup(ctx context.Context, in *pb.LookupRequest) (*pb.Reply, error) {
	return g.c.Lookup(ctx, in)
}

func (g grpcMDS) Getattr(ctx context.Context, in *pb.GetattrRequest) (*pb.Reply, error) {
	return g.c.Getattr(ctx, in)
}

func (g grpcMDS) Readdir(ctx context.Context, in *pb.ReaddirRequest) (*pb.ReaddirReply, error) {
	return g.c.Readdir(ctx, in)
}

func (g grpcMDS) Getxattr(ctx context.Context, in *pb.XattrRequest) (*pb.XattrReply, error) {
	return g.c.Getxattr(ctx, in)
}

func (g grpcMDS) Listxattr(ctx context.Context, in *pb.XattrRequest) (*pb.XattrReply, error) {
	return g.c.Listxattr(ctx, in)
}

func (g grpcMDS) Fid2Path(ctx context.Context, in *pb.Fid2PathRequest) (*pb.Fid2PathReply, error) {
	return g.c.Fid2Path(ctx, in)
}

func (g grpcMDS) Statfs(ctx context.Context, in *pb.StatfsRequest) (*pb.StatfsReply, error) {
	return g.c.Statfs(ctx, in)
}

func (g grpcMDS) Sync(ctx context.Context, in *pb.SyncRequest) (*pb.SyncReply, error) {
	return g.c.Sync(ctx, in)
}

func (g grpcMDS) Replay(ctx context.Context, in *pb.ReplayRequest) (*pb.ReplayReply, error) {
	return g.c.Replay(ctx, in)
}
