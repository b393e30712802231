package mgs

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sort"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/obs"
	"nacre/internal/raftgroup"
	"nacre/internal/target"
	"nacre/test/wait"
)

// Tests of the MGS state machine's Snapshot and Restore: the image a
// lagging or new replica is sent must carry the FLD, the next sequence,
// the registry and the applied index, so that the replica, once it leads,
// never grants a sequence twice.

var testID = target.Identity{Fsname: "test", Kind: target.MGS, Listen: "127.0.0.1:1"}

// bare is an MGS state machine on a fresh store, without a Raft group:
// commands are applied to it directly, as the group would.
func bare(t *testing.T) *Server {
	t.Helper()
	db, err := kv.Open("mgs", kv.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return reopen(t, db)
}

// reopen is a new state machine over db's store (a restarted process).
func reopen(t *testing.T, db *kv.DB) *Server {
	t.Helper()
	s := &Server{cfg: Config{ID: testID, DB: db, Log: obs.Discard(), Now: time.Now}, log: obs.Discard()}
	s.mu.Lock()
	err := s.load()
	s.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// applyCmd applies one command as the next log entry.
func applyCmd(t *testing.T, s *Server, cmd *pb.MGSCommand) result {
	t.Helper()
	data, err := proto.Marshal(cmd)
	if err != nil {
		t.Fatal(err)
	}
	out, err := sm{s}.Apply([]raftgroup.Entry{{Index: sm{s}.Applied() + 1, Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	return out[0].(result)
}

func register(kind pb.TargetKind, index uint32, replica uint64, uuid string) *pb.MGSCommand {
	return &pb.MGSCommand{Op: &pb.MGSCommand_Register{Register: &pb.TargetInfo{
		Kind: kind, Index: index, ReplicaId: replica, Fsname: "test", Uuid: uuid, Addr: "127.0.0.1:" + uuid}}}
}

func alloc(mdt uint32, count uint64) *pb.MGSCommand {
	return &pb.MGSCommand{Op: &pb.MGSCommand_AllocSeq{AllocSeq: &pb.AllocSeqRangeRequest{Mdt: mdt, Count: count}}}
}

// smState is what a replica's state machine holds, in comparable form.
type smState struct {
	next, applied uint64
	fld           []string // "[start,end)->mdt", by start
	targets       []string // "key uuid addr"
}

func stateOf(s *Server) smState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := smState{next: s.nextSeq, applied: s.applied}
	for _, r := range s.fld {
		st.fld = append(st.fld, fmt.Sprintf("[%#x,%#x)->MDT%d", r.Start, r.End, r.Mdt))
	}
	sort.Strings(st.fld) // equal widths of hex: sorts by start
	for k, e := range s.targets {
		st.targets = append(st.targets, fmt.Sprintf("%x %s %s", k, e.info.Uuid, e.info.Addr))
	}
	sort.Strings(st.targets)
	return st
}

func sameState(t *testing.T, what string, got, want smState) {
	t.Helper()
	if got.next != want.next {
		t.Errorf("%s: next sequence %#x, want %#x", what, got.next, want.next)
	}
	if got.applied != want.applied {
		t.Errorf("%s: applied index %d, want %d", what, got.applied, want.applied)
	}
	if extra, missing := diff(got.fld, want.fld); len(extra)+len(missing) > 0 {
		t.Errorf("%s: FLD of %d ranges has %v that it should not, lacks %v", what, len(got.fld), extra, missing)
	}
	if extra, missing := diff(got.targets, want.targets); len(extra)+len(missing) > 0 {
		t.Errorf("%s: targets: has %v that it should not, lacks %v", what, extra, missing)
	}
}

// diff lists what is in got only and what is in want only (sorted lists).
func diff(got, want []string) (extra, missing []string) {
	for _, g := range got {
		if _, ok := slices.BinarySearch(want, g); !ok {
			extra = append(extra, g)
		}
	}
	for _, w := range want {
		if _, ok := slices.BinarySearch(got, w); !ok {
			missing = append(missing, w)
		}
	}
	if len(extra) == 0 && len(missing) == 0 && len(got) != len(want) {
		extra = append(extra, fmt.Sprintf("(%d entries, want %d: duplicates)", len(got), len(want)))
	}
	return extra, missing
}

// checkGrants fails if two ranges overlap or one is below fid.SeqNormal.
func checkGrants(t *testing.T, what string, gs []*pb.SeqRange) {
	t.Helper()
	for i, a := range gs {
		if a.Start < fid.SeqNormal || a.End <= a.Start {
			t.Errorf("%s: bad range [%#x,%#x)", what, a.Start, a.End)
		}
		for _, b := range gs[i+1:] {
			if a.Start < b.End && b.Start < a.End {
				t.Errorf("%s: ranges [%#x,%#x) (MDT%d) and [%#x,%#x) (MDT%d) overlap", what, a.Start, a.End, a.Mdt, b.Start, b.End, b.Mdt)
			}
		}
	}
}

func snapshotBytes(t *testing.T, s *Server) []byte {
	t.Helper()
	r, err := sm{s}.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	img, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func restore(t *testing.T, s *Server, img []byte) {
	t.Helper()
	if err := (sm{s}).Restore(io.NopCloser(bytes.NewReader(img))); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshotRestoreCarriesFLDNextSequenceAndRegistry(t *testing.T) {
	src := bare(t)
	var grants []*pb.SeqRange
	grant := func(s *Server, mdt uint32, count uint64) *pb.SeqRange {
		t.Helper()
		r := applyCmd(t, s, alloc(mdt, count))
		if r.err != nil || r.grant == nil {
			t.Fatalf("grant %d to MDT%d: %v", count, mdt, r.err)
		}
		return r.grant
	}
	for _, c := range []*pb.MGSCommand{
		register(pb.TargetKind_TARGET_MDT, 0, 0, "mdt0"),
		register(pb.TargetKind_TARGET_OST, 0, 0, "ost0"),
		register(pb.TargetKind_TARGET_OST, 1, 0, "ost1"),
		register(pb.TargetKind_TARGET_MDT, 1, 1, "mdt1r1"),
		register(pb.TargetKind_TARGET_MDT, 1, 2, "mdt1r2"),
		register(pb.TargetKind_TARGET_MGS, 0, 1, "mgsr1"),
	} {
		if r := applyCmd(t, src, c); r.err != nil {
			t.Fatal(r.err)
		}
	}
	for i, n := range []uint64{64, 1, 3, 64, 1 << 20, 7} {
		grants = append(grants, grant(src, uint32(i%2), n))
	}
	if r := applyCmd(t, src, &pb.MGSCommand{Op: &pb.MGSCommand_Deregister{Deregister: &pb.DeregisterRequest{Kind: pb.TargetKind_TARGET_MDT, Index: 1, ReplicaId: 2}}}); r.err != nil {
		t.Fatal(r.err)
	}
	checkGrants(t, "source", grants)
	want := stateOf(src)
	if len(want.fld) != len(grants) || want.next != grants[len(grants)-1].End || len(want.targets) != 5 {
		t.Fatalf("source state: %d FLD ranges, next %#x, %d targets; want %d, %#x, 5", len(want.fld), want.next, len(want.targets), len(grants), grants[len(grants)-1].End)
	}
	img := snapshotBytes(t, src)

	// Into a fresh store.
	dst := bare(t)
	restore(t, dst, img)
	sameState(t, "restored into a fresh store", stateOf(dst), want)
	if got := (sm{dst}).Applied(); got != want.applied {
		t.Errorf("restored replica reports applied index %d, want %d", got, want.applied)
	}
	if v, err := dst.cfg.DB.Get(keyNext); err != nil || !bytes.Equal(v, binary.BigEndian.AppendUint64(nil, want.next)) {
		t.Errorf("seq/next in the restored store: %x, %v; want %#x", v, err, want.next)
	}
	// The restore is in the store, not only in memory: a restart of the
	// replica finds the same state.
	sameState(t, "restored store reopened", stateOf(reopen(t, dst.cfg.DB)), want)

	// The next grant, on the restored replica and on the source (the same
	// log entry applied by both), is the same range, after every earlier
	// one.
	g := grant(dst, 0, 64)
	gsrc := grant(src, 0, 64)
	if !proto.Equal(g, gsrc) {
		t.Errorf("the entry after the snapshot grants [%#x,%#x) on the restored replica but [%#x,%#x) on the source", g.Start, g.End, gsrc.Start, gsrc.End)
	}
	if g.Start != want.next {
		t.Errorf("grant after restore starts at %#x, want the next sequence %#x", g.Start, want.next)
	}
	checkGrants(t, "grants before and after the restore", append(slices.Clone(grants), g))
	sameState(t, "restored replica and source after one more grant", stateOf(dst), stateOf(src))

	// Into a store that is behind and holds what the image no longer has
	// (MDT1 replica 2, deregistered since): the image replaces it all;
	// the health of a target that is still the same one is kept.
	stale := bare(t)
	for _, c := range []*pb.MGSCommand{
		register(pb.TargetKind_TARGET_MDT, 0, 0, "mdt0"),
		register(pb.TargetKind_TARGET_MDT, 1, 2, "mdt1r2"),
		register(pb.TargetKind_TARGET_OST, 0, 0, "ost0-formatted-again"),
		alloc(0, 64),
	} {
		if r := applyCmd(t, stale, c); r.err != nil {
			t.Fatal(r.err)
		}
	}
	heard := time.Now().Add(-time.Second)
	stale.mu.Lock()
	stale.targets[string(targetKey(pb.TargetKind_TARGET_MDT, 0, 0))].h.lastHeard = heard
	stale.targets[string(targetKey(pb.TargetKind_TARGET_OST, 0, 0))].h.lastHeard = heard
	stale.mu.Unlock()
	restore(t, stale, img)
	sameState(t, "restored over a stale store", stateOf(stale), want)
	sameState(t, "stale store reopened after the restore", stateOf(reopen(t, stale.cfg.DB)), want)
	stale.mu.Lock()
	mdt0 := stale.targets[string(targetKey(pb.TargetKind_TARGET_MDT, 0, 0))].h.lastHeard
	ost0 := stale.targets[string(targetKey(pb.TargetKind_TARGET_OST, 0, 0))].h.lastHeard
	stale.mu.Unlock()
	if !mdt0.Equal(heard) {
		t.Errorf("MDT0's last heartbeat after the restore: %v, want %v (same uuid: kept)", mdt0, heard)
	}
	if !ost0.IsZero() {
		t.Errorf("OST0's last heartbeat after the restore: %v, want none (another uuid)", ost0)
	}
	g = grant(stale, 1, 5)
	if g.Start != want.next {
		t.Errorf("grant after restoring over a stale store starts at %#x, want %#x", g.Start, want.next)
	}
	checkGrants(t, "grants before and after restoring over a stale store", append(slices.Clone(grants), g))
}

// countingSM counts the snapshots a replica installs.
type countingSM struct {
	raftgroup.StateMachine
	restores *atomic.Int32
}

func (c countingSM) Restore(r raftgroup.SnapshotData) error {
	c.restores.Add(1)
	return c.StateMachine.Restore(r)
}

// memReplica is one MGS replica of an in-process group on a MemNetwork.
type memReplica struct {
	id       uint64
	fs       vfs.FS
	db       *kv.DB
	tr       *raftgroup.MemTransport
	s        *Server
	restores atomic.Int32
}

type memGroup struct {
	t     *testing.T
	net   *raftgroup.MemNetwork
	peers []raftgroup.Peer
	reps  map[uint64]*memReplica
}

func newMemGroup(t *testing.T, n int) *memGroup {
	g := &memGroup{t: t, net: raftgroup.NewMemNetwork(), reps: map[uint64]*memReplica{}}
	for id := uint64(1); id <= uint64(n); id++ {
		g.reps[id] = &memReplica{id: id, fs: vfs.NewMem()}
		g.peers = append(g.peers, raftgroup.Peer{ID: id, Addr: fmt.Sprintf("mem-mgs-%d", id)})
	}
	for id := range g.reps {
		g.start(id)
	}
	t.Cleanup(func() {
		for id := range g.reps {
			g.stop(id)
		}
	})
	return g
}

func (g *memGroup) start(id uint64) {
	g.t.Helper()
	r := g.reps[id]
	db, err := kv.Open("mgs", kv.Options{FS: r.fs})
	if err != nil {
		g.t.Fatal(err)
	}
	r.db, r.tr = db, g.net.Transport(g.peers[id-1].Addr)
	r.s, err = New(Config{ID: testID, DB: db, Log: obs.Discard(), Group: func(m raftgroup.StateMachine) (*raftgroup.Group, error) {
		return raftgroup.Start(raftgroup.Config{GroupID: 1 << 32, ID: id, Peers: g.peers, DB: db, Prefix: []byte("\x00r"),
			SM: countingSM{m, &r.restores}, Transport: r.tr, Log: obs.Discard(),
			TickInterval: 10 * time.Millisecond, ElectionTicks: 15, HeartbeatTicks: 1, KeepEntries: 8})
	}})
	if err != nil {
		g.t.Fatal(err)
	}
}

func (g *memGroup) stop(id uint64) {
	r := g.reps[id]
	if r.s == nil {
		return
	}
	r.s.Stop()
	r.tr.Close()
	r.db.Close()
	r.s, r.db, r.tr = nil, nil, nil
}

func (g *memGroup) leader() *memReplica {
	g.t.Helper()
	var l *memReplica
	wait.For(g.t, 10*time.Second, "an MGS replica to lead", func() bool {
		for _, r := range g.reps {
			if r.s != nil && r.s.IsLeader() {
				l = r
				return true
			}
		}
		return false
	})
	return l
}

// waitApplied waits until every running replica applied index.
func (g *memGroup) waitApplied(index uint64) {
	g.t.Helper()
	wait.NoErr(g.t, 10*time.Second, fmt.Sprintf("every running replica to apply %d", index), func() error {
		for _, r := range g.reps {
			if r.s != nil && r.s.Group().AppliedIndex() < index {
				return fmt.Errorf("replica %d applied %d", r.id, r.s.Group().AppliedIndex())
			}
		}
		return nil
	})
}

// TestReplicaRestoredFromSnapshotLeadsAndGrantsNoRangeTwice: a replica
// that was down while the log moved on is sent a snapshot, then leads;
// its grants follow every earlier one.
func TestReplicaRestoredFromSnapshotLeadsAndGrantsNoRangeTwice(t *testing.T) {
	g := newMemGroup(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := g.leader()
	var grants []*pb.SeqRange
	grant := func(r *memReplica, mdt uint32, count uint64) {
		t.Helper()
		gr, err := r.s.AllocSeqRange(ctx, &pb.AllocSeqRangeRequest{Mdt: mdt, Count: count})
		if err != nil {
			t.Fatalf("grant on replica %d: %v", r.id, err)
		}
		grants = append(grants, gr)
	}
	if _, err := l.s.Register(ctx, &pb.TargetInfo{Kind: pb.TargetKind_TARGET_MDT, Fsname: "test", Uuid: "mdt0", Addr: "x:1"}); err != nil {
		t.Fatal(err)
	}
	grant(l, 0, 64)
	var lag *memReplica
	for _, r := range g.reps {
		if r != l {
			lag = r
			break
		}
	}
	g.stop(lag.id)
	if _, err := l.s.Register(ctx, &pb.TargetInfo{Kind: pb.TargetKind_TARGET_OST, Index: 3, Fsname: "test", Uuid: "ost3", Addr: "x:2"}); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		grant(l, uint32(i%2), uint64(1+i%3))
	}
	if st := l.s.Group().Status(); st.FirstIndex <= 2 {
		t.Fatalf("the leader's log starts at %d: it was not compacted, no snapshot would be sent", st.FirstIndex)
	}
	g.start(lag.id)
	g.waitApplied(l.s.Group().AppliedIndex())
	if lag.restores.Load() == 0 {
		t.Fatalf("replica %d caught up without installing a snapshot", lag.id)
	}
	want := stateOf(l.s)
	sameState(t, fmt.Sprintf("replica %d after the snapshot", lag.id), stateOf(lag.s), want)
	if len(want.fld) != len(grants) {
		t.Fatalf("FLD has %d ranges, %d were granted", len(want.fld), len(grants))
	}

	// The restored replica leads: its grants follow every earlier one.
	if err := l.s.Group().TransferLeadership(ctx, lag.id); err != nil {
		t.Fatal(err)
	}
	if nl := g.leader(); nl != lag {
		t.Fatalf("replica %d leads, not the restored replica %d", nl.id, lag.id)
	}
	prevEnd := grants[len(grants)-1].End
	grant(lag, 0, 64)
	grant(lag, 1, 1)
	if s := grants[len(grants)-2].Start; s != prevEnd {
		t.Errorf("first grant of the restored leader starts at %#x, want %#x", s, prevEnd)
	}
	checkGrants(t, "every grant", grants)
	g.waitApplied(lag.s.Group().AppliedIndex())
	want = stateOf(lag.s)
	for _, r := range g.reps {
		sameState(t, fmt.Sprintf("replica %d at the end", r.id), stateOf(r.s), want)
	}
	if len(want.fld) != len(grants) {
		t.Fatalf("FLD has %d ranges, %d were granted", len(want.fld), len(grants))
	}
}
