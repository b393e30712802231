package mds

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
)

// maintain runs the leader's bookkeeping: cluster config from the MGS,
// FID sequences, precreate pools and the destroy queue. A follower only
// follows the config so it is ready to lead.
func (s *Server) maintain() {
	defer s.wg.Done()
	switch pol := s.seq; {
	case pol.err != nil:
		s.log.Warn("test knob ignored; using the default sequence grants", "err", pol.err)
	case pol.knob != "":
		s.log.Warn("test-only sequence grant policy in effect", "env", testSeqGrantEnv+"="+pol.knob, "count", pol.count, "low_water_fids", pol.low)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastConfig, lastDestroy time.Time
	lastTrim := time.Now()
	wasLeader, leadTerm := false, uint64(0)
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		now := time.Now()
		if now.Sub(lastConfig) >= time.Second {
			lastConfig = now
			s.refreshConfig()
		}
		leader := s.group.IsLeader()
		// A new term is a new leadership even if this replica led before
		// it (it may have lost and regained leadership between two ticks,
		// while another leader reset the pools): check the pools again.
		term := s.group.Term()
		if leader != wasLeader || (leader && term != leadTerm) {
			wasLeader, leadTerm = leader, term
			s.mu.Lock()
			for _, o := range s.osts {
				o.poolReady = false
			}
			s.mu.Unlock()
			if leader {
				s.log.Info("leading; checking pools and sequences", "term", s.group.Term())
			}
		}
		if !leader || s.rec.active.Load() {
			continue
		}
		s.ensureSequences()
		s.tendPools()
		if now.Sub(lastTrim) >= replyTrimEvery {
			lastTrim = now
			s.trimReplies(now)
		}
		if now.Sub(lastDestroy) >= 200*time.Millisecond {
			lastDestroy = now
			s.destroyQueued()
		}
		s.m.setPools(s.t.Pools())
	}
}

func (s *Server) ctx(d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// freshConfig reads the OST list again for a create that would get fewer
// stripes than it asks, unless it was read or tried within the last 200 ms:
// concurrent creates share one read, and an MGS that does not answer
// costs them one timeout per 200 ms, not one each.
func (s *Server) freshConfig() {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	const recent = 200 * time.Millisecond
	if time.Since(s.cfgTry) < recent || time.Since(time.Unix(0, s.cfgAt.Load())) < recent {
		return
	}
	s.cfgTry = time.Now()
	s.refreshConfig()
}

// refreshConfig learns the OSTs, their addresses and states, and the
// nodemaps, from the MGS.
func (s *Server) refreshConfig() {
	ctx, cancel := s.ctx(2 * time.Second)
	defer cancel()
	cfg, err := s.mgs.GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil {
		return
	}
	s.cfgAt.Store(time.Now().UnixNano())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setNodemaps(cfg.Nodemaps)
	s.peers.update(cfg)
	clear(s.replicas)
	for _, ti := range cfg.Targets {
		if ti.Kind == pb.TargetKind_TARGET_MDT && ti.Index == s.id.Index && ti.ReplicaId != 0 && ti.ReplicaId != s.group.ID() {
			s.replicas[ti.ReplicaId] = ti
		}
		if ti.Kind != pb.TargetKind_TARGET_OST {
			continue
		}
		o := s.osts[ti.Index]
		if o == nil {
			o = &ostState{index: ti.Index}
			s.osts[ti.Index] = o
		}
		if o.addr != ti.Addr {
			if o.cc != nil {
				o.cc.Close()
			}
			cc, err := grpcx.Dial(ti.Addr, grpcx.WithTLS(s.tls))
			if err != nil {
				s.log.Warn("dial OST", "ost", ti.Index, "addr", ti.Addr, "err", err)
				continue
			}
			o.addr, o.cc, o.cli = ti.Addr, cc, nacregrpc.NewOSSClient(cc)
			o.poolReady = false
		}
		up := ti.State == "up"
		if o.up && !up {
			s.log.Warn("OST down; not placing new objects on it", "ost", fmt.Sprintf("OST%04x", ti.Index))
		}
		if !o.up && up {
			// The OST may have restarted: clean up its pool again.
			o.poolReady = false
		}
		o.up = up
		full := ostFull(ti.Statfs, o.full)
		if ti.Statfs != nil {
			o.statfs = ti.Statfs
		}
		switch {
		case full && !o.full:
			s.log.Warn("OST full; not placing new objects on it while others have room", "ost", describeFull(o))
		case !full && o.full:
			s.log.Info("OST has room again; placing new objects on it", "ost", describeFull(o))
		}
		o.full = full
	}
}

// seqPolicy is how many sequences the MDS asks the MGS for at a time
// (count) and below how many FIDs left it asks (low): seqGrantSize and
// seqLowWater, unless the test knob Options.SeqGrant says otherwise.
type seqPolicy struct {
	count, low uint64
	knob       string // the test knob's value, if set
	err        error  // a knob that could not be parsed (defaults used)
}

// testSeqGrantEnv names the test knob Options.SeqGrant in messages: cmd/nacre
// reads it from NACRE_TEST_SEQ_GRANT. "COUNT/LOW" asks the MGS for COUNT
// sequences at a time whenever fewer than LOW sequences' worth of FIDs
// (LOW x fid.Width) remain. With a LOW far above what is ever granted
// ("1/100000") the leader asks for one sequence on every tick of its
// maintenance loop (50 ms), so that a test sees many grants - across an MGS
// failover, say - without creating fid.Width files per grant. Production
// is 64/2 (seqGrantSize, seqLowWater).
const testSeqGrantEnv = "NACRE_TEST_SEQ_GRANT"

// parseSeqPolicy reads the test knob ("" for the production policy).
func parseSeqPolicy(knob string) seqPolicy {
	p := seqPolicy{count: seqGrantSize, low: seqLowWater, knob: knob}
	if p.knob == "" {
		return p
	}
	c, l, ok := strings.Cut(p.knob, "/")
	count, err1 := strconv.ParseUint(c, 10, 64)
	low, err2 := strconv.ParseUint(l, 10, 64)
	if !ok || err1 != nil || err2 != nil || count == 0 || count > 1<<20 || low > 1<<32 {
		p.err = fmt.Errorf("%s=%q: want COUNT/LOW, 1 <= COUNT <= %d sequences per grant, LOW <= %d sequences", testSeqGrantEnv, p.knob, 1<<20, uint64(1)<<32)
		return p
	}
	p.count, p.low = count, low*uint64(fid.Width)
	return p
}

func (s *Server) ensureSequences() {
	pol := s.seq
	if s.t.SeqRemaining() >= pol.low {
		return
	}
	ctx, cancel := s.ctx(5 * time.Second)
	defer cancel()
	r, err := s.mgs.AllocSeqRange(ctx, &pb.AllocSeqRangeRequest{Mdt: s.id.Index, Count: pol.count})
	if err != nil {
		s.log.Warn("cannot get FID sequences from the MGS", "err", err)
		return
	}
	rep, err := s.propose(ctx, &pb.Command{Op: &pb.Command_SeqGrant{SeqGrant: &pb.SeqGrantOp{Start: r.Start, End: r.End}}})
	if err != nil || rep.Errno != 0 {
		s.log.Warn("record FID sequence grant", "err", err, "reply", rep)
		return
	}
	s.log.Info("FID sequences granted", "start", fmt.Sprintf("%#x", r.Start), "end", fmt.Sprintf("%#x", r.End))
}

// tendPools starts at most one pool operation per OST at a time.
func (s *Server) tendPools() {
	pools := s.t.Pools()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range s.osts {
		if !o.up || o.busy || o.cli == nil {
			continue
		}
		p, exists := pools[o.index]
		switch {
		case !o.poolReady:
			o.busy = true
			go s.initPool(o, p, exists)
		case p.Avail() < poolLow:
			o.busy = true
			go s.refill(o, p)
		}
	}
}

func (s *Server) done(o *ostState, ready bool) {
	s.mu.Lock()
	o.busy = false
	if ready {
		o.poolReady = true
	}
	s.mu.Unlock()
}

// initPool runs after a start or a leader change: every entry of earlier
// terms is applied first (read barrier), then the OST destroys the
// precreated objects the MDT never handed out, and the pool is reset.
func (s *Server) initPool(o *ostState, p mdtPool, exists bool) {
	ctx, cancel := s.ctx(30 * time.Second)
	defer cancel()
	ready := false
	defer func() { s.done(o, ready) }()
	if err := s.group.ReadIndex(ctx); err != nil {
		return
	}
	if exists {
		p = s.t.Pools()[o.index] // fresh after the barrier
	}
	seq := fid.OSTSeq(s.id.Index)
	from := uint64(math.MaxUint64)
	if exists {
		from = p.Next
	}
	cr, err := o.cli.Cleanup(ctx, &pb.CleanupRequest{Seq: seq, From: from})
	if err != nil {
		s.log.Warn("orphan cleanup on OST failed; will retry", "ost", o.index, "err", err)
		return
	}
	rep, err := s.propose(ctx, &pb.Command{Op: &pb.Command_PoolReset{PoolReset: &pb.PoolResetOp{Ost: o.index, Seq: seq, Start: cr.LastId + 1}}})
	if err != nil || rep.Errno != 0 {
		s.log.Warn("record pool reset", "ost", o.index, "err", err, "reply", rep)
		return
	}
	if cr.Destroyed > 0 {
		s.log.Info("destroyed unused precreated objects", "ost", fmt.Sprintf("OST%04x", o.index), "count", cr.Destroyed)
	}
	ready = true
	np := s.t.Pools()[o.index]
	s.refillNow(ctx, o, np)
}

func (s *Server) refill(o *ostState, p mdtPool) {
	ctx, cancel := s.ctx(30 * time.Second)
	defer cancel()
	defer s.done(o, false)
	s.refillNow(ctx, o, p)
}

func (s *Server) refillNow(ctx context.Context, o *ostState, p mdtPool) {
	want := uint64(poolHigh) - p.Avail()
	if want == 0 {
		return
	}
	start := time.Now()
	r, err := o.cli.Precreate(ctx, &pb.PrecreateRequest{Seq: p.Seq, Start: p.End, Count: want})
	if err != nil {
		s.log.Warn("precreate on OST failed; will retry", "ost", o.index, "err", err)
		return
	}
	rep, err := s.propose(ctx, &pb.Command{Op: &pb.Command_PoolExtend{PoolExtend: &pb.PoolExtendOp{Ost: o.index, Seq: p.Seq, End: r.End}}})
	if err != nil || rep.Errno != 0 {
		s.log.Warn("record precreated objects", "ost", o.index, "err", err, "reply", rep)
		return
	}
	s.m.precreated.Add(float64(r.End - p.End))
	s.log.Debug("pool refilled", "ost", o.index, "objects", r.End-p.End, "took", time.Since(start))
}

// destroyQueued destroys the OST objects of removed files, OST by OST in
// batches, and then drops them from the queue.
func (s *Server) destroyQueued() {
	q, err := s.t.DestroyQueue(8192)
	if err != nil || len(q) == 0 {
		s.m.destroyQueue.Set(float64(len(q)))
		return
	}
	s.m.destroyQueue.Set(float64(len(q)))
	byOST := map[uint32][]*pb.StripeObject{}
	for _, o := range q {
		byOST[o.Ost] = append(byOST[o.Ost], o)
	}
	ctx, cancel := s.ctx(10 * time.Second)
	defer cancel()
	// A removal answered before its entry was synced could be lost with
	// the log's tail, and its file come back: its objects go only once
	// the removal is durable.
	if err := s.group.WaitSynced(ctx, s.group.AppliedIndex()); err != nil {
		s.log.Warn("sync the log before destroying objects", "err", err)
		return
	}
	var done []*pb.StripeObject
	for idx, objs := range byOST {
		s.mu.Lock()
		o := s.osts[idx]
		var cli nacregrpc.OSSClient
		if o != nil && o.up {
			cli = o.cli
		}
		s.mu.Unlock()
		if cli == nil {
			continue // stays queued until the OST is back
		}
		if _, err := cli.Destroy(ctx, &pb.DestroyRequest{Objects: objs}); err != nil {
			s.log.Warn("destroy objects on OST", "ost", idx, "count", len(objs), "err", err)
			continue
		}
		done = append(done, objs...)
	}
	if len(done) == 0 {
		return
	}
	if _, err := s.propose(ctx, &pb.Command{Op: &pb.Command_DestroyDone{DestroyDone: &pb.DestroyDoneOp{Objects: done}}}); err != nil {
		s.log.Warn("record destroyed objects", "count", len(done), "err", err)
	}
}

// Cached replies are kept for replyKeep: far longer than any client
// retries (its timeout is a minute), short enough that the replies of
// clients that went away do not pile up.
const (
	replyKeep      = time.Hour
	replyTrimEvery = 5 * time.Minute
)

func (s *Server) trimReplies(now time.Time) {
	ctx, cancel := s.ctx(30 * time.Second)
	defer cancel()
	if _, err := s.propose(ctx, &pb.Command{Op: &pb.Command_TrimReplies{TrimReplies: &pb.TrimRepliesOp{BeforeNs: now.Add(-replyKeep).UnixNano()}}}); err != nil {
		s.log.Warn("expire old cached replies", "err", err)
	}
}
