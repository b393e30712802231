package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/grpcx"
	"nacre/internal/mdrpc"
	"nacre/internal/pki"
)

// Leader routing.
//
// An MDT is a Raft group of one or more replicas (each registered with the
// MGS under its replica id). mdtGroup is the mdrpc.MDSService of one MDT over
// all of its replicas: mutations go to the leader, and so do reads unless
// follower reads are on (Config.FollowerReads), in which case reads are
// spread over every replica that is up; each replica makes its reads
// linearizable (the leader under a lease, a follower with ReadIndex).
//
// The leader is learned from the MGS's configuration and then from the
// servers themselves: a replica that does not lead refuses with the
// leader it knows (errno.NotLeader, read with errno.LeaderOf), and the
// call is sent there at once. A replica that cannot be reached, or that knows no
// leader (an election is under way), makes the call move on to the next
// replica; once every replica was tried the call fails with Unavailable,
// and Client.retry backs off, reads the configuration again and calls
// once more, with the same request id, so a mutation retried against a
// new leader is answered from the replicated reply cache if it was
// already applied.

// mdtGroup routes the calls of one MDT to its replicas.
type mdtGroup struct {
	index         uint32
	fsname        string
	followerReads bool
	tls           *pki.Creds // nil: no TLS

	mu     sync.Mutex
	reps   []*mdtReplica // by replica id
	leader *mdtReplica   // nil: unknown
	closed bool
	rr     atomic.Uint64
}

type mdtReplica struct {
	id     uint64 // 0: an unreplicated MDT
	addr   string // gRPC (and Raft) address: leader hints name it
	data   string // framed RPC address, if any
	cli    mdrpc.MDSService
	closer interface{ Close() error }
	up     bool
	// quietUntil: the replica stopped answering (try); reads spread
	// over the replicas pass it by until then.
	quietUntil time.Time
}

var _ mdrpc.MDSService = (*mdtGroup)(nil)

func newMDTGroup(index uint32, fsname string, followerReads bool, creds *pki.Creds) *mdtGroup {
	return &mdtGroup{index: index, fsname: fsname, followerReads: followerReads, tls: creds}
}

// update replaces the replica set with the configuration's entries for
// this MDT, keeping the connections of replicas that did not move.
func (g *mdtGroup) update(tis []*pb.TargetInfo) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	old := map[uint64]*mdtReplica{}
	for _, r := range g.reps {
		old[r.id] = r
	}
	var reps []*mdtReplica
	var cfgLeader *mdtReplica
	for _, ti := range tis {
		data := ti.DataAddr
		r := old[ti.ReplicaId]
		if r != nil && r.addr == ti.Addr && r.data == data {
			delete(old, ti.ReplicaId)
		} else {
			r = &mdtReplica{id: ti.ReplicaId, addr: ti.Addr, data: data}
			if data != "" {
				// The metadata hot path uses framed RPC (internal/mdrpc).
				var tc *tls.Config
				if g.tls != nil {
					tc = g.tls.ClientConfig()
				}
				fc := mdrpc.NewMDS(data, g.fsname, tc)
				r.cli, r.closer = fc, fc
			} else {
				cc, err := grpcx.Dial(ti.Addr, grpcx.WithTLS(g.tls))
				if err != nil {
					return err
				}
				r.cli, r.closer = grpcMDS{nacregrpc.NewMDSClient(cc)}, cc
			}
		}
		r.up = ti.State != "down"
		reps = append(reps, r)
		if ti.Leader {
			cfgLeader = r
		}
	}
	slices.SortFunc(reps, func(a, b *mdtReplica) int { return cmpU64(a.id, b.id) })
	for _, r := range old {
		if g.leader == r {
			g.leader = nil
		}
		r.closer.Close()
	}
	g.reps = reps
	// The MGS's view of the leader is up to a heartbeat old: keep the
	// one the replicas told us about while it answers.
	if g.leader == nil || !slices.Contains(reps, g.leader) {
		g.leader = cfgLeader
	}
	return nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Close drops every connection.
func (g *mdtGroup) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	for _, r := range g.reps {
		r.closer.Close()
	}
	g.reps, g.leader = nil, nil
	return nil
}

// describe names the replicas for error messages.
func (g *mdtGroup) describe() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.reps) == 1 {
		return g.reps[0].addr
	}
	return fmt.Sprintf("%d replicas", len(g.reps))
}

// first picks where a call starts: the leader, else (or, for a read
// with follower reads, in turn) any replica that is up.
func (g *mdtGroup) first(read bool) *mdtReplica {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.reps) == 0 {
		return nil
	}
	if read && g.followerReads && len(g.reps) > 1 {
		n := uint64(len(g.reps))
		start := g.rr.Add(1)
		now := time.Now()
		for i := uint64(0); i < n; i++ {
			if r := g.reps[(start+i)%n]; r.up && now.After(r.quietUntil) {
				return r
			}
		}
	}
	if g.leader != nil {
		return g.leader
	}
	for _, r := range g.reps {
		if r.up {
			return r
		}
	}
	return g.reps[0]
}

// next is the replica after r (in id order) that was not tried yet.
func (g *mdtGroup) next(r *mdtReplica, tried map[*mdtReplica]bool) *mdtReplica {
	g.mu.Lock()
	defer g.mu.Unlock()
	i := slices.Index(g.reps, r)
	for k := 1; k <= len(g.reps); k++ {
		c := g.reps[(i+k+len(g.reps))%len(g.reps)]
		if !tried[c] {
			return c
		}
	}
	return nil
}

func (g *mdtGroup) byAddr(addr string) *mdtReplica {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range g.reps {
		if r.addr == addr {
			return r
		}
	}
	return nil
}

func (g *mdtGroup) setLeader(r *mdtReplica) {
	g.mu.Lock()
	if slices.Contains(g.reps, r) {
		g.leader = r
	}
	g.mu.Unlock()
}

func (g *mdtGroup) forget(r *mdtReplica) {
	g.mu.Lock()
	if g.leader == r {
		g.leader = nil
	}
	g.mu.Unlock()
}

// call runs f against the replicas until one answers, following leader
// hints; it returns the last error once every replica was tried. A
// replica that stops answering altogether (a paused process, a network
// that drops its packets: its connections stay open) is given up on
// (watch), as one that refuses connections is.
func (g *mdtGroup) call(ctx context.Context, read bool, f func(context.Context, mdrpc.MDSService) error) error {
	r := g.first(read)
	if r == nil {
		return errno.Errorf(errno.Unavailable, "MDT%04x: no replica in the configuration", g.index)
	}
	tried := map[*mdtReplica]bool{}
	var err error
	for hops := 0; r != nil && hops < 8; hops++ {
		tried[r] = true
		err = g.try(ctx, r, f)
		if errno.CodeOf(err) == errno.Canceled && ctx.Err() == nil {
			// The server cancelled the call because it is stopping: the
			// outcome is unknown, so retry (with the same request id).
			err = errno.Errorf(errno.Unavailable, "MDT%04x replica at %s stopped while serving the call: %v", g.index, r.addr, err)
		}
		if err == nil {
			if !read || !g.followerReads {
				g.setLeader(r)
			}
			return nil
		}
		if !errno.Retryable(err) || ctx.Err() != nil {
			return err
		}
		// Not the leader, unreachable, or stopping: follow the leader it
		// names, if it names one not tried yet.
		g.forget(r)
		if l, ok := errno.LeaderOf(err); ok {
			if lr := g.byAddr(l.Addr); lr != nil && !tried[lr] {
				g.setLeader(lr)
				r = lr
				continue
			}
		}
		r = g.next(r, tried)
	}
	return err
}

// Silent replicas. A call waits on one replica as long as the caller
// allows (30 s and more), and a replica that neither answers nor closes
// its connections held every client for as long as it was silent, while
// the other replicas had elected a new leader within two seconds. So,
// once a call has waited suspectAfter, the replica is asked whether it is
// alive (RaftAdmin.Members, a read of memory, answered within
// probeTimeout), again probePause after each answer or silence; after
// silentProbes silences in a row (about 2 s in all) the call is abandoned
// there and goes on to the next replica. A replica that answers the
// probes is left alone however long the call takes. A mutation abandoned
// this way may still be applied by it; the retry elsewhere carries the
// same request id, and the replicated reply cache answers it.
var (
	suspectAfter = 750 * time.Millisecond
	probeTimeout = 500 * time.Millisecond
	probePause   = 250 * time.Millisecond
	silentProbes = 2
	quietFor     = 10 * time.Second // reads pass a silent replica by
)

// errSilent marks a call abandoned at a replica that stopped answering.
var errSilent = errors.New("replica does not answer")

// try runs f on r, watched by watch when the group has other replicas.
func (g *mdtGroup) try(ctx context.Context, r *mdtReplica, f func(context.Context, mdrpc.MDSService) error) error {
	g.mu.Lock()
	alone := len(g.reps) < 2
	g.mu.Unlock()
	if alone {
		return f(ctx, r.cli)
	}
	err := watched(ctx, r.addr, g.tls, func(ctx context.Context) error { return f(ctx, r.cli) })
	if errors.Is(err, errSilent) {
		g.mu.Lock()
		r.quietUntil = time.Now().Add(quietFor)
		g.mu.Unlock()
		return errno.Errorf(errno.Unavailable, "MDT%04x replica at %s: %v; trying another", g.index, r.addr, err)
	}
	return err
}

// watched runs f with a context that watch cancels if the server at addr
// stops answering; then it returns an error wrapping errSilent.
//
// The watch starts only once the call has waited suspectAfter (a timer,
// not a goroutine per call: most calls end within a millisecond, and a
// goroutine that must be woken to end costs a read served in tens of
// microseconds a noticeable part of it).
func watched(ctx context.Context, addr string, creds *pki.Creds, f func(context.Context) error) error {
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := time.AfterFunc(suspectAfter, func() { watch(tctx, addr, creds, nil, cancel, 0, probePause, nil) })
	err := f(tctx)
	t.Stop()
	if errors.Is(context.Cause(tctx), errSilent) && ctx.Err() == nil {
		return fmt.Errorf("%w (not even to %d probes of %v)", errSilent, silentProbes, probeTimeout)
	}
	return err
}

// watch cancels a call at addr (with errSilent) once addr has not
// answered silentProbes probes in a row (the first after first, the
// others pause after the one before) and confirm, if given, agrees.
func watch(ctx context.Context, addr string, creds *pki.Creds, done <-chan struct{}, cancel context.CancelCauseFunc, first, pause time.Duration, confirm func() bool) {
	t := time.NewTimer(first)
	defer t.Stop()
	missed := 0
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if alive(ctx, addr, creds) {
			missed = 0
		} else if missed++; missed >= silentProbes {
			if confirm == nil || confirm() {
				cancel(errSilent)
				return
			}
			missed = 0
		}
		t.Reset(pause)
	}
}

// alive asks the replica at addr a question any replica answers at once.
func alive(ctx context.Context, addr string, creds *pki.Creds) bool {
	cc, err := grpcx.Dial(addr, grpcx.WithTLS(creds))
	if err != nil {
		return false
	}
	defer cc.Close()
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err = nacregrpc.NewRaftAdminClient(cc).Members(pctx, &pb.RaftMembersRequest{})
	return err == nil
}

func (g *mdtGroup) Mutate(ctx context.Context, in *pb.Command) (out *pb.Reply, err error) {
	err = g.call(ctx, false, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Mutate(ctx, in); return })
	return
}

func (g *mdtGroup) Lookup(ctx context.Context, in *pb.LookupRequest) (out *pb.Reply, err error) {
	err = g.call(ctx, true, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Lookup(ctx, in); return })
	return
}

// Opens goes to the leader (mdrpc.Opener); a replica that cannot serve it
// answers Unimplemented.
func (g *mdtGroup) Opens(ctx context.Context, in *pb.OpensRequest) (out *pb.OpensReply, err error) {
	err = g.call(ctx, false, func(ctx context.Context, c mdrpc.MDSService) (e error) {
		o, ok := c.(mdrpc.Opener)
		if !ok {
			return errno.New(errno.Unimplemented, "opens over framed RPC")
		}
		out, e = o.Opens(ctx, in)
		return
	})
	return
}

func (g *mdtGroup) Getattr(ctx context.Context, in *pb.GetattrRequest) (out *pb.Reply, err error) {
	err = g.call(ctx, true, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Getattr(ctx, in); return })
	return
}

func (g *mdtGroup) Readdir(ctx context.Context, in *pb.ReaddirRequest) (out *pb.ReaddirReply, err error) {
	err = g.call(ctx, true, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Readdir(ctx, in); return })
	return
}

func (g *mdtGroup) Getxattr(ctx context.Context, in *pb.XattrRequest) (out *pb.XattrReply, err error) {
	err = g.call(ctx, true, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Getxattr(ctx, in); return })
	return
}

func (g *mdtGroup) Listxattr(ctx context.Context, in *pb.XattrRequest) (out *pb.XattrReply, err error) {
	err = g.call(ctx, true, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Listxattr(ctx, in); return })
	return
}

func (g *mdtGroup) Fid2Path(ctx context.Context, in *pb.Fid2PathRequest) (out *pb.Fid2PathReply, err error) {
	err = g.call(ctx, true, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Fid2Path(ctx, in); return })
	return
}

func (g *mdtGroup) Statfs(ctx context.Context, in *pb.StatfsRequest) (out *pb.StatfsReply, err error) {
	err = g.call(ctx, false, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Statfs(ctx, in); return })
	return
}

// LeaderAddr is the gRPC address of the replica this client believes
// leads MDT index ("" if unknown); tests and tools use it.
func (c *Client) LeaderAddr(index uint32) string {
	c.mu.Lock()
	m := c.mdts[index]
	c.mu.Unlock()
	if m == nil {
		return ""
	}
	g, ok := m.cli.(*mdtGroup)
	if !ok {
		return m.addr
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.leader == nil {
		return ""
	}
	return g.leader.addr
}

// probeLeader asks every replica of MDT index which one leads (their
// RaftAdmin service) and returns its gRPC address, "" if none says so
// (an election is under way). Sessions use it after a failure rather
// than a hint, which may name a leader that has just died.
func (c *Client) probeLeader(ctx context.Context, index uint32) string {
	c.mu.Lock()
	m := c.mdts[index]
	c.mu.Unlock()
	if m == nil {
		return ""
	}
	g, ok := m.cli.(*mdtGroup)
	if !ok {
		return m.addr
	}
	g.mu.Lock()
	reps := append([]*mdtReplica(nil), g.reps...)
	g.mu.Unlock()
	if len(reps) == 1 {
		return reps[0].addr
	}
	type answer struct {
		r    *mdtReplica
		term uint64
	}
	ch := make(chan answer, len(reps))
	for _, r := range reps {
		go func() {
			a := answer{r: r}
			defer func() { ch <- a }()
			cc, err := grpcx.Dial(r.addr, grpcx.WithTLS(c.cfg.TLS))
			if err != nil {
				return
			}
			defer cc.Close()
			pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			if mr, err := nacregrpc.NewRaftAdminClient(cc).Members(pctx, &pb.RaftMembersRequest{}); err == nil && mr.State == "leader" {
				a.term = mr.Term
			}
		}()
	}
	var best answer
	for range reps {
		if a := <-ch; a.term > best.term {
			best = a
		}
	}
	if best.r == nil {
		return ""
	}
	g.setLeader(best.r)
	return best.r.addr
}

// replicated reports whether MDT index has several replicas.
func (c *Client) replicated(index uint32) bool {
	c.mu.Lock()
	m := c.mdts[index]
	c.mu.Unlock()
	if m == nil {
		return false
	}
	g, ok := m.cli.(*mdtGroup)
	if !ok {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.reps) > 1
}

func (g *mdtGroup) Sync(ctx context.Context, in *pb.SyncRequest) (out *pb.SyncReply, err error) {
	err = g.call(ctx, false, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Sync(ctx, in); return })
	return
}

func (g *mdtGroup) Replay(ctx context.Context, in *pb.ReplayRequest) (out *pb.ReplayReply, err error) {
	err = g.call(ctx, false, func(ctx context.Context, c mdrpc.MDSService) (e error) { out, e = c.Replay(ctx, in); return })
	return
}
