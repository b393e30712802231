package raftgroup

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"nacre/internal/kv"
)

// TestLazyCommitAnswersBeforeTheSync: with a commit window, ProposeLazy
// is answered while its entry is written and not synced; a power cut then
// loses it with the store's unsynced applies, Sync makes it durable, and
// any other proposal syncs every lazy entry before it.
func TestLazyCommitAnswersBeforeTheSync(t *testing.T) {
	mem := vfs.NewCrashableMem()
	db, err := kv.Open("db", kv.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := openSingle(t, db, func(c *Config) { c.CommitWindow = time.Hour })
	ctx := context.Background()
	if !g.Lazy() {
		t.Fatal("a single replica with a commit window is not lazy")
	}
	syncs := g.Stats().Syncs
	for i := range 20 {
		if _, err := g.ProposeLazy(ctx, fmt.Appendf(nil, "lazy-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if s := g.Stats(); s.Syncs != syncs || s.LazyWrites == 0 {
		t.Fatalf("20 lazy proposals: %d syncs, %d lazy writes; want no sync", s.Syncs-syncs, s.LazyWrites)
	}
	applied := g.AppliedIndex()
	if g.SyncedIndex() >= applied {
		t.Fatalf("synced index %d covers the applied %d before any sync", g.SyncedIndex(), applied)
	}
	lost := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})

	i, err := g.Sync(ctx)
	if err != nil || i < applied {
		t.Fatalf("Sync = %d, %v; want >= %d", i, err, applied)
	}
	kept := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})

	for i := range 5 {
		if _, err := g.ProposeLazy(ctx, fmt.Appendf(nil, "more-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := g.Propose(ctx, []byte("synced")); err != nil {
		t.Fatal(err)
	}
	if g.SyncedIndex() != g.AppliedIndex() {
		t.Fatalf("after a synced proposal: synced %d, applied %d", g.SyncedIndex(), g.AppliedIndex())
	}
	all := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	g.Stop()
	db.Close()

	for _, c := range []struct {
		name string
		fs   *vfs.MemFS
		want int
	}{{"before Sync", lost, 0}, {"after Sync", kept, 20}, {"after a synced proposal", all, 26}} {
		db, err := kv.Open("db", kv.Options{FS: c.fs})
		if err != nil {
			t.Fatal(err)
		}
		g, sm := openSingle(t, db, func(cf *Config) { cf.CommitWindow = time.Hour })
		if n := len(sm.commands(t)); n != c.want {
			t.Errorf("%s: %d commands survive the power cut, want %d", c.name, n, c.want)
		}
		if _, err := g.Propose(ctx, []byte("after")); err != nil {
			t.Errorf("%s: propose after restart: %v", c.name, err)
		}
		g.Stop()
		db.Close()
	}
}

// TestLazyCommitStoreAheadOfLog: a power cut that keeps the store's
// applies and loses the log's unsynced tail leaves the state machine
// ahead of the log; the log restarts after the applied index instead of
// refusing to start, and new entries follow it.
func TestLazyCommitStoreAheadOfLog(t *testing.T) {
	mem := vfs.NewCrashableMem()
	db, err := kv.Open("db", kv.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := openSingle(t, db, func(c *Config) { c.CommitWindow = time.Hour })
	ctx := context.Background()
	for i := range 10 {
		if _, err := g.ProposeLazy(ctx, fmt.Appendf(nil, "lazy-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	applied := g.AppliedIndex()
	if err := db.SyncWAL(); err != nil { // the store's applies reach the disk, the log's tail does not
		t.Fatal(err)
	}
	cut := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	strict := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	g.Stop()
	db.Close()

	// Unless its owner says the tail may be lost, the store is refused:
	// for all the group knows, its log lost entries it had synced.
	sdb, err := kv.Open("db", kv.Options{FS: strict})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Config{GroupID: 7, ID: 1, Peers: []Peer{{ID: 1}}, DB: sdb, Prefix: []byte("\x00r"), SM: newTestSM(t, sdb), Log: testLog(), CommitWindow: time.Hour}); err == nil {
		t.Error("a store ahead of its log started though nothing said its tail could be lost")
	}
	sdb.Close()

	db, err = kv.Open("db", kv.Options{FS: cut})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sm := &losingSM{newTestSM(t, db)}
	g, _ = openSingle(t, db, func(c *Config) { c.CommitWindow = time.Hour; c.SM = sm })
	defer g.Stop()
	if n := len(sm.commands(t)); n != 10 {
		t.Fatalf("%d commands in the store after the cut, want 10", n)
	}
	if g.StartIndex() != applied {
		t.Fatalf("log restarts after %d, want the applied index %d", g.StartIndex(), applied)
	}
	r, err := g.Propose(ctx, []byte("after"))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.(applyResult); got.Index <= applied || got.Count != 11 {
		t.Fatalf("first entry after the cut: %+v; want an index past %d and count 11", got, applied)
	}
}

// TestLazyCommitSyncsWithinTheWindow: an idle group syncs its lazy
// entries once the window has passed, with no other proposal.
func TestLazyCommitSyncsWithinTheWindow(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	g, _ := openSingle(t, db, func(c *Config) { c.CommitWindow = 20 * time.Millisecond })
	defer g.Stop()
	ctx := context.Background()
	r, err := g.ProposeLazy(ctx, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	idx := r.(applyResult).Index
	deadline := time.Now().Add(10 * time.Second)
	for g.SyncedIndex() < idx {
		if time.Now().After(deadline) {
			t.Fatalf("entry %d not synced 10 s after a 20 ms window (synced %d)", idx, g.SyncedIndex())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// losingSM is a testSM whose owner knows a power cut may have cut the log.
type losingSM struct{ *testSM }

func (losingSM) LogMayHaveLostTail() bool { return true }
