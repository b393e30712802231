package mds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/lfsck"
)

// The checker (internal/lfsck) and fault injection services of an MDS.
// The checker runs on the leader of the MDT: it resumes an interrupted
// check (or starts the OI scrub of a restored store) when this replica
// becomes the leader, and is abandoned when it stops leading; a graceful
// stop of the server pauses it (it resumes at the next start).

var checkers sync.Map // *Server -> *lfsck.Checker

// startChecker registers the Lfsck and Fault services and starts
// following the leadership.
func (s *Server) startChecker(g *grpc.Server, reg *prometheus.Registry) {
	if err := fault.ArmList(s.opts.Faults); err != nil {
		s.log.Warn("NACRE_FAULTS", "err", err)
	}
	c := lfsck.New(lfsck.Env{Target: s.t, Propose: s.propose, OSTs: s.lfsckOSTs, Log: s.log,
		Activity: func() uint64 { return s.group.AppliedIndex() }, Invalidate: s.invalidateClients, Tuning: s.opts.Checker,
		Remote: remoteMDTs{s}})
	checkers.Store(s, c)
	if reg != nil {
		s.lfsckMetrics = newLfsckCollector(c, s.id.Name())
		reg.MustRegister(s.lfsckMetrics)
	}
	nacregrpc.RegisterLfsckServer(g, &lfsckService{s: s, c: c})
	nacregrpc.RegisterFaultServer(g, &faultService{s: s})
	s.wg.Add(1)
	go s.followLeader(c)
}

// Checker is the MDT's checker.
func (s *Server) Checker() *lfsck.Checker {
	v, _ := checkers.Load(s)
	c, _ := v.(*lfsck.Checker)
	return c
}

// stopChecker pauses a running check before the server stops.
func (s *Server) stopChecker() {
	if s.lfsckMetrics != nil {
		s.lfsckMetrics.close()
	}
	c := s.Checker()
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c.Pause(ctx)
	checkers.Delete(s)
}

func (s *Server) followLeader(c *lfsck.Checker) {
	defer s.wg.Done()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	leading := false
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		now := s.group.IsLeader()
		switch {
		case now && !leading:
			// Every entry of earlier terms is applied before the checker
			// reads its state.
			ctx, cancel := s.ctx(10 * time.Second)
			err := s.group.ReadIndex(ctx)
			if err == nil && !s.opts.NoCheckerResume {
				err = c.Resume(ctx)
			}
			cancel()
			if err != nil {
				s.log.Warn("checker: resume on leadership", "err", err)
				continue
			}
			leading = true
			s.checkerLeads.Store(true)
		case !now && leading:
			s.checkerLeads.Store(false)
			c.Abandon()
			leading = false
		}
	}
}

// invalidateClients has every mounted client drop what it caches of fids
// (the checker changed their data).
func (s *Server) invalidateClients(ctx context.Context, fids []fid.FID) {
	lm := s.LDLM()
	if lm == nil {
		return
	}
	req := &pb.InvalidateRequest{}
	for _, f := range fids {
		req.Fids = append(req.Fids, f.PB())
	}
	if _, err := lm.Invalidate(ctx, req); err != nil {
		s.log.Warn("checker: tell the clients to drop their cache of repaired files", "files", len(fids), "err", err)
	}
}

// lfsckOSTs gives the checker the OSTs that are up.
func (s *Server) lfsckOSTs() map[uint32]lfsck.OST {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[uint32]lfsck.OST{}
	for i, o := range s.osts {
		if o.up && o.cli != nil {
			out[i] = ossOST{o.cli}
		}
	}
	return out
}

type ossOST struct{ cli nacregrpc.OSSClient }

func (o ossOST) Check(ctx context.Context, req *pb.LfsckCheckRequest) (*pb.LfsckCheckReply, error) {
	return o.cli.LfsckCheck(ctx, req)
}

func (o ossOST) Summary(ctx context.Context, req *pb.LfsckSummaryRequest) (*pb.LfsckSummaryReply, error) {
	return o.cli.LfsckSummary(ctx, req)
}

func (o ossOST) Orphans(ctx context.Context, req *pb.LfsckOrphansRequest) (*pb.LfsckOrphansReply, error) {
	return o.cli.LfsckOrphans(ctx, req)
}

func (o ossOST) Repair(ctx context.Context, req *pb.LfsckObjRepairRequest) (*pb.LfsckObjRepairReply, error) {
	return o.cli.LfsckRepair(ctx, req)
}

func (o ossOST) GetObjects(ctx context.Context, objs []*pb.StripeObject) ([]*pb.ObjectAttr, error) {
	r, err := o.cli.GetObjects(ctx, &pb.GetObjectsRequest{Objects: objs})
	if err != nil {
		return nil, err
	}
	return r.Attrs, nil
}

func (s *Server) needLeader() error {
	if !s.group.IsLeader() {
		return errno.NotLeader(s.id.Label(), s.group.Leader(), s.group.LeaderAddr())
	}
	return nil
}

// needChecker refuses the checker's commands but on the leader whose
// checker took over: a follower's, or a new leader's before that, knows
// neither the run in progress nor its state, and a stop there would
// stop nothing while the run resumes.
func (s *Server) needChecker() error {
	if err := s.needLeader(); err != nil {
		return err
	}
	if !s.checkerLeads.Load() {
		return errno.Errorf(errno.Unavailable, "%s: the checker is taking over on this new leader; try again", s.id.Label())
	}
	return nil
}

func checkerErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, lfsck.ErrRunning):
		return errno.New(errno.AlreadyExists, err.Error())
	case lfsck.IsUsage(err):
		return errno.New(errno.InvalidArgument, err.Error())
	}
	return errno.New(errno.FailedPrecondition, err.Error())
}

type lfsckService struct {
	nacregrpc.UnimplementedLfsckServer
	s *Server
	c *lfsck.Checker
}

func (v *lfsckService) Start(ctx context.Context, req *pb.LfsckStartRequest) (*pb.LfsckStartReply, error) {
	if err := v.s.needChecker(); err != nil {
		return nil, err
	}
	msg, err := v.c.Start(ctx, req)
	if err != nil {
		return nil, checkerErr(err)
	}
	v.s.log.Info("checker: "+msg, "types", req.Types, "dry_run", req.DryRun)
	return &pb.LfsckStartReply{Message: msg}, nil
}

func (v *lfsckService) Stop(ctx context.Context, req *pb.LfsckStopRequest) (*pb.LfsckStopReply, error) {
	if err := v.s.needChecker(); err != nil {
		return nil, err
	}
	msg, err := v.c.Stop(ctx)
	if err != nil {
		return nil, checkerErr(err)
	}
	return &pb.LfsckStopReply{Message: msg}, nil
}

func (v *lfsckService) Query(ctx context.Context, req *pb.LfsckQueryRequest) (*pb.LfsckQueryReply, error) {
	if err := v.s.needChecker(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v.c.Report())
	if err != nil {
		return nil, errno.New(errno.Internal, err.Error())
	}
	return &pb.LfsckQueryReply{Json: b}, nil
}

func (v *lfsckService) Set(ctx context.Context, req *pb.LfsckSetRequest) (*pb.LfsckSetReply, error) {
	if err := v.s.needChecker(); err != nil {
		return nil, err
	}
	if err := v.c.Set(req.Speed, req.Window); err != nil {
		return nil, checkerErr(err)
	}
	return &pb.LfsckSetReply{}, nil
}

func (v *lfsckService) Digest(ctx context.Context, req *pb.LfsckDigestRequest) (*pb.LfsckDigestReply, error) {
	snap := v.s.db.NewSnapshot()
	defer snap.Close()
	d, n, err := kv.Digest(snap)
	if err != nil {
		return nil, errno.New(errno.Internal, err.Error())
	}
	return &pb.LfsckDigestReply{Digest: d, Keys: n}, nil
}

type faultService struct {
	nacregrpc.UnimplementedFaultServer
	s *Server
}

func (v *faultService) List(ctx context.Context, req *pb.FaultListRequest) (*pb.FaultListReply, error) {
	out := &pb.FaultListReply{}
	for _, k := range fault.Kinds {
		out.Kinds = append(out.Kinds, &pb.FaultKind{Kind: string(k.Kind), Component: k.Component, Target: k.Target,
			Description: k.Description, Needs: k.Needs, Counter: k.Counter})
	}
	return out, nil
}

func (v *faultService) Inject(ctx context.Context, req *pb.FaultInjectRequest) (*pb.FaultInjectReply, error) {
	s := v.s
	if err := s.needLeader(); err != nil {
		return nil, err
	}
	if _, ok := fault.LookupKind(req.Kind); !ok {
		return nil, errno.Errorf(errno.InvalidArgument, "unknown fault kind %q (see nacre fault list)", req.Kind)
	}
	op, osts, err := s.t.BuildFault(req)
	if err != nil {
		return nil, errno.New(errno.FailedPrecondition, err.Error())
	}
	for _, of := range osts {
		s.mu.Lock()
		o := s.osts[of.OST]
		s.mu.Unlock()
		if o == nil || o.cli == nil {
			return nil, errno.Errorf(errno.Unavailable, "OST%04x is not known", of.OST)
		}
		if _, err := o.cli.FaultObject(ctx, &pb.FaultObjectRequest{Kind: of.Kind, Object: of.Obj, Record: of.Rec}); err != nil {
			return nil, err
		}
	}
	if op != nil {
		rep, err := s.propose(ctx, &pb.Command{NowNs: time.Now().UnixNano(), Op: &pb.Command_Fault{Fault: op}}) // a damage that moves a time moves it to now
		if err != nil {
			return nil, err
		}
		if rep.Errno != 0 {
			return nil, errno.Errorf(errno.Aborted, "fault %s: %s (%v)", req.Kind, rep.Message, syscall.Errno(rep.Errno))
		}
	}
	s.log.Warn("fault injected", "kind", req.Kind, "fid", fid.FromPB(req.Fid).String(), "stripe", req.Stripe)
	return &pb.FaultInjectReply{Message: fmt.Sprintf("injected %s on %s", req.Kind, fid.FromPB(req.Fid))}, nil
}

func (v *faultService) Arm(ctx context.Context, req *pb.FaultArmRequest) (*pb.FaultArmReply, error) {
	if err := fault.ArmPB(req); err != nil {
		return nil, errno.New(errno.InvalidArgument, err.Error())
	}
	v.s.log.Warn("fault point armed", "point", req.Point, "action", req.Action)
	return &pb.FaultArmReply{Armed: fault.Armed()}, nil
}
