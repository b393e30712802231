package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"nacre/internal/kv"
)

// TestLazyProposersTakeTheLoopsTurn: proposers on a lazy single replica
// do the loop's work themselves while the loop goroutine keeps its own
// (the commit window's syncs, Sync, Status): every proposal is applied
// exactly once, in one order, and answered with its own result.
func TestLazyProposersTakeTheLoopsTurn(t *testing.T) {
	g, sm := openSingle(t, memDB(t), func(c *Config) { c.CommitWindow = 5 * time.Millisecond })
	defer g.Stop()
	ctx := context.Background()
	const workers, each = 8, 150
	var wg sync.WaitGroup
	errs := make(chan error, workers+1)
	stop := make(chan struct{})
	go func() { // the loop's own work, in parallel with the turns
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := g.Sync(ctx); err != nil {
				errs <- err
				return
			}
			g.Status()
		}
	}()
	counts := make([][]uint64, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				data := fmt.Sprintf("w%d-%d", w, i)
				v, err := g.ProposeLazy(ctx, []byte(data))
				if err != nil {
					errs <- err
					return
				}
				r := v.(applyResult)
				if r.Data != data {
					errs <- fmt.Errorf("proposal %q answered with the result of %q", data, r.Data)
					return
				}
				counts[w] = append(counts[w], r.Count)
			}
		}()
	}
	wg.Wait()
	close(stop)
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for w, cs := range counts {
		for i, c := range cs {
			if seen[c] || c == 0 || c > workers*each {
				t.Fatalf("worker %d's proposal %d applied as command %d: applied twice or out of range", w, i, c)
			}
			seen[c] = true
			if i > 0 && c <= cs[i-1] {
				t.Fatalf("worker %d: proposal %d applied before the one it followed", w, i)
			}
		}
	}
	if cmds := sm.commands(t); len(cmds) != workers*each {
		t.Fatalf("%d commands in the store, want %d", len(cmds), workers*each)
	}
	if s := g.Stats(); s.InlineTurns == 0 {
		t.Fatal("no proposer took the loop's turn")
	}
	if _, err := g.Propose(ctx, []byte("synced")); err != nil {
		t.Fatal(err)
	}
	if g.SyncedIndex() != g.AppliedIndex() {
		t.Fatalf("after a synced proposal: synced %d, applied %d", g.SyncedIndex(), g.AppliedIndex())
	}
}

// TestAFailedTurnStopsTheGroup: an apply that fails or panics in a
// proposer's turn stops the group as it would on the loop: the proposer
// hears of it, later calls fail, and the process lives on.
func TestAFailedTurnStopsTheGroup(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func()
		want string
	}{
		{"error", nil, "apply refused"},
		{"panic", func() { panic("apply blew up") }, "panic in raft loop"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, sm := openSingle(t, memDB(t), func(cf *Config) { cf.CommitWindow = time.Hour })
			defer g.Stop()
			ctx := context.Background()
			if _, err := g.ProposeLazy(ctx, []byte("fine")); err != nil {
				t.Fatal(err)
			}
			turns := g.Stats().InlineTurns
			sm.setHook(func([]Entry) error {
				if c.fail != nil {
					c.fail()
				}
				return errors.New("apply refused")
			})
			_, err := g.ProposeLazy(ctx, []byte("fails"))
			if !errors.Is(err, ErrStopped) {
				t.Fatalf("proposal whose apply fails: %v, want ErrStopped", err)
			}
			if g.Stats().InlineTurns == turns {
				t.Fatal("the failing proposal did not take the loop's turn")
			}
			select {
			case <-g.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("the group did not stop")
			}
			if g.Err() == nil || !strings.Contains(g.Err().Error(), c.want) {
				t.Fatalf("group error %v, want it to name %q", g.Err(), c.want)
			}
			if _, err := g.ProposeLazy(ctx, []byte("after")); !errors.Is(err, ErrStopped) {
				t.Fatalf("proposal after the failure: %v, want ErrStopped", err)
			}
		})
	}
}

// memDB opens a store in memory, closed when the test ends.
func memDB(t *testing.T) *kv.DB {
	db := openDBOn(t, vfs.NewMem())
	t.Cleanup(func() { db.Close() })
	return db
}
