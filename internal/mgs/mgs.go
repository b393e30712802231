// Package mgs is the management server: it records the cluster's targets
// and their addresses, tracks their health from heartbeats, serves the
// cluster configuration to clients and servers, and is the sequence
// controller that grants FID sequence ranges to MDTs and keeps the FID
// location database (FLD: sequence range -> MDT).
//
// The configuration (registry, sequence controller, FLD, nodemaps) is a
// replicated state machine on a Raft group (state.go): one replica by
// default, three for high availability. Store keys (pebble; the Raft log
// and the store's identity live under "\x00"):
//
//	"t/" kind(1) index(4) [replica(8)]  registered nacrepb.TargetInfo
//	"seq/next"                          next sequence to grant (u64)
//	"fld/" start(8)                     nacrepb.SeqRange
//	"nm/" client name                   nacrepb.Nodemap (nodemap.go)
//	"m/applied"                         the last applied Raft index
//
// Every call is served by the leader: a follower forwards it (as a Consul
// server forwards to its leader), so that clients and targets may name
// any replica, or all of them ("a,b,c", internal/grpcx.Dial). Health (last
// heartbeat, space, which replica of each group leads) lives in the
// leader's memory only: after an MGS restart or leader change every
// target counts as up for DownAfter while heartbeats arrive again.
package mgs

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/grpcx"
	"nacre/internal/kv"
	"nacre/internal/pki"
	"nacre/internal/raftgroup"
	"nacre/internal/target"
	"nacre/internal/version"
)

// DownAfter is how long without a heartbeat makes a target "down".
const DownAfter = 5 * time.Second

// Config configures the MGS.
type Config struct {
	ID  target.Identity
	DB  *kv.DB
	Log *slog.Logger
	Reg *prometheus.Registry
	// Self describes the MGS itself in GetConfig (addresses, pid) when
	// it is not replicated (replicas register themselves instead).
	Self *pb.TargetInfo
	Now  func() time.Time
	// Group starts the MGS's Raft group over the state machine it is
	// given (internal/server builds it).
	Group func(sm raftgroup.StateMachine) (*raftgroup.Group, error)
	// TLS, if set, are the credentials a replica dials its leader with.
	TLS *pki.Creds
}

// Server is the MGS service.
type Server struct {
	nacregrpc.UnimplementedMGSServer
	cfg   Config
	log   *slog.Logger
	group *raftgroup.Group

	mu      sync.Mutex
	targets map[string]*entry // by key; replicated, plus health
	health  map[string]*entry // health kept across a snapshot install
	nextSeq uint64
	fld     []*pb.SeqRange
	applied uint64
	// nodemaps by client name (nodemap.go); replicated.
	nodemaps map[string]*pb.Nodemap

	leading   bool      // this replica led at the last call
	leadSince time.Time // since when

	fwdMu   sync.Mutex
	fwdAddr string
	fwdConn *grpc.ClientConn

	upGauge *prometheus.GaugeVec
}

type entry struct {
	info *pb.TargetInfo
	h    health
	uuid string // keepHealth only
}

type health struct {
	lastHeard  time.Time
	statfs     *pb.Statfs
	leader     bool
	term       uint64
	role       string
	recovering string
}

// New loads the MGS state from its store and starts its Raft group.
func New(cfg Config) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Group == nil {
		return nil, fmt.Errorf("mgs: Config.Group is nil")
	}
	s := &Server{cfg: cfg, log: cfg.Log}
	s.mu.Lock()
	err := s.load()
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if cfg.Reg != nil {
		s.upGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nacre_mgs_target_up", Help: "1 if the target heartbeats, else 0."}, []string{"target"})
		cfg.Reg.MustRegister(s.upGauge)
	}
	g, err := cfg.Group(sm{s})
	if err != nil {
		return nil, fmt.Errorf("start the MGS raft group: %w", err)
	}
	s.group = g
	return s, nil
}

// Group is the MGS's Raft group.
func (s *Server) Group() *raftgroup.Group { return s.group }

// IsLeader reports whether this replica leads the MGS group.
func (s *Server) IsLeader() bool { return s.group.IsLeader() }

// Stop stops the Raft group and drops the connection to the leader.
func (s *Server) Stop() {
	s.group.Stop()
	s.fwdMu.Lock()
	if s.fwdConn != nil {
		s.fwdConn.Close()
		s.fwdConn = nil
	}
	s.fwdMu.Unlock()
}

// Attach registers the service on a gRPC server.
func (s *Server) Attach(g *grpc.Server) { nacregrpc.RegisterMGSServer(g, s) }

func (s *Server) Hello(ctx context.Context, r *pb.HelloRequest) (*pb.HelloReply, error) {
	if r.Fsname != "" && r.Fsname != s.cfg.ID.Fsname {
		return nil, errno.Errorf(errno.FailedPrecondition, "this MGS serves file system %q, not %q", s.cfg.ID.Fsname, r.Fsname)
	}
	return &pb.HelloReply{ProtocolVersion: version.Protocol, Fsname: s.cfg.ID.Fsname, Kind: pb.TargetKind_TARGET_MGS, Uuid: s.cfg.ID.UUID}, nil
}

func label(kind pb.TargetKind, index uint32) string {
	switch kind {
	case pb.TargetKind_TARGET_MDT:
		return fmt.Sprintf("MDT%04x", index)
	case pb.TargetKind_TARGET_OST:
		return fmt.Sprintf("OST%04x", index)
	}
	return "MGS"
}

// forwardedKey marks a call a follower passed on to the leader, which
// must not be passed on again.
const forwardedKey = "nacre-mgs-forwarded"

// route decides where a call is served: it returns local=true when this
// replica leads (noting since when), and otherwise forwards the call with
// f to the leader, retrying while an election is under way or the leader
// it knew is gone, for up to 5 s.
func (s *Server) route(ctx context.Context, f func(c nacregrpc.MGSClient, ctx context.Context) error) (local bool, err error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(forwardedKey)) > 0 {
		if s.isLeading() {
			return true, nil
		}
		// Forwarded by a replica that thought this one leads: let it
		// look again rather than forwarding in circles.
		return false, errno.NotLeader("MGS", s.group.Leader(), s.group.LeaderAddr())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s.isLeading() {
			return true, nil
		}
		c, err := s.leaderClient()
		if err == nil {
			err = f(c, metadata.AppendToOutgoingContext(ctx, forwardedKey, "1"))
			if errno.CodeOf(err) != errno.Unavailable {
				return false, err
			}
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return false, err
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return false, errno.From(ctx.Err())
		case <-t.C:
		}
	}
}

func (s *Server) isLeading() bool {
	leading := s.group.IsLeader()
	s.mu.Lock()
	if leading && !s.leading {
		s.leadSince = s.cfg.Now()
	}
	s.leading = leading
	s.mu.Unlock()
	return leading
}

// leaderClient is a client of the leader the group knows of.
func (s *Server) leaderClient() (nacregrpc.MGSClient, error) {
	addr := s.group.LeaderAddr()
	if addr == "" {
		return nil, errno.NotLeader("MGS", 0, "")
	}
	s.fwdMu.Lock()
	defer s.fwdMu.Unlock()
	if s.fwdAddr != addr || s.fwdConn == nil {
		if s.fwdConn != nil {
			s.fwdConn.Close()
		}
		cc, err := grpcx.Dial(addr, grpcx.WithTLS(s.cfg.TLS))
		if err != nil {
			return nil, errno.Errorf(errno.Unavailable, "MGS: dial the leader at %s: %v", addr, err)
		}
		s.fwdAddr, s.fwdConn = addr, cc
	}
	return nacregrpc.NewMGSClient(s.fwdConn), nil
}

// propose runs a command through the MGS's log (leader only).
func (s *Server) propose(ctx context.Context, cmd *pb.MGSCommand) (result, error) {
	cmd.NowNs = s.cfg.Now().UnixNano()
	data, err := proto.Marshal(cmd)
	if err != nil {
		return result{}, errno.Errorf(errno.Internal, "encode MGS command: %v", err)
	}
	v, err := s.group.Propose(ctx, data)
	if err != nil {
		return result{}, raftgroup.GroupErr("MGS", err)
	}
	r, _ := v.(result)
	return r, r.err
}

// Register records a target's addresses; targets call it when they start.
func (s *Server) Register(ctx context.Context, ti *pb.TargetInfo) (*pb.RegisterReply, error) {
	var fwd *pb.RegisterReply
	if local, err := s.route(ctx, func(c nacregrpc.MGSClient, ctx context.Context) (err error) { fwd, err = c.Register(ctx, ti); return }); !local {
		return fwd, err
	}
	if ti.Fsname != s.cfg.ID.Fsname {
		return nil, errno.Errorf(errno.FailedPrecondition, "%s belongs to file system %q but this MGS serves %q; point it at the right MGS: mgs_node in its directory's nacre-target.json (nacre format --mgsnode)",
			label(ti.Kind, ti.Index), ti.Fsname, s.cfg.ID.Fsname)
	}
	key := string(targetKey(ti.Kind, ti.Index, ti.ReplicaId))
	if err := s.servedElsewhere(key, ti); err != nil {
		return nil, err
	}
	if _, err := s.propose(ctx, &pb.MGSCommand{Op: &pb.MGSCommand_Register{Register: ti}}); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if e := s.targets[key]; e != nil {
		e.h = health{lastHeard: s.cfg.Now(), leader: ti.Leader}
	}
	s.mu.Unlock()
	what := label(ti.Kind, ti.Index)
	if ti.ReplicaId != 0 {
		what += fmt.Sprintf(" replica %d", ti.ReplicaId)
	}
	s.log.Info("target registered", "registered", what, "addr", ti.Addr, "data_addr", ti.DataAddr, "pid", ti.Pid)
	return &pb.RegisterReply{Fsname: s.cfg.ID.Fsname}, nil
}

// servedElsewhere refuses the registration ti of a target that another
// process, at another address, still serves: it heartbeated within
// DownAfter. Two processes of one target are a copy of its directory
// started beside it (same uuid); clients would write into whichever
// registered last, and the data would be lost with it. A target that
// moved to a new address registers once its old process has been silent
// for DownAfter (the Registrar retries Aborted that long).
func (s *Server) servedElsewhere(key string, ti *pb.TargetInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.targets[key]
	if e == nil || e.info.Uuid != ti.Uuid || e.info.Addr == ti.Addr {
		return nil // another uuid: the registry refuses it (two formats of one index)
	}
	now := s.cfg.Now()
	heard, since := e.h.lastHeard, "heard from "
	if s.leadSince.After(heard) && now.Sub(s.leadSince) < DownAfter {
		// Heartbeats go to the leader only: a new leader has not heard
		// from the targets yet (or last did when it led before), and
		// gives each one DownAfter to be heard from, as GetConfig does,
		// before it lets another process take its place.
		heard, since = s.leadSince, "not heard from since this MGS began to lead "
	}
	if heard.IsZero() {
		return nil
	}
	ago := now.Sub(heard)
	if ago >= DownAfter {
		return nil
	}
	what := label(ti.Kind, ti.Index)
	if ti.ReplicaId != 0 {
		what += fmt.Sprintf(" replica %d", ti.ReplicaId)
	}
	return errno.Errorf(errno.Aborted, "%s is already served at %s (pid %d on %s, %s%s ago); this process at %s would take its place: "+
		"was its directory copied? Stop one of the two (a target that moved registers once the old process has been silent for %s)",
		what, e.info.Addr, e.info.Pid, e.info.Host, since, ago.Round(time.Millisecond), ti.Addr, DownAfter)
}

// Deregister forgets a replica that left its group.
func (s *Server) Deregister(ctx context.Context, r *pb.DeregisterRequest) (*pb.RegisterReply, error) {
	var fwd *pb.RegisterReply
	if local, err := s.route(ctx, func(c nacregrpc.MGSClient, ctx context.Context) (err error) { fwd, err = c.Deregister(ctx, r); return }); !local {
		return fwd, err
	}
	if _, err := s.propose(ctx, &pb.MGSCommand{Op: &pb.MGSCommand_Deregister{Deregister: r}}); err != nil {
		return nil, err
	}
	s.log.Info("replica deregistered", "target", label(r.Kind, r.Index), "replica", r.ReplicaId)
	return &pb.RegisterReply{Fsname: s.cfg.ID.Fsname}, nil
}

func (s *Server) Heartbeat(ctx context.Context, r *pb.HeartbeatRequest) (*pb.HeartbeatReply, error) {
	var fwd *pb.HeartbeatReply
	if local, err := s.route(ctx, func(c nacregrpc.MGSClient, ctx context.Context) (err error) { fwd, err = c.Heartbeat(ctx, r); return }); !local {
		return fwd, err
	}
	key := string(targetKey(r.Kind, r.Index, r.ReplicaId))
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.targets[key]
	if !ok || e.info.Uuid != r.Uuid {
		return nil, errno.Errorf(errno.NotFound, "%s is not registered with this MGS; register first", label(r.Kind, r.Index))
	}
	if r.Addr != "" && r.Addr != e.info.Addr {
		// Another process of this target registered since (it moved, or
		// a copy of its directory took its place): this one must
		// register again, which servedElsewhere refuses while that one
		// lives.
		return nil, errno.Errorf(errno.NotFound, "%s is registered at %s, not at %s; register again", label(r.Kind, r.Index), e.info.Addr, r.Addr)
	}
	e.h = health{lastHeard: s.cfg.Now(), statfs: r.Statfs, leader: r.Leader, term: r.Term, role: r.Role, recovering: r.Recovering}
	return &pb.HeartbeatReply{MgsAddrs: s.mgsAddrsLocked()}, nil
}

// mgsAddrsLocked lists the addresses of the MGS replicas, by replica id
// (none for an MGS that is not replicated): the group's members as its
// configuration has them, else those registered. Not those registered
// alone: during a start, the replicas registered so far may be the
// leader alone, and targets that followed that list lost the MGS with
// it. s.mu is held.
func (s *Server) mgsAddrsLocked() []string {
	if s.group != nil && s.group.Replicated() {
		if addrs := s.group.MemberAddrs(); len(addrs) > 0 {
			return addrs
		}
	}
	var reps []*pb.TargetInfo
	for _, e := range s.targets {
		if e.info.Kind == pb.TargetKind_TARGET_MGS && e.info.ReplicaId != 0 && e.info.Addr != "" {
			reps = append(reps, e.info)
		}
	}
	slices.SortFunc(reps, func(a, b *pb.TargetInfo) int { return cmp.Compare(a.ReplicaId, b.ReplicaId) })
	out := make([]string, 0, len(reps))
	for _, ti := range reps {
		out = append(out, ti.Addr)
	}
	return out
}

// GetConfig returns every target with its state.
func (s *Server) GetConfig(ctx context.Context, req *pb.GetConfigRequest) (*pb.ClusterConfig, error) {
	var fwd *pb.ClusterConfig
	if local, err := s.route(ctx, func(c nacregrpc.MGSClient, ctx context.Context) (err error) { fwd, err = c.GetConfig(ctx, req); return }); !local {
		if err == nil {
			shapeConfig(fwd, grpcx.PeerCert(ctx)) // the leader saw this replica's certificate
		}
		return fwd, err
	}
	// Every registration and grant acknowledged before this call is in
	// the answer.
	if err := s.group.Read(ctx); err != nil {
		return nil, raftgroup.GroupErr("MGS", err)
	}
	now := s.cfg.Now()
	out := &pb.ClusterConfig{Fsname: s.cfg.ID.Fsname, NowNs: now.UnixNano()}
	s.mu.Lock()
	defer s.mu.Unlock()
	out.MgsAddrs = s.mgsAddrsLocked()
	keys := make([]string, 0, len(s.targets))
	replicatedMGS := false
	for k, e := range s.targets {
		keys = append(keys, k)
		replicatedMGS = replicatedMGS || e.info.Kind == pb.TargetKind_TARGET_MGS
	}
	sort.Strings(keys)
	if s.cfg.Self != nil && !replicatedMGS {
		self := proto.Clone(s.cfg.Self).(*pb.TargetInfo)
		self.State, self.LastHeardNs, self.Leader = "up", now.UnixNano(), true
		out.Targets = append(out.Targets, self)
	}
	for _, k := range keys {
		e := s.targets[k]
		ti := proto.Clone(e.info).(*pb.TargetInfo)
		ti.State = "down"
		heard := e.h.lastHeard
		if heard.IsZero() && now.Sub(s.leadSince) < DownAfter {
			// New leader: give every target one DownAfter to heartbeat.
			heard = s.leadSince
			ti.Unheard = true
		}
		if !heard.IsZero() {
			ti.LastHeardNs = heard.UnixNano()
			if now.Sub(heard) < DownAfter {
				ti.State = "up"
			}
		}
		ti.Statfs = e.h.statfs
		ti.Leader = e.h.leader
		ti.Role = e.h.role
		if ti.State == "up" {
			ti.Recovering = e.h.recovering
		}
		if ti.Kind == pb.TargetKind_TARGET_MGS {
			ti.Leader = ti.ReplicaId == s.group.Leader()
		}
		if s.upGauge != nil {
			v := 0.0
			if ti.State == "up" {
				v = 1
			}
			name := label(ti.Kind, ti.Index)
			if ti.ReplicaId != 0 {
				name += fmt.Sprintf("-r%d", ti.ReplicaId)
			}
			s.upGauge.WithLabelValues(name).Set(v)
		}
		out.Targets = append(out.Targets, ti)
	}
	// A replica that was deposed (or died) claims to lead until its next
	// heartbeat or until it is down: of several claims for one target,
	// only the highest term's stands.
	type group struct {
		kind  pb.TargetKind
		index uint32
	}
	best := map[group]uint64{}
	for _, k := range keys {
		if e := s.targets[k]; e.h.leader && e.info.Kind != pb.TargetKind_TARGET_MGS {
			g := group{e.info.Kind, e.info.Index}
			best[g] = max(best[g], e.h.term)
		}
	}
	for _, ti := range out.Targets {
		if ti.Leader && ti.Kind != pb.TargetKind_TARGET_MGS {
			if e := s.targets[string(targetKey(ti.Kind, ti.Index, ti.ReplicaId))]; e != nil && (e.h.term < best[group{ti.Kind, ti.Index}] || ti.State != "up") {
				ti.Leader = false
			}
		}
	}
	for _, r := range s.fld {
		out.Fld = append(out.Fld, proto.Clone(r).(*pb.SeqRange))
	}
	out.Nodemaps = s.nodemapList()
	shapeConfig(out, grpcx.PeerCert(ctx))
	return out, nil
}

// AllocSeqRange grants count sequences to an MDT; the grant is in the
// replicated log before the reply, so no sequence is ever granted twice.
func (s *Server) AllocSeqRange(ctx context.Context, r *pb.AllocSeqRangeRequest) (*pb.SeqRange, error) {
	if r.Count == 0 || r.Count > 1<<20 {
		return nil, errno.Errorf(errno.InvalidArgument, "sequence count %d out of range (1..%d)", r.Count, 1<<20)
	}
	var fwd *pb.SeqRange
	if local, err := s.route(ctx, func(c nacregrpc.MGSClient, ctx context.Context) (err error) {
		fwd, err = c.AllocSeqRange(ctx, r)
		return
	}); !local {
		return fwd, err
	}
	res, err := s.propose(ctx, &pb.MGSCommand{Op: &pb.MGSCommand_AllocSeq{AllocSeq: r}})
	if err != nil {
		return nil, err
	}
	g := res.grant
	s.log.Info("sequence range granted", "mdt", r.Mdt, "start", fmt.Sprintf("%#x", g.Start), "end", fmt.Sprintf("%#x", g.End))
	return g, nil
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

// SelfInfo describes the MGS for GetConfig.
func SelfInfo(id target.Identity, addr, metrics, dir string) *pb.TargetInfo {
	host, _ := os.Hostname()
	return &pb.TargetInfo{
		Kind: pb.TargetKind_TARGET_MGS, Fsname: id.Fsname, Uuid: id.UUID, Addr: addr, MetricsAddr: metrics,
		Pid: int64(os.Getpid()), Host: host, ProtocolVersion: version.Protocol, Dir: dir,
	}
}
