package mds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/kv"
)

// The durability contract (docs/architecture.md, "The durability
// contract"), Lustre's: a single-replica MDT answers a client's change
// once it is applied and in its log, before the log is synced
// (raftgroup.Config.CommitWindow), and syncs within the window. Each
// reply carries the index the log is durable up to (Reply.committed) and
// the unsynced entries up to the reply's own that the client does not
// hold yet (Reply.replay): every entry its own change may depend on. The
// client keeps them until they are durable. A restart that finds its
// log's unsynced tail lost (the machine lost power: its boot changed and
// the MDS did not stop cleanly) gathers the entries clients kept for
// RecoveryWindow, appends the run that continues its log, in order, and
// only then serves again. The same commands in the same order give the
// same state (the state machine is deterministic): the same FIDs, the
// same OST objects, the same reply cache.
//
// Process crashes lose nothing: what was written reaches the disk from
// the page cache, so a restart on the same boot has its whole log.

// Defaults of the contract's windows.
const (
	// DefaultCommitWindow bounds how long an answered change stays
	// unsynced. Longer windows take fewer syncs but leave clients
	// holding more entries.
	DefaultCommitWindow = 100 * time.Millisecond
	// DefaultRecoveryWindow is how long a restarted MDT that lost its
	// log's tail waits for clients to give back the entries they kept.
	DefaultRecoveryWindow = 30 * time.Second
)

// runKey records, outside the replicated state, the boot the MDS last
// started in and whether it stopped cleanly since.
var runKey = []byte("\x00s/run")

type runRecord struct {
	Boot  string `json:"boot"`
	Clean bool   `json:"clean"`
	// Lazy: the MDS answered before syncing (a commit window), so a
	// power cut may have cost its log's tail.
	Lazy bool `json:"lazy,omitempty"`
}

// tailEnt is one applied entry the log may not hold durably yet.
type tailEnt struct {
	index, term uint64
	data        []byte
}

// unsyncedTail is the MDT's applied entries after the synced index, for
// replies (Reply.replay). Apply adds in index order.
type unsyncedTail struct {
	on   atomic.Bool // the group is lazy and serving
	mu   sync.Mutex
	ents []tailEnt
}

// add records an applied entry and drops those at or below synced.
func (u *unsyncedTail) add(index, term uint64, data []byte, synced uint64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.trim(synced)
	if index > synced {
		u.ents = append(u.ents, tailEnt{index, term, data})
	}
}

func (u *unsyncedTail) trim(synced uint64) {
	i := 0
	for i < len(u.ents) && u.ents[i].index <= synced {
		i++
	}
	if i > 0 {
		u.ents = slices.Delete(u.ents, 0, i)
	}
}

// since returns the entries in (from, to].
func (u *unsyncedTail) since(from, to, synced uint64) []*pb.LoggedCommand {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.trim(synced)
	var out []*pb.LoggedCommand
	for _, e := range u.ents {
		if e.index > to {
			break
		}
		if e.index > from {
			out = append(out, &pb.LoggedCommand{Index: e.index, Term: e.term, Command: e.data})
		}
	}
	return out
}

// attachReplay gives a reply the entries its client must keep (have: the
// client holds every unsynced entry up to it; keeps: it keeps them at all).
func (s *Server) attachReplay(r *pb.Reply, have uint64, keeps bool) {
	if !keeps || !s.tail.on.Load() || r == nil {
		return
	}
	synced := s.group.SyncedIndex()
	r.Committed = synced
	if r.Index > synced {
		r.Replay = s.tail.since(max(have, synced), r.Index, synced)
	}
}

// Sync makes every change the MDT answered durable (fsync(2) on a mount),
// or with force unset says how far the log is durable.
func (s *Server) Sync(ctx context.Context, req *pb.SyncRequest) (*pb.SyncReply, error) {
	if err := s.serving(); err != nil {
		return nil, err
	}
	if !req.Force {
		return &pb.SyncReply{Committed: s.group.SyncedIndex()}, nil
	}
	i, err := s.group.Sync(ctx)
	if err != nil {
		return nil, s.groupErr(err)
	}
	return &pb.SyncReply{Committed: i}, nil
}

// recovery gathers the entries clients kept after a restart that lost the
// log's unsynced tail.
type recovery struct {
	active atomic.Bool
	mu     sync.Mutex
	from   uint64 // the first index the log lost
	term   uint64 // the term the lost entries were written in
	got    map[uint64]*pb.LoggedCommand
	// clients that gave entries, and the outcome once it ended.
	clients   map[uint64]bool
	named     map[uint64]bool // clients whose changes were given back
	ends      time.Time       // when the window ends
	lostAfter uint64
	done      chan struct{}
}

// serving is nil, or the Unavailable error (reason Recovering) that makes
// a client give back what it kept and retry.
func (s *Server) serving() error {
	if !s.rec.active.Load() {
		return nil
	}
	return &errno.Error{Code: errno.Unavailable, Reason: errno.Recovering,
		Msg: fmt.Sprintf("%s is recovering after a restart that lost its log's unsynced tail: clients give back the changes they kept", s.id.Label())}
}

// waitRecovered holds the MDS's own proposals until recovery ends, so
// that the replayed entries continue the log directly.
func (s *Server) waitRecovered(ctx context.Context) error {
	if !s.rec.active.Load() {
		return nil
	}
	select {
	case <-s.rec.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-s.stop:
		return errno.New(errno.Unavailable, s.id.Label()+" is stopping")
	}
}

// readRunRecord decides, before the group starts, whether the log may
// have lost its unsynced tail since the last start: the MDS did not stop
// cleanly, and the machine has booted since (or the log failed to sync).
func (s *Server) readRunRecord() error {
	var rec runRecord
	switch v, err := s.db.Get(runKey); {
	case err == nil:
		if json.Unmarshal(v, &rec) == nil {
			s.tailLost = rec.Lazy && !rec.Clean && rec.Boot != s.opts.BootID
		}
	case !errors.Is(err, kv.ErrNotFound):
		return fmt.Errorf("read run record of %s: %w", s.id.Name(), err)
	}
	return nil
}

// LogMayHaveLostTail tells the group that a store ahead of its log is
// the mark of a power cut, not damage (raftgroup.TailLoser).
func (a *smAdapter) LogMayHaveLostTail() bool { return a.s.tailLost }

// markTailLost makes the next start recover from the clients: the log
// failed to sync, so what it holds unsynced may never reach the disk.
func (s *Server) markTailLost() {
	v, _ := json.Marshal(runRecord{Boot: "log sync failed", Lazy: true})
	if err := s.db.Set(runKey, v, true); err != nil {
		s.log.Warn("record that the log failed to sync", "err", err)
	}
}

// startDurability records this run, once the group leads, starts the
// recovery of a start that may have lost the log's tail, and turns the
// reply tails on.
func (s *Server) startDurability() error {
	// A recovery needs the log's last run to have been answered before
	// its syncs, not this one: the window may have been turned off since.
	lazy := s.group.Lazy()
	lost := s.tailLost && !s.group.Replicated()
	v, _ := json.Marshal(runRecord{Boot: s.opts.BootID, Lazy: lazy})
	if err := s.db.Set(runKey, v, true); err != nil {
		return fmt.Errorf("record run of %s: %w", s.id.Name(), err)
	}
	s.rec.done = make(chan struct{})
	if !lost {
		close(s.rec.done)
		s.tail.on.Store(lazy)
		return nil
	}
	s.rec.from = s.group.StartIndex() + 1
	s.rec.term = s.group.StartTerm()
	s.rec.got = map[uint64]*pb.LoggedCommand{}
	s.rec.clients = map[uint64]bool{}
	s.rec.named = map[uint64]bool{}
	window := s.opts.RecoveryWindow
	if window <= 0 {
		window = DefaultRecoveryWindow
	}
	s.rec.ends = time.Now().Add(window)
	s.rec.active.Store(true)
	s.log.Warn("the MDT did not stop cleanly and the machine restarted since: its log's unsynced tail may be lost; waiting for clients to give back the changes they kept",
		"from_index", s.rec.from, "window", window)
	s.wg.Add(1)
	go s.recover(window)
	return nil
}

// stopDurability records a clean stop once the log is synced (the group
// syncs it as it stops).
func (s *Server) stopDurability() {
	v, _ := json.Marshal(runRecord{Boot: s.opts.BootID, Clean: true})
	if err := s.db.Set(runKey, v, true); err != nil {
		s.log.Warn("record clean stop", "err", err)
	}
}

// RecoveryStatus says, while a recovery runs, what it has gathered and
// how long it waits ("" otherwise): for nacre status, through the
// heartbeat.
func (s *Server) RecoveryStatus() string {
	r := &s.rec
	if !r.active.Load() {
		return ""
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	left := max(time.Until(r.ends), 0).Round(time.Second)
	return fmt.Sprintf("%d changes from %d clients after index %d, serving in %s", len(r.got), len(r.clients), r.from-1, left)
}

// recoveryQuorumWait is the least a recovery waits before it may end
// early (recover).
const recoveryQuorumWait = 5 * time.Second

// allNamedBack reports whether every client that made one of the changes
// given back so far has given back what it kept itself.
func (r *recovery) allNamedBack() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for c := range r.named {
		if !r.clients[c] {
			return false
		}
	}
	return true
}

// Replay takes the entries a client kept.
func (s *Server) Replay(ctx context.Context, req *pb.ReplayRequest) (*pb.ReplayReply, error) {
	r := &s.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.active.Load() {
		return &pb.ReplayReply{Committed: s.group.SyncedIndex(), LostAfter: r.lostAfter}, nil
	}
	n := 0
	for _, c := range req.Commands {
		if c.Index < r.from || c.Term != r.term {
			continue
		}
		if prev, ok := r.got[c.Index]; ok {
			if !proto.Equal(prev, c) {
				s.log.Error("recovery: two clients gave different entries for one index; keeping the first", "index", c.Index, "client", req.ClientId)
			}
			continue
		}
		r.got[c.Index] = c
		n++
		var cmd pb.Command
		if proto.Unmarshal(c.Command, &cmd) == nil && cmd.ClientId != 0 {
			r.named[cmd.ClientId] = true
		}
	}
	if !r.clients[req.ClientId] {
		r.clients[req.ClientId] = true
		s.log.Info("recovery: a client gave back its changes", "client", req.ClientId, "entries", len(req.Commands), "new", n)
	}
	return &pb.ReplayReply{Recovering: true}, nil
}

// recover waits out the window, then appends the run of gathered entries
// that continues the log and ends recovery.
func (s *Server) recover(window time.Duration) {
	defer s.wg.Done()
	r := &s.rec
	// The window ends early once every client whose changes came back has
	// given back what it kept, and recoveryQuorumWait has passed (time
	// for a live client to find the restarted MDT: one holding entries
	// checks every 100 ms).
	start := time.Now()
	early := min(window, recoveryQuorumWait)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < window {
		select {
		case <-tick.C:
		case <-s.stop:
			return
		}
		if time.Since(start) >= early && r.allNamedBack() {
			break
		}
	}
	r.mu.Lock()
	var run []*pb.LoggedCommand
	for i := r.from; ; i++ {
		c, ok := r.got[i]
		if !ok {
			break
		}
		run = append(run, c)
	}
	beyond := len(r.got) - len(run)
	clients := len(r.clients)
	r.mu.Unlock()

	ctx, cancel := s.ctx(time.Minute)
	defer cancel()
	applied := 0
	for _, c := range run {
		if _, err := s.group.ProposeLazy(ctx, c.Command); err != nil {
			s.log.Error("recovery: replaying an entry failed; later entries are lost", "index", c.Index, "err", err)
			break
		}
		applied++
	}
	if _, err := s.group.Sync(ctx); err != nil {
		s.log.Error("recovery: sync", "err", err)
	}
	r.mu.Lock()
	r.lostAfter = r.from - 1 + uint64(applied)
	r.got = nil
	r.mu.Unlock()
	msg := "recovery: done; the log continues where it was"
	if beyond > 0 {
		msg = "recovery: done; changes after a missing entry are lost (their clients, or the one holding the missing entry, did not come back in time)"
	}
	s.log.Warn(msg, "replayed", applied, "clients", clients, "lost_entries_held", beyond, "last_index", r.lostAfter)
	s.m.recoveries.Inc()
	s.m.replayed.Add(float64(applied))
	r.active.Store(false)
	s.tail.on.Store(s.group.Lazy())
	close(r.done)
}
