package client

import (
	"context"
	"slices"
	"sync"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

// The client's half of the durability contract (docs/architecture.md,
// "The durability contract"): an MDT answers a change before its log
// entry is synced, and hands the client the unsynced entries it must keep
// (Reply.replay) until a later reply says they are durable
// (Reply.committed). An MDT that restarts having lost them answers with
// errno.Recovering; the client gives them back (Replay) and waits for the
// recovery to end, then learns which, if any, were lost.

// keptLog is what the client keeps for one MDT.
type keptLog struct {
	mu        sync.Mutex
	ents      []*pb.LoggedCommand // ascending index, all above committed
	have      uint64              // every unsynced entry up to here is in ents
	committed uint64              // the MDT's log is durable up to here
	last      time.Time           // the last reply absorbed
	watching  bool                // watchKept runs

	replayMu sync.Mutex // one recovery exchange at a time
	epoch    uint64     // recoveries this client saw through (under replayMu)
}

// kept is the keptLog of MDT index.
func (c *Client) kept(index uint32) *keptLog {
	c.keptMu.Lock()
	defer c.keptMu.Unlock()
	k := c.keptLogs[index]
	if k == nil {
		k = &keptLog{}
		if c.keptLogs == nil {
			c.keptLogs = map[uint32]*keptLog{}
		}
		c.keptLogs[index] = k
	}
	return k
}

// prepare tells the MDT which entries the client holds already.
func (k *keptLog) prepare(cmd *pb.Command) {
	k.mu.Lock()
	cmd.ReplayHave, cmd.Keeps = k.have, true
	k.mu.Unlock()
}

// absorb keeps a reply's entries and drops those now durable; it reports
// whether a watcher must start (watchKept).
func (k *keptLog) absorb(r *pb.Reply) (watch bool) {
	if r == nil || r.Committed == 0 {
		return false // the MDT synced before it answered (a replicated MDT)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.last = time.Now()
	defer func() {
		if watch = len(k.ents) > 0 && !k.watching; watch {
			k.watching = true
		}
	}()
	k.committed = max(k.committed, r.Committed)
	for _, e := range r.Replay {
		i, found := slices.BinarySearchFunc(k.ents, e.Index, func(a *pb.LoggedCommand, idx uint64) int {
			switch {
			case a.Index < idx:
				return -1
			case a.Index > idx:
				return 1
			}
			return 0
		})
		if !found {
			k.ents = slices.Insert(k.ents, i, e)
		}
	}
	// The reply held every unsynced entry after what the request said the
	// client had, up to its own.
	k.have = max(k.have, r.Index)
	k.trim()
	return false // set by the deferred check
}

func (k *keptLog) trim() {
	i := 0
	for i < len(k.ents) && k.ents[i].Index <= k.committed {
		i++
	}
	if i > 0 {
		k.ents = slices.Delete(k.ents, 0, i)
	}
}

// unsynced reports whether the client holds changes the MDT has not synced.
func (k *keptLog) unsynced() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.ents) > 0
}

// keptPoll is how long a client holding unsynced changes goes without a
// reply from their MDT before it asks how far the MDT's log is synced:
// an idle client must learn that its changes are durable, or that the MDT
// restarted without them and waits for them (it would otherwise never
// call, and they would be lost).
const keptPoll = 100 * time.Millisecond

// watchKept runs while the client keeps changes for MDT index.
func (c *Client) watchKept(index uint32, k *keptLog) {
	t := time.NewTicker(keptPoll)
	defer t.Stop()
	for {
		select {
		case <-c.stopKeep:
			return
		case <-t.C:
		}
		k.mu.Lock()
		if len(k.ents) == 0 {
			k.watching = false
			k.mu.Unlock()
			return
		}
		idle := time.Since(k.last) >= keptPoll
		k.mu.Unlock()
		if !idle {
			continue
		}
		c.mu.Lock()
		m := c.mdts[index]
		c.mu.Unlock()
		if m == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		rep, err := m.cli.Sync(ctx, &pb.SyncRequest{})
		cancel()
		switch {
		case err == nil:
			k.mu.Lock()
			k.committed = max(k.committed, rep.Committed)
			k.trim()
			k.mu.Unlock()
		case errno.ReasonOf(err) == errno.Recovering:
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
			c.recovering(ctx, index)
			cancel()
		}
	}
}

// recoveringOn is recovering for the MDT of on.
func (c *Client) recoveringOn(ctx context.Context, on fid.FID) {
	if m, err := c.mdtFor(on); err == nil {
		c.recovering(ctx, m.index)
	}
}

// recovering is called when MDT index answered errno.Recovering: it gives
// back what this client kept and waits for the recovery to end.
func (c *Client) recovering(ctx context.Context, index uint32) {
	c.mu.Lock()
	m := c.mdts[index]
	c.mu.Unlock()
	if m == nil {
		return
	}
	k := c.kept(m.index)
	c.keptMu.Lock()
	seen := c.recoveries
	c.keptMu.Unlock()
	k.replayMu.Lock()
	defer k.replayMu.Unlock()
	if k.epoch > seen {
		return // another call went through this recovery while we waited
	}
	k.mu.Lock()
	ents := slices.Clone(k.ents)
	k.mu.Unlock()
	req := &pb.ReplayRequest{ClientId: c.id, Commands: ents}
	c.log.Warn("MDT restarted after losing changes it had not synced; giving back the ones this client kept",
		"mdt", m.index, "entries", len(ents))
	for {
		rep, err := m.cli.Replay(ctx, req)
		if err == nil && !rep.Recovering {
			c.recovered(m.index, k, rep)
			return
		}
		if err != nil && !errno.Retryable(err) {
			c.log.Warn("give back kept changes", "mdt", m.index, "err", err)
			return
		}
		req.Commands = nil // given; now wait for the end
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// recovered ends a recovery: what the MDT did not take back is lost.
func (c *Client) recovered(index uint32, k *keptLog, rep *pb.ReplayReply) {
	k.mu.Lock()
	var lost []*pb.LoggedCommand
	for _, e := range k.ents {
		if e.Index > rep.LostAfter {
			lost = append(lost, e)
		}
	}
	// The log continues from the recovery in a new term: what this
	// client held belongs to the one before.
	k.ents, k.have, k.committed = nil, 0, rep.Committed
	k.mu.Unlock()
	c.keptMu.Lock()
	c.recoveries++
	k.epoch = c.recoveries
	c.keptMu.Unlock()
	if len(lost) > 0 {
		c.log.Error("MDT lost changes it had answered: the client holding an earlier one did not come back in time",
			"mdt", index, "lost", len(lost), "first_index", lost[0].Index, "recovered_up_to", rep.LostAfter)
		return
	}
	c.log.Info("MDT recovered every change this client kept", "mdt", index)
}

// SyncMDTs makes every change this client was answered durable on its MDT
// (fsync(2), syncfs(2)): a no-op when the MDTs synced them already.
func (c *Client) SyncMDTs(ctx context.Context) error {
	c.keptMu.Lock()
	var idx []uint32
	for i, k := range c.keptLogs {
		if k.unsynced() {
			idx = append(idx, i)
		}
	}
	c.keptMu.Unlock()
	for _, i := range idx {
		c.mu.Lock()
		m := c.mdts[i]
		c.mu.Unlock()
		if m == nil {
			continue
		}
		// Any FID of the MDT's sequences names it in the retry's notes
		// and errors.
		on := c.fidOn(i)
		err := c.retry(ctx, "sync", on, func(ctx context.Context) error {
			rep, err := m.cli.Sync(ctx, &pb.SyncRequest{Force: true})
			if err != nil {
				return err
			}
			k := c.kept(i)
			k.mu.Lock()
			k.committed = max(k.committed, rep.Committed)
			k.trim()
			k.mu.Unlock()
			return nil
		})
		if err != nil {
			return c.mdtError("sync", on, err)
		}
	}
	return nil
}

// fidOn is a FID that routes to MDT index: the root for MDT0, else the
// first of a sequence the FLD says it serves.
func (c *Client) fidOn(index uint32) fid.FID {
	c.mu.Lock()
	defer c.mu.Unlock()
	if index != 0 {
		for _, r := range c.fld {
			if r.Mdt == index {
				return fid.FID{Seq: r.Start, Oid: 1}
			}
		}
	}
	return fid.Root
}
