package raftgroup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"nacre/internal/kv"
	"nacre/internal/raftlog"
)

func TestSingleReplicaAppliesConcurrentProposalsExactlyOnceInOrder(t *testing.T) {
	db, err := kv.OpenMem()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g, sm := openSingle(t, db, nil)
	defer g.Stop()
	if !g.IsLeader() || g.Leader() != 1 {
		t.Fatalf("single replica is not leader after Start: leader %d", g.Leader())
	}

	const workers, each = 16, 100
	ctx := context.Background()
	var wg sync.WaitGroup
	results := make([][]applyResult, workers)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Worker pairs propose identical bytes: identity must come
				// from the proposal, not from the data.
				data := fmt.Sprintf("w%d-%d", w/2, i)
				v, err := g.Propose(ctx, []byte(data))
				if err != nil {
					errs <- err
					return
				}
				r := v.(applyResult)
				if r.Data != data {
					errs <- fmt.Errorf("worker %d got the result of %q for %q", w, r.Data, data)
					return
				}
				results[w] = append(results[w], r)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// Every caller got a distinct entry; each worker's entries are in its
	// own order; the state machine holds each exactly once.
	seen := map[uint64]bool{}
	for w, rs := range results {
		for i, r := range rs {
			if seen[r.Index] {
				t.Fatalf("index %d returned to two callers", r.Index)
			}
			seen[r.Index] = true
			if i > 0 && r.Index <= rs[i-1].Index {
				t.Fatalf("worker %d: entry %d applied after %d", w, r.Index, rs[i-1].Index)
			}
		}
	}
	cmds := sm.commands(t)
	if len(cmds) != workers*each {
		t.Fatalf("state machine applied %d commands, want %d", len(cmds), workers*each)
	}
	count := map[string]int{}
	for _, c := range cmds {
		count[c.Data]++
	}
	for k, n := range count {
		if n != 2 {
			t.Fatalf("command %q applied %d times, want 2 (two workers propose it)", k, n)
		}
	}
	st := g.Status()
	if st.State != "leader" || st.Applied != g.AppliedIndex() || st.Applied < uint64(workers*each) {
		t.Fatalf("status %+v", st)
	}
	t.Logf("%d proposals, %.1f entries per fsync, %d apply calls", workers*each, st.Stats.EntriesPerSync(), st.Stats.ApplyBatches)
	if st.Stats.EntriesPerSync() < 2 {
		t.Errorf("16 concurrent proposers averaged %.2f entries per fsync; batching is not working", st.Stats.EntriesPerSync())
	}
}

func TestEmptyCommandIsDistinctFromRaftEntries(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	var mu sync.Mutex
	var seen []Entry
	g, sm := openSingle(t, db, nil)
	sm.setHook(func(es []Entry) error {
		mu.Lock()
		seen = append(seen, es...)
		mu.Unlock()
		return nil
	})
	defer g.Stop()
	if _, err := g.Propose(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	last := seen[len(seen)-1]
	if last.Data == nil || len(last.Data) != 0 {
		t.Fatalf("an empty command reached Apply as %#v; want non-nil empty Data", last.Data)
	}
}

func TestRestartReopensTheSameStoreAndContinues(t *testing.T) {
	fs := vfs.NewMem()
	open := func() *kv.DB { return openDBOn(t, fs) }
	ctx := context.Background()
	db := open()
	g, _ := openSingle(t, db, nil)
	for i := range 50 {
		if _, err := g.Propose(ctx, fmt.Appendf(nil, "a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	applied, term := g.AppliedIndex(), g.Term()
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Propose(ctx, []byte("late")); !errors.Is(err, ErrStopped) {
		t.Fatalf("Propose after Stop: %v, want ErrStopped", err)
	}
	db.Close()

	db = open()
	defer db.Close()
	g, sm := openSingle(t, db, nil)
	defer g.Stop()
	if g.AppliedIndex() < applied {
		t.Fatalf("applied index went back from %d to %d", applied, g.AppliedIndex())
	}
	if g.Term() <= term {
		t.Fatalf("term %d after restart, want > %d (a new election)", g.Term(), term)
	}
	v, err := g.Propose(ctx, []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	if r := v.(applyResult); r.Index <= applied || r.Count != 51 {
		t.Fatalf("first proposal after restart: %+v, want index > %d and count 51", r, applied)
	}
	if n := len(sm.commands(t)); n != 51 {
		t.Fatalf("%d commands after restart, want 51", n)
	}
}

// TestCrashLosesNothingAcknowledgedAndReappliesCommittedEntries cuts the
// power (only synced data survives) twice: once after a burst of
// acknowledged proposals, and once while an entry is committed and durable
// in the log but its Apply has not reached the store.
func TestCrashLosesNothingAcknowledgedAndReappliesCommittedEntries(t *testing.T) {
	mem := vfs.NewCrashableMem()
	db, err := kv.Open("db", kv.Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	g, sm := openSingle(t, db, nil)
	ctx := context.Background()

	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				d := fmt.Sprintf("w%d-%d", w, i)
				if _, err := g.Propose(ctx, []byte(d)); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				acked[d] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	crash1 := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})

	// Hold the next Apply until the power is cut: the entry is then in
	// the synced log, and its apply is not in the store.
	entered, release := make(chan uint64, 1), make(chan struct{})
	var once sync.Once
	sm.setHook(func(es []Entry) error {
		for _, e := range es {
			if string(e.Data) == "held" {
				once.Do(func() { entered <- e.Index; <-release })
			}
		}
		return nil
	})
	done := make(chan error, 1)
	go func() {
		_, err := g.Propose(ctx, []byte("held"))
		done <- err
	}()
	heldIndex := <-entered
	crash2 := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for i, fs := range []*vfs.MemFS{crash1, crash2} {
		db, err := kv.Open("db", kv.Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		sm := newTestSM(t, db)
		before := sm.Applied()
		g, _ := openSingle(t, db, func(c *Config) { c.SM = sm })
		// Start returns once everything committed is applied again.
		got := map[string]int{}
		for _, c := range sm.commands(t) {
			got[c.Data]++
		}
		for d := range acked {
			if got[d] != 1 {
				t.Errorf("crash %d: acknowledged %q applied %d times after restart", i+1, d, got[d])
			}
		}
		if i == 1 {
			if before >= heldIndex {
				t.Fatalf("crash 2: the held apply (index %d) reached the store (applied %d); the test did not hold it", heldIndex, before)
			}
			// The committed entry is re-applied on restart.
			if err := g.WaitApplied(ctx, heldIndex); err != nil {
				t.Fatal(err)
			}
			if got := sm.commands(t); got[len(got)-1].Data != "held" || got[len(got)-1].Index != heldIndex {
				t.Fatalf("crash 2: last command after restart %+v, want \"held\" at %d", got[len(got)-1], heldIndex)
			}
		}
		if _, err := g.Propose(ctx, []byte("after")); err != nil {
			t.Fatalf("crash %d: propose after restart: %v", i+1, err)
		}
		g.Stop()
		db.Close()
	}
}

func TestApplyErrorStopsTheGroupAndFailsPendingProposals(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	g, sm := openSingle(t, db, nil)
	boom := errors.New("disk on fire")
	sm.setHook(func([]Entry) error { return boom })
	_, err := g.Propose(context.Background(), []byte("x"))
	if !errors.Is(err, ErrStopped) {
		t.Fatalf("Propose: %v, want ErrStopped", err)
	}
	select {
	case <-g.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("group did not stop")
	}
	if err := g.Stop(); !errors.Is(err, boom) {
		t.Fatalf("Stop: %v, want the apply error", err)
	}
	if _, err := g.Propose(context.Background(), []byte("y")); !errors.Is(err, ErrStopped) {
		t.Fatalf("Propose after fatal error: %v", err)
	}
}

func TestLogIsCompactedBehindTheAppliedIndex(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	// Segments of 4 KiB: 200 entries fill several, and compaction must
	// give the old ones up.
	adjust := func(c *Config) { c.KeepEntries = 20; c.LogSegmentSize = 4096 }
	g, _ := openSingle(t, db, adjust)
	for i := range 200 {
		if _, err := g.Propose(context.Background(), fmt.Appendf(nil, "%d-%s", i, strings.Repeat("x", 60))); err != nil {
			t.Fatal(err)
		}
	}
	st := g.Status()
	if st.Stats.Compactions == 0 || st.FirstIndex < st.Applied-2*20 || st.FirstIndex > st.Applied-20+1 {
		t.Fatalf("log [%d, %d] applied %d after %d compactions; want about 20 entries kept", st.FirstIndex, st.LastIndex, st.Applied, st.Stats.Compactions)
	}
	g.Stop()
	// The segments that held only compacted entries are gone (recycled
	// as at most two spares, or deleted).
	names, err := db.FS().List(defaultLogDir(db, 7))
	if err != nil {
		t.Fatal(err)
	}
	segs := 0
	for _, n := range names {
		if strings.HasSuffix(n, ".seg") {
			segs++
		}
	}
	if segs > 3 || len(names) > segs+2 {
		t.Fatalf("log directory after compaction: %v", names)
	}
	g, _ = openSingle(t, db, adjust)
	defer g.Stop()
	if re := g.Status(); re.FirstIndex != st.FirstIndex || re.Applied < st.Applied {
		t.Fatalf("reopened log starts at %d, applied %d; want %d, %d", re.FirstIndex, re.Applied, st.FirstIndex, st.Applied)
	}
}

func TestReadIndexOnSingleReplica(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	g, _ := openSingle(t, db, nil)
	defer g.Stop()
	v, err := g.Propose(context.Background(), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := g.ReadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if g.AppliedIndex() < v.(applyResult).Index {
		t.Fatal("ReadIndex returned before the applied index reached an acknowledged write")
	}
}

func TestOnLeaderChangeIsCalledInOrder(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	ch := make(chan string, 10)
	g, _ := openSingle(t, db, func(c *Config) {
		c.OnLeaderChange = func(isLeader bool, leader, term uint64) {
			ch <- fmt.Sprintf("%v/%d/%d", isLeader, leader, term)
		}
	})
	select {
	case e := <-ch:
		if e != fmt.Sprintf("true/1/%d", g.Term()) {
			t.Fatalf("first leader event %s", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no leader event")
	}
	g.Stop()
}

// TestRestartFinishesOrForgetsAnInterruptedSnapshotInstall plants the
// pending-install marker that a crash during a snapshot install leaves,
// with the state machine either restored (its applied index reached the
// snapshot) or not.
func TestRestartFinishesOrForgetsAnInterruptedSnapshotInstall(t *testing.T) {
	for _, restored := range []bool{true, false} {
		t.Run(fmt.Sprintf("restored=%v", restored), func(t *testing.T) {
			fs := vfs.NewMem()
			db, err := kv.Open("db", kv.Options{FS: fs})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			g, _ := openSingle(t, db, nil)
			for i := range 10 {
				if _, err := g.Propose(context.Background(), fmt.Appendf(nil, "%d", i)); err != nil {
					t.Fatal(err)
				}
			}
			applied, term := g.AppliedIndex(), g.Term()
			g.Stop()

			const snapIndex = 50
			k := newKeys([]byte("\x00r"))
			meta := &pb.SnapshotMetadata{Index: new(uint64(snapIndex)), Term: new(term + 5),
				ConfState: &pb.ConfState{Voters: []uint64{1}}}
			mv, _ := proto.Marshal(meta)
			db.Set(k.pending, mv, true)
			if restored {
				// What Restore would have written: the image's state and
				// applied index.
				db.Set(smApplied, binary.BigEndian.AppendUint64(nil, snapIndex), true)
			}

			g, _ = openSingle(t, db, nil)
			defer g.Stop()
			if _, err := db.Get(k.pending); !errors.Is(err, kv.ErrNotFound) {
				t.Fatal("the pending marker survived the restart")
			}
			st := g.Status()
			if restored {
				if st.FirstIndex != snapIndex+1 || st.Term <= term+5 {
					t.Fatalf("after a finished install: log starts at %d (want %d), term %d (want > %d)", st.FirstIndex, snapIndex+1, st.Term, term+5)
				}
			} else if st.FirstIndex != bootIndex+1 || st.Applied < applied {
				t.Fatalf("after a forgotten install: log starts at %d, applied %d; want the old log", st.FirstIndex, st.Applied)
			}
			v, err := g.Propose(context.Background(), []byte("next"))
			if err != nil {
				t.Fatal(err)
			}
			if restored && v.(applyResult).Index <= snapIndex {
				t.Fatalf("first entry after the install at %d", v.(applyResult).Index)
			}
		})
	}
}

// TestRestartAppliesAcknowledgedEntriesBeforeStartReturns recreates what
// a crash can leave: the last entries durable in the log, but neither
// their applies nor the commit index that covered them. Start of a single
// voter must not return (nor ReadIndex answer) before they are applied
// again; the raised commit index alone does not cover them.
func TestRestartAppliesAcknowledgedEntriesBeforeStartReturns(t *testing.T) {
	fs := vfs.NewMem()
	db, err := kv.Open("db", kv.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	g, sm := openSingle(t, db, nil)
	var last uint64
	for i := range 20 {
		v, err := g.Propose(context.Background(), fmt.Appendf(nil, "c%d", i))
		if err != nil {
			t.Fatal(err)
		}
		last = v.(applyResult).Index
	}
	g.Stop()

	// Lose the applies of the last 5 commands and the commit index of
	// the last 10 entries.
	for i := last - 4; i <= last; i++ {
		db.Delete(binary.BigEndian.AppendUint64(append([]byte(nil), smLog...), i), false)
	}
	db.Set(smApplied, binary.BigEndian.AppendUint64(nil, last-5), false)
	db.Set(smCount, binary.BigEndian.AppendUint64(nil, sm.count-5), false)
	// The newest hard state record is the one replayed: add one with the
	// lower commit index.
	var hs *pb.HardState
	l, err := raftlog.Open(fs, defaultLogDir(db, 7), raftlog.Options{}, func(r raftlog.Record) error {
		if r.Type == recHard {
			hs = new(pb.HardState)
			return proto.Unmarshal(r.Payload, hs)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	hs.Commit = new(last - 10)
	hv, _ := proto.Marshal(hs)
	if _, err := l.Add(recHard, hv); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	g, sm = openSingle(t, db, nil)
	defer g.Stop()
	if n := len(sm.commands(t)); n != 20 {
		t.Fatalf("Start returned with %d of 20 acknowledged commands applied", n)
	}
}

// TestRestartsDoNotGrowTheLogOfAQuietGroup: every start opens a new log
// segment, and a group that never has KeepEntries entries behind its
// applied index (an MGS, an idle MDT) was never compacted, so every
// restart left one more full-size segment behind. Past maxLogSegments the
// applied entries older than the two newest segments are dropped.
func TestRestartsDoNotGrowTheLogOfAQuietGroup(t *testing.T) {
	fs := vfs.NewMem()
	open := func() *kv.DB { return openDBOn(t, fs) }
	adjust := func(c *Config) { c.LogSegmentSize = 4096 }
	ctx := context.Background()
	segments := func(db *kv.DB) int {
		names, err := fs.List(defaultLogDir(db, 7))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, name := range names {
			if strings.HasSuffix(name, ".seg") {
				n++
			}
		}
		return n
	}
	most := 0
	for round := range 3 * maxLogSegments {
		db := open()
		g, sm := openSingle(t, db, adjust)
		if _, err := g.Propose(ctx, fmt.Appendf(nil, "r%d", round)); err != nil {
			t.Fatal(err)
		}
		if n := len(sm.commands(t)); n != round+1 {
			t.Fatalf("round %d: %d commands applied, want %d", round, n, round+1)
		}
		if err := g.Stop(); err != nil {
			t.Fatal(err)
		}
		most = max(most, segments(db))
		db.Close()
	}
	// The live segments, plus the spares the preparer keeps.
	if most > maxLogSegments+3 {
		t.Fatalf("a quiet group's log grew to %d segments over %d restarts", most, 3*maxLogSegments)
	}
}

// openDBOn opens (or reopens) the store "db" on fs, for tests that
// restart a group over the same files.
func openDBOn(t *testing.T, fs vfs.FS) *kv.DB {
	t.Helper()
	db, err := kv.Open("db", kv.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	return db
}
