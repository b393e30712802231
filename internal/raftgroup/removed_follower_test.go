package raftgroup

import (
	"context"
	"testing"
	"time"
)

// A follower removed from the group learns that its removal committed
// (the leader's empty append carrying the commit index) and applies it:
// Removed() closes, and internal/server stops it. The leader forgets the
// follower's progress as soon as it applies the removal, so no heartbeat
// goes to it afterwards: a commit-index append held for it (holdCommitOnly)
// is never sent.
func TestRemovedFollowerAppliesItsRemoval(t *testing.T) {
	transports(t, func(t *testing.T, kind string) {
		c := newCluster(t, kind, 3, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		last := c.proposeMany(ctx, "p", 5)
		c.waitApplied(last)
		l := c.leader()
		f := c.followers()[0]
		if err := l.g.RemovePeer(ctx, f.id); err != nil {
			t.Fatal(err)
		}
		select {
		case <-f.g.Removed():
		case <-time.After(2 * time.Second):
			st := f.g.Status()
			t.Fatalf("removed follower %d did not apply its removal within 2 s (commit %d, applied %d, last %d; leader commit %d)",
				f.id, st.Commit, st.Applied, st.LastIndex, l.g.Status().Commit)
		}
	})
}
