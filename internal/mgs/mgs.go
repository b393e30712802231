// Package mgs is the management server: it records the cluster's targets
// and their addresses, tracks their health from heartbeats, serves the
// cluster configuration to clients and servers, and is the sequence
// controller that grants FID sequence ranges to MDTs and keeps the FID
// location database (FLD: sequence range -> MDT).
//
// Store keys (pebble, synced on every change):
//
//	"t/" kind(1) index(4)   registered nacrepb.TargetInfo
//	"seq/next"              next sequence to grant (u64)
//	"fld/" start(8)         nacrepb.SeqRange
//
// Health (last heartbeat, space) lives in memory only: after an MGS
// restart every target is "down" until it heartbeats again, a second later.
package mgs

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
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
	// Self describes the MGS itself in GetConfig (addresses, pid).
	Self *pb.TargetInfo
	Now  func() time.Time
}

// Server is the MGS service.
type Server struct {
	pb.UnimplementedMGSServer
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	targets map[string]*entry // by key
	nextSeq uint64
	fld     []*pb.SeqRange

	upGauge *prometheus.GaugeVec
}

type entry struct {
	info      *pb.TargetInfo
	lastHeard time.Time
	statfs    *pb.Statfs
	leader    bool
}

var (
	pfxTarget = []byte("t/")
	keyNext   = []byte("seq/next")
	pfxFLD    = []byte("fld/")
)

func targetKey(kind pb.TargetKind, index uint32) []byte {
	k := append(append([]byte(nil), pfxTarget...), byte(kind))
	return binary.BigEndian.AppendUint32(k, index)
}

// New loads the MGS state from its store.
func New(cfg Config) (*Server, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Log, targets: map[string]*entry{}, nextSeq: fid.SeqNormal}
	it, err := cfg.DB.NewIter(pfxTarget, kv.PrefixEnd(pfxTarget))
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		ti := &pb.TargetInfo{}
		if err := proto.Unmarshal(it.Value(), ti); err != nil {
			it.Close()
			return nil, fmt.Errorf("MGS store: corrupt target record %x: %w", it.Key(), err)
		}
		s.targets[string(it.Key())] = &entry{info: ti}
	}
	it.Close()
	if v, err := cfg.DB.Get(keyNext); err == nil && len(v) == 8 {
		s.nextSeq = binary.BigEndian.Uint64(v)
	} else if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, err
	}
	it, err = cfg.DB.NewIter(pfxFLD, kv.PrefixEnd(pfxFLD))
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		r := &pb.SeqRange{}
		if err := proto.Unmarshal(it.Value(), r); err != nil {
			it.Close()
			return nil, fmt.Errorf("MGS store: corrupt FLD record: %w", err)
		}
		s.fld = append(s.fld, r)
	}
	it.Close()
	if cfg.Reg != nil {
		s.upGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nacre_mgs_target_up", Help: "1 if the target heartbeats, else 0."}, []string{"target"})
		cfg.Reg.MustRegister(s.upGauge)
	}
	return s, nil
}

// Attach registers the service on a gRPC server.
func (s *Server) Attach(g *grpc.Server) { pb.RegisterMGSServer(g, s) }

func (s *Server) Hello(ctx context.Context, r *pb.HelloRequest) (*pb.HelloReply, error) {
	if r.Fsname != "" && r.Fsname != s.cfg.ID.Fsname {
		return nil, status.Errorf(codes.FailedPrecondition, "this MGS serves file system %q, not %q", s.cfg.ID.Fsname, r.Fsname)
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

// Register records a target's addresses; targets call it when they start.
func (s *Server) Register(ctx context.Context, ti *pb.TargetInfo) (*pb.RegisterReply, error) {
	if ti.Fsname != s.cfg.ID.Fsname {
		return nil, status.Errorf(codes.FailedPrecondition, "%s belongs to file system %q but this MGS serves %q; point it at the right MGS (--mgs)",
			label(ti.Kind, ti.Index), ti.Fsname, s.cfg.ID.Fsname)
	}
	if ti.Kind != pb.TargetKind_TARGET_MDT && ti.Kind != pb.TargetKind_TARGET_OST {
		return nil, status.Errorf(codes.InvalidArgument, "cannot register a target of kind %v", ti.Kind)
	}
	key := string(targetKey(ti.Kind, ti.Index))
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.targets[key]; ok && old.info.Uuid != ti.Uuid && (ti.ReplicaId == 0 || old.info.ReplicaId == ti.ReplicaId) {
		return nil, status.Errorf(codes.AlreadyExists, "%s is already registered by another target (uuid %s, at %s); this one has uuid %s: two targets were formatted with the same index",
			label(ti.Kind, ti.Index), old.info.Uuid, old.info.Addr, ti.Uuid)
	}
	ti = proto.Clone(ti).(*pb.TargetInfo)
	ti.State, ti.LastHeardNs, ti.Statfs = "", 0, nil
	now := s.cfg.Now()
	ti.RegisteredNs = now.UnixNano()
	if err := s.cfg.DB.Set([]byte(key), mustMarshal(ti), true); err != nil {
		return nil, status.Errorf(codes.Unavailable, "MGS store write failed: %v", err)
	}
	e := s.targets[key]
	if e == nil {
		e = &entry{}
		s.targets[key] = e
	}
	e.info = ti
	e.lastHeard = now
	s.log.Info("target registered", "registered", label(ti.Kind, ti.Index), "addr", ti.Addr, "data_addr", ti.DataAddr, "pid", ti.Pid)
	return &pb.RegisterReply{Fsname: s.cfg.ID.Fsname}, nil
}

func (s *Server) Heartbeat(ctx context.Context, r *pb.HeartbeatRequest) (*pb.HeartbeatReply, error) {
	key := string(targetKey(r.Kind, r.Index))
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.targets[key]
	if !ok || e.info.Uuid != r.Uuid {
		return nil, status.Errorf(codes.NotFound, "%s is not registered with this MGS; register first", label(r.Kind, r.Index))
	}
	e.lastHeard = s.cfg.Now()
	e.statfs = r.Statfs
	e.leader = r.Leader
	return &pb.HeartbeatReply{}, nil
}

// GetConfig returns every target with its state.
func (s *Server) GetConfig(ctx context.Context, _ *pb.GetConfigRequest) (*pb.ClusterConfig, error) {
	now := s.cfg.Now()
	out := &pb.ClusterConfig{Fsname: s.cfg.ID.Fsname, NowNs: now.UnixNano()}
	if s.cfg.Self != nil {
		self := proto.Clone(s.cfg.Self).(*pb.TargetInfo)
		self.State, self.LastHeardNs = "up", now.UnixNano()
		out.Targets = append(out.Targets, self)
	}
	s.mu.Lock()
	keys := make([]string, 0, len(s.targets))
	for k := range s.targets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		e := s.targets[k]
		ti := proto.Clone(e.info).(*pb.TargetInfo)
		ti.State = "down"
		if !e.lastHeard.IsZero() {
			ti.LastHeardNs = e.lastHeard.UnixNano()
			if now.Sub(e.lastHeard) < DownAfter {
				ti.State = "up"
			}
		}
		ti.Statfs = e.statfs
		ti.Leader = e.leader
		if s.upGauge != nil {
			v := 0.0
			if ti.State == "up" {
				v = 1
			}
			s.upGauge.WithLabelValues(label(ti.Kind, ti.Index)).Set(v)
		}
		out.Targets = append(out.Targets, ti)
	}
	for _, r := range s.fld {
		out.Fld = append(out.Fld, proto.Clone(r).(*pb.SeqRange))
	}
	s.mu.Unlock()
	return out, nil
}

// AllocSeqRange grants count sequences to an MDT; the grant is durable
// before the reply, so no sequence is ever granted twice.
func (s *Server) AllocSeqRange(ctx context.Context, r *pb.AllocSeqRangeRequest) (*pb.SeqRange, error) {
	if r.Count == 0 || r.Count > 1<<20 {
		return nil, status.Errorf(codes.InvalidArgument, "sequence count %d out of range (1..%d)", r.Count, 1<<20)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := &pb.SeqRange{Start: s.nextSeq, End: s.nextSeq + r.Count, Mdt: r.Mdt}
	b := s.cfg.DB.NewWriteBatch()
	defer b.Close()
	b.Set(keyNext, binary.BigEndian.AppendUint64(nil, g.End))
	b.Set(binary.BigEndian.AppendUint64(append([]byte(nil), pfxFLD...), g.Start), mustMarshal(g))
	if err := b.Commit(true); err != nil {
		return nil, status.Errorf(codes.Unavailable, "MGS store write failed: %v", err)
	}
	s.nextSeq = g.End
	s.fld = append(s.fld, g)
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
