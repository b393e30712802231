package mgs

import (
	"context"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/grpcx"
	"nacre/internal/kv"
	"nacre/internal/nodemap"
	"nacre/internal/pki"
	"nacre/internal/raftgroup"
)

// Nodemaps (internal/nodemap, Lustre's nodemap): how the MDSs map the ids
// of each client certificate's requests. They are part of the replicated
// configuration, changed by NodemapSet and NodemapRemove (the admin role:
// grpcx's methodRole) through the MGS's log, so that every replica holds
// the same and a restart keeps them. GetConfig hands them all to the
// callers with a node certificate (the MDSs, which read it every second)
// and to every other caller the one that applies to it.

func nodemapKey(client string) []byte {
	return append(append([]byte(nil), pfxNodemap...), client...)
}

// loadNodemaps reads the nodemaps from the store (callers hold s.mu).
func (s *Server) loadNodemaps() error {
	s.nodemaps = map[string]*pb.Nodemap{}
	it, err := s.cfg.DB.NewIter(pfxNodemap, kv.PrefixEnd(pfxNodemap))
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		e := &pb.Nodemap{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return fmt.Errorf("MGS store: corrupt nodemap record %q: %w", it.Key(), err)
		}
		s.nodemaps[e.Client] = e
	}
	return it.Error()
}

func (s *Server) applyNodemapSet(b *kv.Batch, e *pb.Nodemap) result {
	e = proto.Clone(e).(*pb.Nodemap)
	nodemap.Normalize(e)
	if err := nodemap.Check(e); err != nil {
		return result{err: errno.New(errno.InvalidArgument, err.Error())}
	}
	b.Set(nodemapKey(e.Client), mustMarshal(e))
	s.nodemaps[e.Client] = e
	return result{}
}

func (s *Server) applyNodemapRemove(b *kv.Batch, r *pb.NodemapRemoveRequest) result {
	if _, ok := s.nodemaps[r.Client]; !ok {
		return result{err: noNodemap(r.Client)}
	}
	b.Delete(nodemapKey(r.Client))
	delete(s.nodemaps, r.Client)
	return result{}
}

func noNodemap(client string) error {
	return errno.Errorf(errno.NotFound, "no nodemap for client %q (`nacre nodemap` lists them)", client)
}

// nodemapList is every nodemap, by client name (callers hold s.mu).
func (s *Server) nodemapList() []*pb.Nodemap {
	out := make([]*pb.Nodemap, 0, len(s.nodemaps))
	for _, e := range s.nodemaps {
		out = append(out, proto.Clone(e).(*pb.Nodemap))
	}
	slices.SortFunc(out, func(a, b *pb.Nodemap) int { return strings.Compare(a.Client, b.Client) })
	return out
}

// needTLS refuses the nodemap calls of an MGS without TLS: its clients
// present no certificate, so there is no name to map.
func (s *Server) needTLS() error {
	if s.cfg.TLS != nil {
		return nil
	}
	return errno.New(errno.FailedPrecondition, "this cluster has no TLS: its clients present no certificate, so there is no client name for a nodemap to map. "+
		"Format the cluster with TLS (nacre up --tls; nacre format --tls-dir CA_DIR for every target) and give each client its certificate (nacre cert add --client NAME)")
}

// NodemapSet adds the nodemap of a client certificate, or replaces it.
func (s *Server) NodemapSet(ctx context.Context, e *pb.Nodemap) (*pb.NodemapReply, error) {
	if err := s.needTLS(); err != nil {
		return nil, err
	}
	var fwd *pb.NodemapReply
	if local, err := s.route(ctx, func(c nacregrpc.MGSClient, ctx context.Context) (err error) { fwd, err = c.NodemapSet(ctx, e); return }); !local {
		return fwd, err
	}
	n := proto.Clone(e).(*pb.Nodemap)
	nodemap.Normalize(n)
	if err := nodemap.Check(n); err != nil {
		return nil, errno.New(errno.InvalidArgument, err.Error())
	}
	if _, err := s.propose(ctx, &pb.MGSCommand{Op: &pb.MGSCommand_NodemapSet{NodemapSet: n}}); err != nil {
		return nil, err
	}
	s.log.Info("nodemap set", "client", n.Client, "squash_root", n.SquashRoot, "squash", fmt.Sprintf("%d:%d", n.SquashUid, n.SquashGid),
		"trusted", n.Trusted, "uid_map", nodemap.FormatIDMap(n.UidMap), "gid_map", nodemap.FormatIDMap(n.GidMap), "deny_unknown", n.DenyUnknown,
		"by", pki.Describe(grpcx.PeerCert(ctx)))
	return s.nodemapReply(), nil
}

// NodemapRemove removes the nodemap of a client certificate.
func (s *Server) NodemapRemove(ctx context.Context, r *pb.NodemapRemoveRequest) (*pb.NodemapReply, error) {
	if err := s.needTLS(); err != nil {
		return nil, err
	}
	var fwd *pb.NodemapReply
	if local, err := s.route(ctx, func(c nacregrpc.MGSClient, ctx context.Context) (err error) {
		fwd, err = c.NodemapRemove(ctx, r)
		return
	}); !local {
		return fwd, err
	}
	if _, err := s.propose(ctx, &pb.MGSCommand{Op: &pb.MGSCommand_NodemapRemove{NodemapRemove: r}}); err != nil {
		return nil, err
	}
	s.log.Info("nodemap removed", "client", r.Client, "by", pki.Describe(grpcx.PeerCert(ctx)))
	return s.nodemapReply(), nil
}

// NodemapList lists every nodemap.
func (s *Server) NodemapList(ctx context.Context, r *pb.NodemapListRequest) (*pb.NodemapReply, error) {
	if err := s.needTLS(); err != nil {
		return nil, err
	}
	var fwd *pb.NodemapReply
	if local, err := s.route(ctx, func(c nacregrpc.MGSClient, ctx context.Context) (err error) { fwd, err = c.NodemapList(ctx, r); return }); !local {
		return fwd, err
	}
	if err := s.group.Read(ctx); err != nil {
		return nil, raftgroup.GroupErr("MGS", err)
	}
	return s.nodemapReply(), nil
}

func (s *Server) nodemapReply() *pb.NodemapReply {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &pb.NodemapReply{Nodemaps: s.nodemapList()}
}

// shapeConfig leaves in a GetConfig reply what the caller with cert may
// see of the nodemaps: all of them for a node (out holds them all, from
// this replica or from the leader it forwarded to), else the one that
// applies to it, if any.
func shapeConfig(out *pb.ClusterConfig, cert *x509.Certificate) {
	out.Nodemap = nil
	if m := nodemap.NewSet(out.Nodemaps).For(cert); m != nil {
		out.Nodemap = proto.Clone(m.Nodemap()).(*pb.Nodemap)
	}
	if pki.RoleOf(cert) != pki.RoleNode {
		out.Nodemaps = nil
	}
}
