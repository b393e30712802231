package mds

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/ldlm"
	"nacre/internal/mdt"
	"nacre/internal/raftgroup"
)

// Services for mounted clients (api/services.proto's LDLM and OpenFiles,
// their messages in api/lock.proto): the lock manager and sessions
// (internal/ldlm), the open-file commands, and the reaper of
// open-unlinked orphans whose client is gone.

// OrphanGrace is how long the orphans of a client without a session are
// kept: long enough for a client to reconnect after an MDS restart or a
// network hiccup; Options.OrphanGrace overrides it (tests).
const OrphanGrace = 60 * time.Second

// clientServices maps a *Server to its *ldlm.Server.
var clientServices sync.Map

// openFiles implements the OpenFiles service.
type openFiles struct {
	nacregrpc.UnimplementedOpenFilesServer
	s *Server
}

// startClientServices registers the LDLM and OpenFiles services on g and
// starts the orphan reaper.
func (s *Server) startClientServices(g *grpc.Server, reg *prometheus.Registry) {
	lm := ldlm.NewServer(s.log, s.group.IsLeader, s.group.LeaderSince)
	lm.SetReplicated(s.group.Replicated)
	if reg != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nacre_ldlm_lookup_locks", Help: "Lookup locks on directories held by clients (LDLM.LookupLock).", ConstLabels: prometheus.Labels{"target": s.id.Name()}},
			func() float64 { return float64(lm.LookupLocks()) }))
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nacre_ldlm_lookup_revocations_total", Help: "Lookup locks taken back from their holders (another client changed the directory, or the checker repaired the namespace).", ConstLabels: prometheus.Labels{"target": s.id.Name()}},
			func() float64 { return float64(lm.LookupRevocations()) }))
	}
	clientServices.Store(s, lm)
	nacregrpc.RegisterLDLMServer(g, leaderOnlyLDLM{lm, s}) // sessions on the leader only (leadership.go)
	// Through the nodemaps (nodemap.go).
	nacregrpc.RegisterOpenFilesServer(g, servedOpenFiles{o: &openFiles{s: s}})
	s.orphanGrace, s.openGrace = grace(s.opts.OrphanGrace, OrphanGrace), grace(s.opts.OpenGrace, OpenGrace)
	s.wg.Add(3)
	go s.reapOrphans(lm, s.orphanGrace)
	go s.releaseShared(lm)
	go s.lookupLocksWhileSingle(lm)
}

// LDLM is the lock manager service (for tests and tools).
func (s *Server) LDLM() *ldlm.Server {
	v, _ := clientServices.Load(s)
	lm, _ := v.(*ldlm.Server)
	return lm
}

// Mutate proposes an open-file command, as MDS.Mutate does for the others.
func (o *openFiles) Mutate(ctx context.Context, cmd *pb.Command) (*pb.Reply, error) {
	s := o.s
	start := time.Now()
	if err := s.serving(); err != nil {
		return nil, err
	}
	if r, ok := s.t.ReplyFor(cmd.ClientId, cmd.RequestId); ok {
		return r, nil
	}
	if !s.group.IsLeader() {
		return nil, s.groupErr(&raftgroup.NotLeaderError{Leader: s.group.Leader()})
	}
	cmd.NowNs = time.Now().UnixNano()
	op := "internal"
	switch c := cmd.Op.(type) {
	case *pb.Command_OpenUnlink:
		op = "unlink"
		u := c.OpenUnlink.Unlink
		if u.GetTxid() != 0 || u.GetRemote() != nil {
			return nil, errno.Errorf(errno.InvalidArgument, "%s: a client's command may not carry a cross-MDT transaction", s.id.Label())
		}
		if f, remote := s.remoteDir(u); remote {
			// A remote directory: removed in a transaction with its
			// MDT, which keeps no orphan of it for this client.
			r, err := s.remoteRmdir(ctx, &pb.Command{ClientId: cmd.ClientId, RequestId: cmd.RequestId, AckedBelow: cmd.AckedBelow, Cred: cmd.Cred, NowNs: cmd.NowNs,
				Op: &pb.Command_Unlink{Unlink: u}}, u, f)
			if err == nil {
				s.m.observe("rmdir", start, r.Errno)
			}
			return r, err
		}
	case *pb.Command_OpenRename:
		op = "rename"
		if r := s.notHere(fid.FromPB(c.OpenRename.GetRename().GetDstParent()), "rename"); r != nil {
			return r, nil
		}
		rn := c.OpenRename.GetRename()
		if rn.GetTxid() != 0 || rn.GetRemote() != nil {
			return nil, errno.Errorf(errno.InvalidArgument, "%s: a client's command may not carry a cross-MDT transaction", s.id.Label())
		}
		if f, remote := s.remoteEntry(rn.GetSrcParent(), rn.GetSrcName()); remote {
			// A directory of another MDT: moved in a transaction with it
			// (what it replaces is refused, so no orphan is kept).
			r, err := s.remoteRename(ctx, &pb.Command{ClientId: cmd.ClientId, RequestId: cmd.RequestId, AckedBelow: cmd.AckedBelow, Cred: cmd.Cred, NowNs: cmd.NowNs,
				Op: &pb.Command_Rename{Rename: rn}}, rn, f)
			if err == nil {
				s.m.observe("rename", start, r.Errno)
			}
			return r, err
		}
		if c.OpenRename.GetRename().GetFlags()&renameWhiteout != 0 {
			if err := s.waitFIDs(ctx); err != nil {
				return nil, err
			}
		}
	case *pb.Command_OrphanRelease:
		op = "release"
		s.shareReleased(cmd)
	case *pb.Command_Tmpfile:
		op = "tmpfile"
		if err := s.admitSpace(cmd); err != nil {
			return nil, err
		}
		if err := s.waitFIDs(ctx); err != nil {
			return nil, err
		}
		osts, err := s.pickOSTs(ctx, c.Tmpfile.Layout)
		if err != nil {
			return nil, err
		}
		c.Tmpfile.Osts = osts
	default:
		return nil, errno.Errorf(errno.InvalidArgument, "%s: OpenFiles.Mutate does not take %T", s.id.Label(), cmd.Op)
	}
	if r := s.reservedName(cmd); r != nil {
		return r, nil
	}
	r, err := s.proposeRemoval(ctx, cmd, false)
	if err != nil {
		return nil, err
	}
	s.m.observe(op, start, r.Errno)
	return r, nil
}

// reapOrphans destroys, while leading, the open-unlinked orphans of
// clients that have had no session for the grace period. A new leader
// (or a restarted MDS) first waits a whole grace period, so clients can
// open their sessions again.
func (s *Server) reapOrphans(lm *ldlm.Server, grace time.Duration) {
	defer s.wg.Done()
	tick := time.NewTicker(max(grace/4, 50*time.Millisecond))
	defer tick.Stop()
	var leadingSince time.Time
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		if !s.group.IsLeader() {
			leadingSince = time.Time{}
			continue
		}
		now := time.Now()
		if leadingSince.IsZero() {
			leadingSince = now
		}
		if now.Sub(leadingSince) < grace {
			continue
		}
		orphans, err := s.t.Orphans(1024)
		if err != nil || len(orphans) == 0 {
			continue
		}
		var reap []*pb.FID
		for _, o := range orphans {
			if o.Client == mdt.SharedOrphanOwner {
				continue // releaseShared's
			}
			gone, since := lm.ClientGone(o.Client)
			if gone && now.Sub(since) >= grace {
				reap = append(reap, o.FID.PB())
			}
		}
		if len(reap) == 0 {
			continue
		}
		ctx, cancel := s.ctx(10 * time.Second)
		r, err := s.propose(ctx, &pb.Command{Op: &pb.Command_OrphanRelease{OrphanRelease: &pb.OrphanReleaseOp{Fids: reap}}})
		cancel()
		if err != nil || r.Errno != 0 {
			s.log.Warn("reap orphans of departed clients", "count", len(reap), "err", err, "reply", r)
			continue
		}
		s.log.Info("destroyed open-unlinked files of clients that are gone", "count", len(reap))
	}
}
