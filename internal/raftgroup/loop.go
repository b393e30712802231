package raftgroup

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"nacre/internal/fault"
)

// The ready loop. See doc.go ("Threading model") for the shape; in short,
// one goroutine owns the RawNode, runs raft with AsyncStorageWrites and
// acts as both of raft's storage "threads" itself, in this order:
//
//  1. take everything queued by other goroutines (messages, proposals,
//     reads, transport reports) and Step it;
//  2. take a Ready: send network messages at once, queue the local
//     append and apply work;
//  3. if there is apply work, apply it (it is durable already) and go
//     back to 1, so that the callers just answered can queue their next
//     proposals before the fsync below;
//  4. otherwise write all queued append work in one batch with one fsync,
//     then deliver the responses raft attached to it.
//
// A follower does 4 before 3: its acknowledgement is what the leader
// waits for, and nobody waits for its applies.

func (g *Group) run() {
	var err error
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic in raft loop: %v\n%s", r, debug.Stack())
		}
		g.shutdown(err)
		close(g.done)
	}()
	err = g.loop()
}

func (g *Group) loop() error {
	ticker := time.NewTicker(g.cfg.TickInterval)
	defer ticker.Stop()
	g.withTurn(func() error {
		g.nextRead = uint64(time.Now().UnixNano())
		g.checkReplayed()
		return nil
	})
	for {
		var busy bool
		var lazyC <-chan time.Time
		g.withTurn(func() error {
			busy, lazyC = g.busy(), g.lazyC
			return nil
		})
		// After letting go of the turn: a proposer that found it taken
		// left its proposal to the holder (takeTurn).
		busy = busy || !g.in.empty()
		var (
			ticked, lazy bool
			statusReq    chan Status
		)
		if busy {
			select {
			case <-g.stopC:
				return nil
			case <-ticker.C:
				ticked = true
			case statusReq = <-g.statusC:
			case <-lazyC:
				lazy = true
			default:
			}
		} else {
			select {
			case <-g.stopC:
				return nil
			case <-ticker.C:
				ticked = true
			case statusReq = <-g.statusC:
			case <-lazyC:
				lazy = true
			case <-g.wake:
			}
		}
		if err := g.withTurn(func() error {
			switch {
			case ticked:
				g.tick()
			case statusReq != nil:
				statusReq <- g.status()
			case lazy && g.lazyC == lazyC:
				g.lazyC = nil
				g.syncLog()
			}
			return g.step()
		}); err != nil {
			return err
		}
	}
}

// withTurn runs f holding the turn; a panic in f lets go of it.
func (g *Group) withTurn(f func() error) error {
	g.turn.Lock()
	defer g.turn.Unlock()
	return f()
}

// busy reports whether the loop has work queued that needs no wake-up.
func (g *Group) busy() bool {
	return len(g.applyQ) > 0 || len(g.appendQ) > 0 || g.rn.HasReady()
}

// step takes what other goroutines queued and does one step of work.
func (g *Group) step() error {
	if g.stepErr != nil {
		return g.stepErr
	}
	g.drain()
	if g.lost != nil {
		return g.lost
	}
	if g.syncErr != nil {
		return g.syncErr
	}
	return g.process()
}

// drain steps everything other goroutines queued.
func (g *Group) drain() {
	it := g.in.take(g.spare)
	if it.empty() {
		g.spare = it
		return
	}
	for _, r := range it.reports {
		switch {
		case r.unreachable:
			g.rn.ReportUnreachable(r.id)
		case r.snapFailed:
			g.rn.ReportSnapshot(r.id, raft.SnapshotFailure)
		default:
			g.rn.ReportSnapshot(r.id, raft.SnapshotFinish)
		}
	}
	for _, f := range it.calls {
		f()
	}
	for _, m := range it.msgs {
		if g.lost == nil {
			g.lost = g.lostEntries(m)
		}
		if g.lost != nil || g.emptyVote(m) || g.holdVote(m) {
			continue
		}
		if err := g.rn.Step(m); err != nil {
			g.log.Debug("raft refused a message", "type", m.GetType(), "from", m.GetFrom(), "err", err)
		}
	}
	if len(it.props) > 0 {
		g.propose(it.props)
	}
	if len(it.reads) > 0 {
		g.nextRead++
		g.reads[g.nextRead] = &readBatch{reqs: append([]*readReq(nil), it.reads...), tick: g.ticks, sent: g.now(), epoch: g.ls.xferEpoch}
		g.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, g.nextRead))
	}
	it.clear()
	g.spare = it
}

// propose hands queued proposals to raft: all commands in one MsgProp (one
// append, one Ready), membership changes one by one.
func (g *Group) propose(props []*proposal) {
	bs := g.rn.BasicStatus()
	if bs.RaftState != raft.StateLeader {
		err := g.notLeader()
		for _, p := range props {
			p.finish(nil, err)
		}
		return
	}
	term := bs.GetTerm()
	ents := make([]*pb.Entry, 0, len(props))
	cmds := make([]*proposal, 0, len(props))
	for _, p := range props {
		if p.cc != nil {
			g.proposeConfChange(p, term)
			continue
		}
		ents = append(ents, &pb.Entry{Data: p.data})
		cmds = append(cmds, p)
	}
	if len(ents) == 0 {
		return
	}
	if err := g.rn.Step(&pb.Message{Type: pb.MsgProp.Enum(), From: new(g.id), Entries: ents}); err != nil {
		err = fmt.Errorf("%w: %v", ErrProposalDropped, err)
		for _, p := range cmds {
			p.finish(nil, err)
		}
		return
	}
	g.stats.proposals.Add(uint64(len(cmds)))
	for _, p := range cmds {
		p.term = term
		g.waiters[p.seq] = p
	}
}

func (g *Group) proposeConfChange(p *proposal, term uint64) {
	data, err := proto.Marshal(p.cc)
	if err != nil {
		p.finish(nil, fmt.Errorf("encode membership change: %w", err))
		return
	}
	m := &pb.Message{Type: pb.MsgProp.Enum(), From: new(g.id),
		Entries: []*pb.Entry{{Type: pb.EntryConfChangeV2.Enum(), Data: data}}}
	if err := g.rn.Step(m); err != nil {
		p.finish(nil, fmt.Errorf("%w: %v", ErrProposalDropped, err))
		return
	}
	// Raft replaces a change it refuses by an empty entry in place.
	if m.GetEntries()[0].GetType() != pb.EntryConfChangeV2 {
		p.finish(nil, ErrMembershipBusy)
		return
	}
	g.stats.proposals.Add(1)
	p.term = term
	g.waiters[p.seq] = p
}

// process does one step of work: take a Ready if there is one, then apply
// or persist.
func (g *Group) process() error {
	if g.rn.HasReady() {
		g.handleReady(g.rn.Ready())
	}
	if g.soft.RaftState != raft.StateLeader && len(g.appendQ) > 0 {
		// A follower's acknowledgement gates the leader's commit, and no
		// caller waits on its applies: persist (and acknowledge) first.
		if err := g.persistStage(); err != nil {
			return err
		}
	}
	if len(g.applyQ) > 0 {
		return g.applyStage()
	}
	if len(g.appendQ) > 0 {
		return g.persistStage()
	}
	return nil
}

func (g *Group) handleReady(rd raft.Ready) {
	g.stats.readies.Add(1)
	if rd.SoftState != nil {
		g.onSoftState(*rd.SoftState)
		if g.soft.RaftState == raft.StateLeader && g.readFloor == 0 {
			// A new leader's first entry is in this Ready. Reads wait for
			// it: raft answers a single voter's ReadIndex with its commit
			// index even before that entry commits, when the commit index
			// may still miss entries committed (and acknowledged) in
			// earlier terms.
			term := g.term.Load()
			for _, e := range rd.Entries {
				if e.GetTerm() == term {
					g.readFloor = e.GetIndex()
					break
				}
			}
		} else if g.soft.RaftState != raft.StateLeader {
			g.readFloor = 0
		}
	}
	if hs := rd.HardState; !raft.IsEmptyHardState(hs) {
		g.term.Store(hs.GetTerm())
		g.commit.Store(hs.GetCommit())
	}
	for _, rs := range rd.ReadStates {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		id := binary.BigEndian.Uint64(rs.RequestCtx)
		if b := g.reads[id]; b != nil {
			delete(g.reads, id)
			g.readDone(b)
			idx := max(rs.Index, g.readFloor)
			for _, r := range b.reqs {
				r.done <- readResult{index: idx}
			}
		}
	}
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			g.appendQ = append(g.appendQ, m)
		case raft.LocalApplyThread:
			g.applyQ = append(g.applyQ, m)
		case g.id:
			// Not produced with AsyncStorageWrites; step it next round.
			g.in.push(func(it *inboxItems) { it.msgs = append(it.msgs, m) })
			g.signal()
		default:
			g.send(m)
		}
	}
	// Appends leave before this replica's own fsync (doc.go).
	g.flushOut()
}

func (g *Group) onSoftState(ss raft.SoftState) {
	prev := g.soft
	g.soft = ss
	wasLeader, isLeader := prev.RaftState == raft.StateLeader, ss.RaftState == raft.StateLeader
	term := g.rn.BasicStatus().GetTerm()
	g.term.Store(term)
	g.leader.Store(ss.Lead)
	if isLeader && !wasLeader {
		g.leaderSince.Store(time.Now().UnixNano())
	}
	g.isLeader.Store(isLeader)
	if wasLeader && !isLeader {
		// The entries of pending proposals may still commit under the
		// next leader, or be overwritten; this replica will not learn
		// which in time, so tell the callers now (the MDT's reply cache
		// makes their retries exactly-once).
		g.failWaiters(ErrProposalDropped)
	}
	if prev.Lead != ss.Lead || wasLeader != isLeader {
		clear(g.held)
		g.dropLease()
		g.log.Info("leader changed", "leader", ss.Lead, "term", term, "state", stateName(ss.RaftState))
		// Read requests in flight may have been dropped with the old
		// leader: have the callers ask again right away.
		for id, b := range g.reads {
			for _, r := range b.reqs {
				r.done <- readResult{retry: true}
			}
			delete(g.reads, id)
		}
		g.broadcast(&g.leaderCh)
		g.notify.post(leaderEvent{isLeader: isLeader, leader: ss.Lead, term: term})
	}
}

func (g *Group) failWaiters(err error) {
	for seq, p := range g.waiters {
		p.finish(nil, err)
		delete(g.waiters, seq)
	}
}

// send queues a message for the transport; flushOut hands the queued
// messages over, one batch per replica, so that a Ready's messages to a
// replica leave in one write.
func (g *Group) send(m *pb.Message) {
	if g.tr == nil {
		return
	}
	g.out = append(g.out, m)
}

// batchSender is a Transport that takes several messages to one replica
// at once (GRPCTransport).
type batchSender interface {
	SendBatch(group uint64, to Peer, ms []*pb.Message)
}

// flushOut sends what send queued, in order per replica.
func (g *Group) flushOut() {
	if len(g.out) == 0 {
		return
	}
	g.holdCommitOnly()
	for to, h := range g.held {
		covered, some := false, false
		for _, m := range g.out {
			if m.GetTo() == to {
				some = true
				// An append carries the commit index as of when raft made
				// it: one made before the held message brings less.
				covered = covered || m.GetType() == pb.MsgApp && m.GetCommit() >= h.GetCommit()
			}
		}
		switch {
		case covered:
			delete(g.held, to)
		case some:
			delete(g.held, to)
			g.out = append(g.out, h)
		}
	}
	bs, batches := g.tr.(batchSender)
	for i, m := range g.out {
		if m == nil {
			continue
		}
		to := m.GetTo()
		addr := g.peerAddr(to)
		if addr == "" {
			g.log.Debug("no address for replica; message dropped", "to", to, "type", m.GetType())
			g.in.push(func(it *inboxItems) { it.reports = append(it.reports, report{id: to, unreachable: true}) })
			g.out[i] = nil
			continue
		}
		if m.GetType() == pb.MsgSnap {
			g.stats.snapsSent.Add(1)
			g.log.Info("sending snapshot", "to", to, "index", m.GetSnapshot().GetMetadata().GetIndex())
		}
		if !batches {
			g.tr.Send(g.gid, Peer{ID: to, Addr: addr}, m)
			g.out[i] = nil
			continue
		}
		// Gather this replica's messages, in order.
		ms := g.batch[:0]
		for j := i; j < len(g.out); j++ {
			if g.out[j] != nil && g.out[j].GetTo() == to {
				ms = append(ms, g.out[j])
				g.out[j] = nil
			}
		}
		bs.SendBatch(g.gid, Peer{ID: to, Addr: addr}, ms)
		clear(ms)
		g.batch = ms[:0]
	}
	clear(g.out)
	g.out = g.out[:0]
}

// holdCommitOnly takes out of g.out the leader's empty appends to
// followers it has sent its whole log: such a message only spreads the
// commit index, which the next append (under load, a few hundred
// microseconds later) or the next heartbeat carries as well. Sending each
// one costs the leader a write, the follower a wake-up, a read, an
// acknowledgement and an apply of its own, and the leader the read of that
// acknowledgement: on the project's 2-core machines, with three replicas
// sharing them, that is CPU the replicated commit waits for (one client
// creating files: 1.18x the creates per second with it held). The newest
// is held per follower; flushOut drops it when an append goes to that
// follower and sends it along with anything else, such as the heartbeat
// of the next tick, so a follower applies at most a heartbeat later than
// it would have.
func (g *Group) holdCommitOnly() {
	if g.soft.RaftState != raft.StateLeader {
		return
	}
	for i, m := range g.out {
		// An empty append to a replica in StateReplicate means raft has
		// sent it every entry already.
		if m.GetType() != pb.MsgApp || len(m.GetEntries()) > 0 || !g.replicating(m.GetTo()) {
			continue
		}
		if g.held == nil {
			g.held = map[uint64]*pb.Message{}
		}
		g.held[m.GetTo()] = m
		g.out[i] = nil
	}
	g.out = slices.DeleteFunc(g.out, func(m *pb.Message) bool { return m == nil })
}

// replicating tells whether the leader streams appends to replica id
// (raft's StateReplicate): a message held from a replica being probed
// would hold up its catching up.
func (g *Group) replicating(id uint64) bool {
	ok := false
	g.rn.WithProgress(func(pid uint64, _ raft.ProgressType, pr tracker.Progress) {
		if pid == id {
			ok = pr.State == tracker.StateReplicate
		}
	})
	return ok
}

// persistStage writes all queued append work in one write to the log,
// synced if any of it carries responses (which promise durability), then
// delivers the responses.
func (g *Group) persistStage() error {
	msgs := g.appendQ
	g.appendQ = nil
	lazy := g.lazyBatch(msgs)
	if fault.Hit(FaultPowerCut) != nil {
		g.powerCut()
	}
	nents, sync, staged := 0, false, false
	for _, m := range msgs {
		if !raft.IsEmptySnap(m.GetSnapshot()) {
			// Records staged before the install are written with it, in
			// order: the install's reset comes after them.
			if err := g.installSnapshot(m.GetSnapshot()); err != nil {
				return err
			}
			staged = true
		}
		if err := g.store.append(m.GetEntries()); err != nil {
			return err
		}
		nents += len(m.GetEntries())
		if len(m.GetEntries()) > 0 || !raft.IsEmptySnap(m.GetSnapshot()) {
			g.unsynced, staged = true, true
		}
		if m.Term != nil {
			if m.GetTerm() != g.store.hs.GetTerm() || m.GetVote() != g.store.hs.GetVote() {
				g.unsynced = true
			}
			hs := &pb.HardState{Term: new(m.GetTerm()), Vote: new(m.GetVote()), Commit: new(m.GetCommit())}
			if err := g.store.setHardState(hs); err != nil {
				return err
			}
		}
		// Responses promise that entries, the snapshot, the term and the
		// vote are durable; the commit index need not be (it is
		// recovered, see recover), so a write that only moves it - the
		// empty append a leader sends to spread its commit index - is
		// not worth an fsync of its own.
		if len(m.GetResponses()) > 0 && g.unsynced {
			sync = true
		}
	}
	if sync && lazy {
		// Answered before the sync (doc.go, "Lazy commit"): the entries
		// are written, and synced within the window.
		sync = false
		if g.lazyC == nil {
			g.lazyT.Reset(g.cfg.CommitWindow)
			g.lazyC = g.lazyT.C
		}
		g.stats.lazyWrites.Add(1)
		g.lazyEnts += uint64(nents)
	}
	if sync {
		g.unsynced = false
	}
	// A write of the hard state alone (a new commit index) stays staged
	// until the next write: it needs no durability, nor a system call.
	if staged || sync {
		if sync {
			if err := fault.Hit(FaultLogSync); err != nil {
				return fmt.Errorf("sync raft log: %w", err)
			}
		}
		if err := g.store.log.Write(sync); err != nil {
			return fmt.Errorf("write raft log: %w", err)
		}
		g.stats.logWrites.Add(1)
		if sync {
			g.stats.syncs.Add(1)
			g.stats.syncedEntries.Add(uint64(nents) + g.lazyEnts)
			g.lazyEnts = 0
			g.noteSynced()
		}
	}
	for _, m := range msgs {
		for _, r := range m.GetResponses() {
			g.deliverLocal(r)
		}
	}
	g.flushOut()
	return nil
}

// lazyBatch reports whether append work may be written without a sync
// (Config.CommitWindow): this replica leads alone, and the work holds
// only entries of its own ProposeLazy calls, no snapshot and no new term
// or vote. Anything else is synced, and its sync covers the lazy writes
// before it.
func (g *Group) lazyBatch(msgs []*pb.Message) bool {
	if g.cfg.CommitWindow <= 0 || !g.solo.Load() || g.soft.RaftState != raft.StateLeader {
		return false
	}
	n := 0
	for _, m := range msgs {
		if !raft.IsEmptySnap(m.GetSnapshot()) {
			return false
		}
		if m.Term != nil && (m.GetTerm() != g.store.hs.GetTerm() || m.GetVote() != g.store.hs.GetVote()) {
			return false
		}
		for _, e := range m.GetEntries() {
			if e.GetType() != pb.EntryNormal {
				return false
			}
			id, seq, _, err := decodeProposal(e.GetData())
			if err != nil || id != g.id {
				return false
			}
			if p := g.waiters[seq]; p == nil || !p.lazy || p.term != e.GetTerm() {
				return false
			}
			n++
		}
	}
	return n > 0
}

// syncLog makes everything written to the log durable (the commit
// window's end, Sync).
func (g *Group) syncLog() {
	if g.syncErr != nil {
		return
	}
	if g.lazyC != nil {
		g.lazyT.Stop()
		g.lazyC = nil
	}
	if !g.unsynced {
		g.noteSynced()
		return
	}
	if fault.Hit(FaultPowerCut) != nil {
		g.powerCut()
	}
	if err := fault.Hit(FaultLogSync); err != nil {
		g.syncErr = fmt.Errorf("sync raft log: %w", err)
		return
	}
	if err := g.store.log.Write(true); err != nil {
		g.syncErr = fmt.Errorf("sync raft log: %w", err)
		return
	}
	g.unsynced = false
	g.stats.syncs.Add(1)
	g.stats.syncedEntries.Add(g.lazyEnts)
	g.lazyEnts = 0
	g.noteSynced()
}

// noteSynced records that the log is durable up to its last entry.
func (g *Group) noteSynced() {
	if l := g.store.last(); l > g.synced.Load() {
		g.synced.Store(l)
	}
}

// powerCut drops what the log holds unsynced, as a power cut would, and
// kills the process (FaultPowerCut).
func (g *Group) powerCut() {
	g.log.Warn("fault raft.log.powercut: dropping the log's unsynced writes and killing the process", "synced", g.synced.Load(), "last", g.store.last())
	if err := g.store.log.LoseUnsynced(); err != nil {
		g.log.Error("power cut", "err", err)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way
}

// deliverLocal routes a response raft attached to storage work.
func (g *Group) deliverLocal(r *pb.Message) {
	if r.GetTo() != g.id {
		g.send(r)
		return
	}
	if err := g.rn.Step(r); err != nil {
		g.log.Debug("raft refused a storage response", "type", r.GetType(), "err", err)
	}
}

// installSnapshot makes the state machine and the log jump to a snapshot
// received from the leader. The state machine's Restore is atomic; the
// pending marker, written before it and removed once the log is reset,
// lets a restart finish or forget an install that a crash interrupted
// (Group.recover).
func (g *Group) installSnapshot(snap *pb.Snapshot) error {
	meta := snap.GetMetadata()
	idx := meta.GetIndex()
	sp := g.takeSpool(idx)
	if sp == nil {
		return fmt.Errorf("install snapshot at %d: no image was received for it", idx)
	}
	defer sp.release()
	mv, err := proto.Marshal(meta)
	if err != nil {
		return err
	}
	// Not synced by itself: the store keeps writes in order, and the
	// sync below covers it with Restore's writes.
	if err := g.db.Set(g.keys.pending, mv, false); err != nil {
		return fmt.Errorf("install snapshot at %d: write marker: %w", idx, err)
	}
	if g.smApplied < idx {
		rc, err := sp.open()
		if err != nil {
			return fmt.Errorf("install snapshot at %d: %w", idx, err)
		}
		err = g.sm.Restore(rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("install snapshot at %d: restore state machine: %w", idx, err)
		}
		a := g.sm.Applied()
		if a < idx {
			return fmt.Errorf("install snapshot at %d: the image reflects index %d only", idx, a)
		}
		g.smApplied = a
	}
	// The image must be durable before the log forgets what it replaces.
	if err := g.db.SyncWAL(); err != nil {
		return fmt.Errorf("install snapshot at %d: sync the store: %w", idx, err)
	}
	if err := g.store.resetTo(meta); err != nil {
		return err
	}
	if err := g.store.log.Write(true); err != nil {
		return fmt.Errorf("install snapshot at %d: reset the raft log: %w", idx, err)
	}
	g.unsynced = false
	g.noteSynced()
	if err := g.store.release(); err != nil {
		return err
	}
	// Synced: a marker left behind would make a restart reset the log
	// again, over entries appended after the install.
	if err := g.db.Delete(g.keys.pending, true); err != nil {
		return fmt.Errorf("install snapshot at %d: remove marker: %w", idx, err)
	}
	g.mergePeers(snap.GetData())
	g.noteConf()
	g.confHist = nil
	g.stats.snapsRecv.Add(1)
	g.log.Info("installed snapshot", "index", idx, "term", meta.GetTerm(), "sm_applied", g.smApplied,
		"voters", meta.GetConfState().GetVoters())
	g.applied.Store(g.smApplied)
	g.broadcast(&g.appliedCh)
	return nil
}

// applyStage applies all queued committed entries with one Apply call.
func (g *Group) applyStage() error {
	msgs := g.applyQ
	g.applyQ = nil
	var ents []*pb.Entry
	if len(msgs) == 1 {
		ents = msgs[0].GetEntries()
	} else {
		for _, m := range msgs {
			ents = append(ents, m.GetEntries()...)
		}
	}
	if len(ents) == 0 {
		for _, m := range msgs {
			for _, r := range m.GetResponses() {
				g.deliverLocal(r)
			}
		}
		g.flushOut()
		return nil
	}
	// Entries at or below the state machine's applied index are raft
	// re-delivering what a restart or a snapshot already covers.
	prevApplied := g.smApplied
	sm := g.smEnts[:0]
	for _, e := range ents {
		if e.GetIndex() <= prevApplied {
			continue
		}
		se := Entry{Index: e.GetIndex()}
		if e.GetType() == pb.EntryNormal && len(e.GetData()) > 0 {
			_, _, payload, err := decodeProposal(e.GetData())
			if err != nil {
				return fmt.Errorf("entry %d: %w", e.GetIndex(), err)
			}
			se.Data = payload
		}
		sm = append(sm, se)
	}
	var results []any
	if len(sm) > 0 {
		var err error
		results, err = g.sm.Apply(sm)
		if err != nil {
			return fmt.Errorf("apply entries [%d, %d]: %w", sm[0].Index, sm[len(sm)-1].Index, err)
		}
		if len(results) != len(sm) {
			return fmt.Errorf("apply entries [%d, %d]: state machine returned %d results for %d entries",
				sm[0].Index, sm[len(sm)-1].Index, len(results), len(sm))
		}
		g.smApplied = sm[len(sm)-1].Index
		g.stats.applyBatches.Add(1)
		g.stats.appliedEntries.Add(uint64(len(sm)))
	}
	clear(sm)
	g.smEnts = sm[:0]

	ri, answered := 0, 0
	for _, e := range ents {
		var res any
		if e.GetIndex() > prevApplied {
			res = results[ri]
			ri++
		}
		switch e.GetType() {
		case pb.EntryNormal:
			if len(e.GetData()) == 0 {
				continue
			}
			id, seq, _, _ := decodeProposal(e.GetData())
			if g.resolve(id, seq, e.GetTerm(), res, nil) {
				answered++
			}
		case pb.EntryConfChange, pb.EntryConfChangeV2:
			if err := g.applyConfChange(e); err != nil {
				return err
			}
		}
	}
	g.store.applied = ents[len(ents)-1].GetIndex()
	for _, m := range msgs {
		for _, r := range m.GetResponses() {
			g.deliverLocal(r)
		}
	}
	g.flushOut()
	g.applied.Store(g.smApplied)
	g.broadcast(&g.appliedCh)
	if err := g.maybeCompact(); err != nil {
		return err
	}
	g.checkReplayed()
	if g.soft.RaftState != raft.StateLeader {
		// A restarted single voter campaigns as soon as raft has
		// re-applied its configuration changes.
		g.maybeCampaign()
	}
	if answered > 0 && !g.inTurn {
		// Let the callers just answered run before the next fsync, so
		// that their next proposals join it instead of waiting a whole
		// cycle (doc.go, "Batching").
		runtime.Gosched()
	}
	return nil
}

// resolve hands an applied entry's result to the proposal waiting for it.
func (g *Group) resolve(id, seq, term uint64, v any, err error) bool {
	if id != g.id {
		return false
	}
	if p := g.waiters[seq]; p != nil && p.term == term {
		delete(g.waiters, seq)
		p.finish(v, err)
		return true
	}
	return false
}

func (g *Group) applyConfChange(e *pb.Entry) error {
	var cc pb.ConfChangeI
	var ctx []byte
	switch e.GetType() {
	case pb.EntryConfChange:
		var c pb.ConfChange
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			return fmt.Errorf("entry %d: decode conf change: %w", e.GetIndex(), err)
		}
		cc, ctx = &c, c.GetContext()
	default:
		var c pb.ConfChangeV2
		if err := proto.Unmarshal(e.GetData(), &c); err != nil {
			return fmt.Errorf("entry %d: decode conf change: %w", e.GetIndex(), err)
		}
		cc, ctx = &c, c.GetContext()
	}
	for _, c := range cc.AsV2().Changes {
		if c.GetType() == pb.ConfChangeRemoveNode {
			if err := g.noteRemoved(c.GetNodeId()); err != nil {
				return err
			}
			if c.GetNodeId() == g.id {
				defer g.noteRemovedSelf()
			}
			// Raft forgets the replica's progress below, and with it every
			// heartbeat to it: send what it was held back, or it never
			// learns that its removal committed (applyStage flushes it).
			if h := g.held[c.GetNodeId()]; h != nil {
				delete(g.held, c.GetNodeId())
				g.out = append(g.out, h)
			}
		}
	}
	cs := g.rn.ApplyConfChange(cc)
	g.store.conf = cs
	g.noteConf()
	g.confHist = append(g.confHist, confAt{index: e.GetIndex(), cs: cs})
	id, seq, peer := decodeChangeContext(ctx)
	if peer != nil && peer.Addr != "" {
		g.setPeerAddr(peer.Id, peer.Addr)
	}
	g.log.Info("membership changed", "index", e.GetIndex(), "change", raft.DescribeConfChange(cc),
		"voters", cs.GetVoters(), "learners", cs.GetLearners())
	g.resolve(id, seq, e.GetTerm(), nil, nil)
	return nil
}

// confAt is the configuration as of index i (i at or after the
// truncation point and at most the applied index).
func (g *Group) confAt(i uint64) *pb.ConfState {
	cs := g.store.trunc.GetConfState()
	for _, c := range g.confHist {
		if c.index > i {
			break
		}
		cs = c.cs
	}
	return cs
}

// maxLogSegments bounds the segments a log keeps for a group with few
// entries: every start opens a new segment (Open seals the newest), and a
// group that never gets KeepEntries entries behind its applied index (an
// MGS, an idle MDT) was never compacted, so each restart left another
// full-size segment (481 MiB of log for a 24 KB store after 59 starts).
const maxLogSegments = 8

// maybeCompact drops log entries more than KeepEntries behind the applied
// index, a quarter of KeepEntries at a time; and, when the log has more
// than maxLogSegments segments, every applied entry older than the two
// newest segments (a follower that needs one gets a snapshot).
func (g *Group) maybeCompact() error {
	keep := g.cfg.KeepEntries
	applied := g.store.applied
	t := g.store.trunc.GetIndex()
	var c uint64
	switch {
	case applied > keep && applied-keep >= t+max(keep/4, 1):
		c = applied - keep
	case g.store.log.Segments() > maxLogSegments:
		c = min(g.store.firstFrom(g.store.log.ActiveSeq()-1)-1, applied)
		if c <= t {
			return nil
		}
	default:
		return nil
	}
	cs := g.confAt(c)
	// The state machine's applies up to c must be durable before the log
	// drops the entries they came from: they are written without sync.
	if err := g.db.SyncWAL(); err != nil {
		return fmt.Errorf("compact raft log to %d: sync the store: %w", c, err)
	}
	if err := g.store.compact(c, cs); err != nil {
		return err
	}
	// Synced before segments are released: a truncation point lost with
	// its segments gone would leave a log that misses entries.
	if err := g.store.log.Write(true); err != nil {
		return fmt.Errorf("compact raft log to %d: %w", c, err)
	}
	g.unsynced = false
	g.noteSynced()
	if err := g.store.release(); err != nil {
		return fmt.Errorf("compact raft log to %d: %w", c, err)
	}
	i := 0
	for i < len(g.confHist) && g.confHist[i].index <= c {
		i++
	}
	g.confHist = g.confHist[i:]
	g.stats.compactions.Add(1)
	return nil
}

func (g *Group) tick() {
	g.ticks++
	g.rn.Tick()
	// Raft drops read requests silently in some states (no leader yet);
	// hand those back to their callers to retry.
	for id, b := range g.reads {
		if g.ticks-b.tick > uint64(2*g.cfg.ElectionTicks) {
			if b.renew {
				g.ls.renewing = false
			}
			for _, r := range b.reqs {
				r.done <- readResult{retry: true}
			}
			delete(g.reads, id)
		}
	}
	g.renewLease()
	g.maybeCampaign()
}

// checkReplayed tells Start, once, that raft has applied everything that
// was committed at start, and whether this replica is the only voter.
func (g *Group) checkReplayed() {
	if g.replayed == nil || g.store.applied < g.replayTo {
		return
	}
	g.replayed <- g.singleVoter()
	g.replayed = nil
	g.maybeCampaign()
}

// maybeCampaign makes a replica that is the only voter leader without
// waiting for an election timeout (a single-replica MDT starts in one
// fsync, not a second or two).
func (g *Group) maybeCampaign() {
	if g.soft.RaftState == raft.StateLeader || !g.singleVoter() || g.ticks < g.lastCampaign+2 && g.lastCampaign > 0 {
		return
	}
	bs := g.rn.BasicStatus()
	if bs.Applied < bs.GetCommit() {
		// Raft refuses to campaign with unapplied conf changes; wait.
		return
	}
	g.lastCampaign = g.ticks + 1
	if err := g.rn.Campaign(); err != nil {
		g.log.Debug("campaign failed", "err", err)
	}
}

// singleVoter reports whether this replica is the group's only voter.
func (g *Group) singleVoter() bool {
	cs := g.store.conf
	return len(cs.GetVoters()) == 1 && cs.GetVoters()[0] == g.id && len(cs.GetVotersOutgoing()) == 0
}

func (g *Group) status() Status {
	st := g.rn.Status()
	s := Status{
		GroupID: g.gid, ID: g.id, State: stateName(st.RaftState),
		Leader: st.Lead, Term: st.GetTerm(), Vote: st.GetVote(), Commit: st.GetCommit(),
		Applied: g.applied.Load(), FirstIndex: g.store.first(), LastIndex: g.store.last(),
		Stats: g.stats.load(), Lease: g.leaseValid(), LeaseReads: g.ls.reads.Load(),
	}
	for id := range st.Config.Voters.IDs() {
		s.Voters = append(s.Voters, id)
	}
	for id := range st.Config.Learners {
		s.Learners = append(s.Learners, id)
	}
	slices.Sort(s.Voters)
	slices.Sort(s.Learners)
	if st.Progress != nil {
		s.Progress = make(map[uint64]PeerProgress, len(st.Progress))
		for id, pr := range st.Progress {
			s.Progress[id] = PeerProgress{
				Addr: g.peerAddr(id), Match: pr.Match, Next: pr.Next, State: progressName(pr.State),
				RecentActive: pr.RecentActive, Learner: pr.IsLearner,
			}
		}
	}
	return s
}

func stateName(s raft.StateType) string {
	switch s {
	case raft.StateLeader:
		return "leader"
	case raft.StateFollower:
		return "follower"
	case raft.StateCandidate:
		return "candidate"
	case raft.StatePreCandidate:
		return "pre-candidate"
	}
	return s.String()
}

func progressName(s tracker.StateType) string {
	switch s {
	case tracker.StateProbe:
		return "probe"
	case tracker.StateReplicate:
		return "replicate"
	case tracker.StateSnapshot:
		return "snapshot"
	}
	return s.String()
}

// shutdown runs on the loop goroutine as it exits.
func (g *Group) shutdown(err error) {
	g.turn.Lock()
	defer g.turn.Unlock()
	g.exited = true
	if err != nil {
		g.err = err
		g.log.Error("raft group stopped by a fatal error", "err", err)
	}
	stopped := g.stoppedErr()
	g.failWaiters(stopped)
	for id, b := range g.reads {
		for _, r := range b.reqs {
			r.done <- readResult{retry: true}
		}
		delete(g.reads, id)
	}
	it := g.in.take(inboxItems{})
	for _, p := range it.props {
		p.finish(nil, stopped)
	}
	if g.tr != nil {
		g.tr.Unregister(g.gid)
	}
	if err := g.store.log.Close(); err != nil && g.err == nil {
		g.err = fmt.Errorf("close raft log: %w", err)
	}
	g.in.mu.Lock()
	g.in.closed = true
	for idx, sp := range g.in.spools {
		sp.release()
		delete(g.in.spools, idx)
	}
	g.in.mu.Unlock()
	g.isLeader.Store(false)
	g.leader.Store(0)
	g.broadcast(&g.leaderCh)
}
