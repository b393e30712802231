package raftgroup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Leader leases and leadership transfer.
//
// # Lease reads
//
// Read (below) serves a linearizable read on the leader without a network
// round when the leader holds a lease: a promise that no other replica can
// have become leader, so the leader's commit index covers every write
// acknowledged anywhere. The lease rests on raft's CheckQuorum rule that a
// follower which heard from its leader less than an election timeout ago
// ignores vote and pre-vote requests ("inLease" in etcd raft):
//
//   - The leader renews the lease with a ReadIndex every other tick (a
//     heartbeat round with a context). When it completes, a quorum has
//     received a heartbeat sent at time s, so each of them ignores votes
//     until at least s + (ElectionTicks-1) ticks: ticks come at most once
//     per TickInterval, and a follower's election clock restarts when the
//     heartbeat arrives, which is after s. Any new leader needs a vote from
//     one of them (or from this leader), so none exists before then. The
//     lease ends one more tick earlier: s + (ElectionTicks-2) ticks.
//   - A replica that restarts has forgotten its leader and would vote at
//     once; so for its first ElectionTicks ticks it drops vote requests,
//     which outlasts any lease its previous life helped grant, except
//     those of a transfer's campaign (below).
//   - A leadership transfer deliberately makes the target campaign at
//     once, ignoring leases: TransferLeadership ends the lease before it
//     starts, and a renewal that straddles a transfer does not count
//     (transfer epoch).
//   - The lease is only ever valid for the term it was granted in, and
//     is dropped the moment the replica stops leading.
//
// All clocks are one process's monotonic clock (time.Since of a start
// time); across machines the argument needs clock rates to agree within
// the one-tick margin, which NTP-disciplined clocks do by orders of
// magnitude.

type leaseState struct {
	start      time.Time     // the monotonic origin of sent times
	until      atomic.Int64  // lease end, as time.Since(start)
	term       atomic.Uint64 // the term the lease belongs to
	xferEpoch  uint64        // loop: bumped by every leadership transfer
	renewing   bool          // loop: a renewal read is in flight
	reads      atomic.Uint64 // reads served under the lease (stats)
	dur        time.Duration
	disabled   bool
	voteHoldTo uint64 // loop: drop vote requests until this many ticks
}

func (g *Group) initLease() {
	g.ls.start = time.Now()
	g.ls.dur = time.Duration(g.cfg.ElectionTicks-2) * g.cfg.TickInterval
	g.ls.disabled = g.cfg.DisableLease || g.ls.dur <= 0
	g.ls.voteHoldTo = uint64(g.cfg.ElectionTicks)
}

func (g *Group) now() time.Duration { return time.Since(g.ls.start) }

// leaseValid reports whether this replica leads under a valid lease.
func (g *Group) leaseValid() bool {
	if g.ls.disabled || !g.isLeader.Load() {
		return false
	}
	return g.now() < time.Duration(g.ls.until.Load()) && g.ls.term.Load() == g.term.Load()
}

// HasLease reports whether this replica is the leader and holds a valid
// lease (reads on it need no network round).
func (g *Group) HasLease() bool { return g.leaseValid() }

// Read is a linearizable read barrier, like ReadIndex, but on a leader
// that holds a lease it costs no network round: it waits only until the
// leader has applied its own commit index. Reads of the local state that
// follow see every write acknowledged before Read was called.
func (g *Group) Read(ctx context.Context) error {
	if g.leaseValid() {
		c := g.commit.Load()
		g.ls.reads.Add(1)
		return g.waitApplied(ctx, c)
	}
	return g.ReadIndex(ctx)
}

// LeaseReads counts the reads Read served under the lease.
func (g *Group) LeaseReads() uint64 { return g.ls.reads.Load() }

// renewLease runs on the loop at every tick.
func (g *Group) renewLease() {
	if g.ls.disabled || g.soft.RaftState != raft.StateLeader || g.ls.renewing || g.ticks%2 != 0 {
		return
	}
	if g.rn.BasicStatus().LeadTransferee != 0 {
		return
	}
	g.ls.renewing = true
	g.nextRead++
	g.reads[g.nextRead] = &readBatch{tick: g.ticks, sent: g.now(), epoch: g.ls.xferEpoch, renew: true}
	g.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, g.nextRead))
}

// readDone runs on the loop when raft answered a read the leader issued
// at b.sent: a quorum heard from this leader after then.
func (g *Group) readDone(b *readBatch) {
	if b.renew {
		g.ls.renewing = false
	}
	if g.ls.disabled || g.soft.RaftState != raft.StateLeader || b.epoch != g.ls.xferEpoch {
		return
	}
	if g.rn.BasicStatus().LeadTransferee != 0 {
		return
	}
	until := int64(b.sent + g.ls.dur)
	term := g.term.Load()
	if g.ls.term.Load() != term {
		g.ls.until.Store(0)
		g.ls.term.Store(term)
	}
	if until > g.ls.until.Load() {
		g.ls.until.Store(until)
	}
}

// dropLease ends the lease at once (loop only).
func (g *Group) dropLease() {
	g.ls.until.Store(0)
	g.ls.renewing = false
}

// holdVote reports whether m is a vote request this replica must not
// answer yet because it restarted less than an election timeout ago.
func (g *Group) holdVote(m *pb.Message) bool {
	if g.ticks >= g.ls.voteHoldTo || g.ls.disabled {
		return false
	}
	t := m.GetType()
	// A transfer's campaign is let through: the leader that asked for it
	// ended its lease first, and a replica that was just added (or just
	// restarted) must be able to help elect the replica a leader hands
	// over to, or the hand-over of `nacre replica replace` stalls.
	if string(m.GetContext()) == campaignTransfer {
		return false
	}
	return (t == pb.MsgVote || t == pb.MsgPreVote) && m.GetTerm() > g.term.Load()
}

// emptyVote reports whether m asks for this replica's vote while its log
// holds nothing but the group's starting point and the candidate's log
// holds more, and Config.GuardEmptyVotes says this replica's store is
// newer than the group's log. Such a replica may be one whose store was
// lost and that was formatted again under its old id: its vote could
// elect a candidate that lacks entries the group committed with this
// replica's help before the loss, and the new leader would overwrite
// them. It votes again once a leader gave it entries. (Not for every
// replica with an empty log: in a new group, a replica that has not got
// the first entries when the first leader dies must help elect the next.)
func (g *Group) emptyVote(m *pb.Message) bool {
	t := m.GetType()
	if !g.guardEmpty.Load() || g.cfg.VoteWhileEmpty ||
		(t != pb.MsgVote && t != pb.MsgPreVote) || g.store.last() > bootIndex || m.GetIndex() <= bootIndex {
		return false
	}
	if !g.warnedEmpty {
		g.warnedEmpty = true
		g.log.Warn("not voting: this replica's log is empty and the candidate's is not; it votes once a leader has sent it the log. "+
			"If its store was lost and formatted again under the same id, stop it and replace it instead (nacre replica replace --id N --new-id M). "+
			"If it never held the group's log (down since it was formatted) and the others cannot elect a leader without it, "+
			"restart it with NACRE_RAFT_VOTE_WHILE_EMPTY=1 in its environment",
			"candidate", m.GetFrom(), "candidate_last_index", m.GetIndex())
	}
	return true
}

// GuardEmptyVotes turns emptyVote's rule on or off (Config.GuardEmptyVotes
// is the initial setting).
func (g *Group) GuardEmptyVotes(on bool) { g.guardEmpty.Store(on) }

// lostEntries returns an error if a leader's heartbeat says this replica
// acknowledged entries its log does not hold: its store lost them (it was
// formatted again under its old id, or its disk dropped synced writes).
// Raft would panic on it; this names the fix.
func (g *Group) lostEntries(m *pb.Message) error {
	if m.GetType() != pb.MsgHeartbeat || m.GetCommit() <= g.store.last() {
		return nil
	}
	return fmt.Errorf("raft group %d replica %d: leader %d has this replica holding the log up to index %d, but its log ends at %d: "+
		"the store lost entries it had acknowledged (formatted again under the same replica id, or a disk that lost synced writes); "+
		"stop it, and replace it with a new replica id: nacre replica replace --id %d --new-id M --addr HOST:PORT",
		g.gid, g.id, m.GetFrom(), m.GetCommit(), g.store.last(), g.id)
}

// campaignTransfer is the context etcd raft gives the votes of a
// leadership transfer's campaign (raft.campaignTransfer, unexported).
const campaignTransfer = "CampaignTransfer"

// ErrTransferFailed: leadership did not move to the chosen replica in
// time (it may be behind or unreachable); this replica still leads.
var ErrTransferFailed = errors.New("raftgroup: leadership transfer did not complete")

// TransferLeadership hands leadership to replica to (0: the voter whose
// log is most up to date) and waits until another replica leads. It
// returns nil at once when this replica is not the leader. While a
// transfer is under way the leader takes no proposals (they fail with
// ErrProposalDropped, to be retried against the new leader), and its
// lease is over.
func (g *Group) TransferLeadership(ctx context.Context, to uint64) error {
	if !g.isLeader.Load() {
		return nil
	}
	chosen := make(chan uint64, 1)
	g.in.push(func(it *inboxItems) {
		it.calls = append(it.calls, func() { chosen <- g.startTransfer(to) })
	})
	g.signal()
	var target uint64
	select {
	case target = <-chosen:
	case <-ctx.Done():
		return ctx.Err()
	case <-g.done:
		return g.stoppedErr()
	}
	if target == 0 {
		if !g.isLeader.Load() {
			return nil
		}
		return fmt.Errorf("%w: no other voter to hand over to", ErrTransferFailed)
	}
	for {
		g.stateMu.Lock()
		ch := g.leaderCh
		g.stateMu.Unlock()
		if l := g.leader.Load(); l != 0 && l != g.id {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("%w (to replica %d): %v", ErrTransferFailed, target, ctx.Err())
		case <-g.done:
			return g.stoppedErr()
		}
	}
}

// startTransfer runs on the loop: it picks the target, ends the lease and
// asks raft to transfer. It returns the target, 0 if there is none.
func (g *Group) startTransfer(to uint64) uint64 {
	if g.soft.RaftState != raft.StateLeader {
		return 0
	}
	st := g.rn.Status()
	if to == 0 {
		ids := make([]uint64, 0, len(st.Progress))
		for id := range st.Progress {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		// The most up-to-date voter that was heard from recently, else the
		// most up-to-date one.
		for _, activeOnly := range []bool{true, false} {
			var best uint64
			for _, id := range ids {
				pr := st.Progress[id]
				if id == g.id || pr.IsLearner || (activeOnly && !pr.RecentActive) {
					continue
				}
				if to == 0 || pr.Match > best {
					to, best = id, pr.Match
				}
			}
			if to != 0 {
				break
			}
		}
	}
	if to == 0 || to == g.id {
		return 0
	}
	g.ls.xferEpoch++
	g.dropLease()
	g.log.Info("transferring leadership", "to", to)
	g.rn.TransferLeader(to)
	return to
}
