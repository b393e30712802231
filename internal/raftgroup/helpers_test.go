package raftgroup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"nacre/internal/grpcx"
	"nacre/internal/kv"
	"nacre/internal/obs"
	"nacre/test/wait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testLog is quiet unless RAFTGROUP_TEST_LOG is set (to "debug" or "info").
func testLog() *slog.Logger {
	switch os.Getenv("RAFTGROUP_TEST_LOG") {
	case "":
		return obs.Discard()
	case "info":
		return obs.NewLogger(os.Stderr, false, slog.LevelInfo)
	}
	return obs.NewLogger(os.Stderr, false, slog.LevelDebug)
}

// testSM is the tiny state machine of the tests: it records every applied
// command under its index and counts them, in the same kv.DB as the raft
// log, with the applied index in the same batch.
type testSM struct {
	db    *kv.DB
	count uint64 // commands applied; loop goroutine only (and Restore)

	applyCalls atomic.Int64
	// hook, if set, runs at the start of every Apply call.
	hook atomic.Pointer[func(entries []Entry) error]
}

func (s *testSM) setHook(f func(entries []Entry) error) {
	if f == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&f)
}

var (
	smApplied = []byte("sm/applied")
	smCount   = []byte("sm/count")
	smLog     = []byte("sm/e/")
	smRange   = KeyRange{Lower: []byte("sm/"), Upper: []byte("sm0")}
)

func newTestSM(t testing.TB, db *kv.DB) *testSM {
	sm := &testSM{db: db}
	sm.count = sm.get(smCount)
	return sm
}

func (s *testSM) get(k []byte) uint64 {
	v, err := s.db.Get(k)
	if errors.Is(err, kv.ErrNotFound) {
		return 0
	}
	if err != nil {
		panic(err)
	}
	return binary.BigEndian.Uint64(v)
}

type applyResult struct {
	Index uint64
	Data  string
	Count uint64
}

func (s *testSM) Apply(entries []Entry) ([]any, error) {
	s.applyCalls.Add(1)
	if h := s.hook.Load(); h != nil {
		if err := (*h)(entries); err != nil {
			return nil, err
		}
	}
	b := s.db.NewWriteBatch()
	defer b.Close()
	res := make([]any, len(entries))
	for i, e := range entries {
		if e.Data == nil {
			continue
		}
		s.count++
		b.Set(binary.BigEndian.AppendUint64(append([]byte(nil), smLog...), e.Index), e.Data)
		res[i] = applyResult{Index: e.Index, Data: string(e.Data), Count: s.count}
	}
	b.Set(smCount, binary.BigEndian.AppendUint64(nil, s.count))
	b.Set(smApplied, binary.BigEndian.AppendUint64(nil, entries[len(entries)-1].Index))
	if err := b.Commit(false); err != nil {
		return nil, err
	}
	return res, nil
}

func (s *testSM) Applied() uint64 { return s.get(smApplied) }

func (s *testSM) Snapshot() (SnapshotData, error) { return SnapshotKV(s.db, smRange), nil }

func (s *testSM) Restore(r SnapshotData) error {
	if err := RestoreKV(s.db, r, smRange); err != nil {
		return err
	}
	s.count = s.get(smCount)
	return nil
}

// commands returns the applied commands in index order.
func (s *testSM) commands(t testing.TB) []applyResult {
	t.Helper()
	it, err := s.db.NewIter(smLog, kv.PrefixEnd(smLog))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []applyResult
	for it.First(); it.Valid(); it.Next() {
		out = append(out, applyResult{Index: binary.BigEndian.Uint64(it.Key()[len(smLog):]), Data: string(it.Value())})
	}
	return out
}

// node is one replica of a test cluster: its store, transport and group.
type node struct {
	id    uint64
	fs    vfs.FS // the store's file system; nil: the real disk in dir
	dir   string
	db    *kv.DB
	sm    *testSM
	g     *Group
	addr  string
	tr    testTransport
	srv   *grpc.Server // gRPC clusters only
	serve sync.WaitGroup
}

type testTransport interface {
	Transport
	SetFilter(Filter)
	Close() error
}

// cluster is replicas of group 1 in this process, over real gRPC on
// loopback or over a MemNetwork.
type cluster struct {
	t      testing.TB
	mem    *MemNetwork // nil: gRPC
	onDisk bool        // stores on the real disk, for benchmarks
	slow   bool        // gRPC: messages over the gRPC stream, not the fast path
	nodes  map[uint64]*node
	peers  []Peer
	cfg    func(*Config) // adjusts every replica's config
}

// transports runs a cluster test over a MemNetwork, in a synctest bubble
// (inMem), and over gRPC with messages on the fast path. The gRPC run
// takes real time (elections, leases and timeouts on the wall clock) and
// is left to the full tier: under -short the MemNetwork run stands for
// the group's logic, and the tests that run allTransports keep gRPC in
// the fast tier too.
func transports(t *testing.T, test func(t *testing.T, kind string)) {
	runOver(t, []string{"mem", "grpc"}, true, test)
}

// allTransports adds gRPC with messages on the gRPC stream (the fallback
// for peers without the fast path), and runs every transport under -short.
func allTransports(t *testing.T, test func(t *testing.T, kind string)) {
	runOver(t, []string{"mem", "grpc", "grpc-stream"}, false, test)
}

func runOver(t *testing.T, kinds []string, fullTierGRPC bool, test func(t *testing.T, kind string)) {
	for _, kind := range kinds {
		t.Run(kind, func(t *testing.T) {
			if kind == "mem" {
				inMem(t, func(t *testing.T) { test(t, kind) })
				return
			}
			if fullTierGRPC && testing.Short() {
				t.Skip("over gRPC in the full tier; the MemNetwork run stands for it under -short")
			}
			test(t, kind)
		})
	}
}

// inMem runs a test of replicas on a MemNetwork in a synctest bubble:
// their stores are in memory (vfs.NewMem) and their messages go through
// channels, so nothing in it waits on a socket or a disk, and ticks,
// elections, leases and timeouts run on the bubble's clock, which moves
// on as soon as every goroutine in it waits. A test that waits out an
// election timeout takes no wall-clock time, and the order of events is
// the same on a loaded machine as on an idle one.
func inMem(t *testing.T, test func(t *testing.T)) {
	synctest.Test(t, test)
}

// testTiming keeps elections quick but not so quick that a busy 2-core
// machine running -race loses heartbeats.
func testTiming(c *Config) {
	c.TickInterval = 10 * time.Millisecond
	c.ElectionTicks = 15
	c.HeartbeatTicks = 1
}

// newCluster starts n replicas of group 1 over the transport kind
// ("grpc" or "mem"; "grpc-disk" puts the stores on the real disk).
func newCluster(t testing.TB, kind string, n int, adjust func(*Config)) *cluster {
	c := &cluster{t: t, nodes: map[uint64]*node{}, cfg: adjust, onDisk: strings.HasSuffix(kind, "-disk"), slow: strings.HasPrefix(kind, "grpc-stream")}
	if kind == "mem" {
		c.mem = NewMemNetwork()
	}
	for i := 1; i <= n; i++ {
		nd := c.addNode(uint64(i))
		c.peers = append(c.peers, Peer{ID: nd.id, Addr: nd.addr})
	}
	for i := 1; i <= n; i++ {
		c.start(uint64(i), false)
	}
	t.Cleanup(c.close)
	return c
}

// attach gives nd a transport at nd.addr (a fresh one if empty).
func (c *cluster) attach(nd *node) {
	c.t.Helper()
	if c.mem != nil {
		if nd.addr == "" {
			nd.addr = fmt.Sprintf("mem-%d", nd.id)
		}
		nd.tr = c.mem.Transport(nd.addr)
		return
	}
	addr := nd.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	var ln net.Listener
	var err error
	// The old listener's port may linger a moment after a restart.
	if !wait.Poll(time.Second, func() bool { ln, err = net.Listen("tcp", addr); return err == nil }) {
		c.t.Fatal(err)
	}
	nd.addr = ln.Addr().String()
	nd.srv = grpcx.NewServer(nil)
	tr := NewGRPCTransport(nd.srv, testLog())
	nd.tr = tr
	if !c.slow {
		ln = tr.Listener(ln) // messages over the fast path (fast.go)
	}
	nd.serve.Add(1)
	go func() {
		defer nd.serve.Done()
		nd.srv.Serve(ln)
	}()
}

func (c *cluster) detach(nd *node) {
	if nd.srv != nil {
		nd.srv.Stop()
		nd.serve.Wait()
		nd.srv = nil
	}
	nd.tr.Close()
	nd.tr = nil
}

// start opens node id's store (creating it the first time) and starts its
// replica; join starts it as a replica to be added.
func (c *cluster) start(id uint64, join bool) *node {
	c.t.Helper()
	nd := c.nodes[id]
	if nd.tr == nil {
		c.attach(nd)
	}
	dir := "db"
	if nd.fs == nil {
		dir = nd.dir
	}
	db, err := kv.Open(dir, kv.Options{FS: nd.fs, CacheSize: 8 << 20})
	if err != nil {
		c.t.Fatal(err)
	}
	nd.db = db
	nd.sm = newTestSM(c.t, db)
	cfg := Config{
		GroupID: 1, ID: id, Peers: c.peers, Join: join, DB: db, Prefix: []byte("\x00r"),
		SM: nd.sm, Transport: nd.tr, Log: testLog(),
	}
	testTiming(&cfg)
	if c.cfg != nil {
		c.cfg(&cfg)
	}
	if nd.g, err = Start(cfg); err != nil {
		c.t.Fatal(err)
	}
	return nd
}

// stop stops node id's replica, server and store (a clean shutdown).
func (c *cluster) stop(id uint64) {
	nd := c.nodes[id]
	if nd.g == nil {
		return
	}
	if err := nd.g.Stop(); err != nil {
		c.t.Errorf("stop replica %d: %v", id, err)
	}
	nd.g = nil
	c.detach(nd)
	if err := nd.db.Close(); err != nil {
		c.t.Errorf("close store %d: %v", id, err)
	}
	nd.db = nil
}

func (c *cluster) close() {
	for id := range c.nodes {
		c.stop(id)
	}
}

// addNode creates node id, with its transport, not yet started.
func (c *cluster) addNode(id uint64) *node {
	nd := &node{id: id, fs: vfs.NewMem()}
	if c.onDisk {
		nd.fs, nd.dir = nil, c.t.TempDir()
	}
	c.attach(nd)
	c.nodes[id] = nd
	return nd
}

// leader waits until one running replica leads in the highest term any
// replica has seen, and returns it.
func (c *cluster) leader() *node {
	c.t.Helper()
	var best *node
	wait.For(c.t, 10*time.Second, "a leader elected", func() bool {
		best = nil
		var maxTerm uint64
		for _, nd := range c.nodes {
			if nd.g == nil {
				continue
			}
			maxTerm = max(maxTerm, nd.g.Term())
			if nd.g.IsLeader() && (best == nil || nd.g.Term() > best.g.Term()) {
				best = nd
			}
		}
		return best != nil && best.g.Term() == maxTerm
	})
	return best
}

// followers returns the replicas that follow the current leader.
func (c *cluster) followers() []*node {
	c.leader()
	var out []*node
	for _, nd := range c.nodes {
		if nd.g != nil && !nd.g.IsLeader() {
			out = append(out, nd)
		}
	}
	return out
}

// propose proposes on the current leader, following redirects, until ctx
// ends (by default after 20 s).
func (c *cluster) propose(ctx context.Context, data string) (applyResult, error) {
	c.t.Helper()
	until := 20 * time.Second
	if d, ok := ctx.Deadline(); ok {
		until = time.Until(d)
	}
	var v any
	var err error
	wait.Poll(until, func() bool {
		v, err = c.leader().g.Propose(ctx, []byte(data))
		return err == nil || ctx.Err() != nil || !(errors.Is(err, ErrNotLeader) || errors.Is(err, ErrProposalDropped))
	})
	if err != nil {
		return applyResult{}, err
	}
	return v.(applyResult), nil
}

// proposeMany proposes n commands named prefix0, prefix1, ... and returns
// the index of the last.
func (c *cluster) proposeMany(ctx context.Context, prefix string, n int) uint64 {
	c.t.Helper()
	var last uint64
	for i := range n {
		r, err := c.propose(ctx, fmt.Sprintf("%s%d", prefix, i))
		if err != nil {
			c.t.Fatal(err)
		}
		last = r.Index
	}
	return last
}

// waitApplied waits until every running replica applied index i.
func (c *cluster) waitApplied(i uint64) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, nd := range c.nodes {
		if nd.g == nil {
			continue
		}
		if err := nd.g.WaitApplied(ctx, i); err != nil {
			c.t.Fatalf("replica %d did not apply %d (at %d): %v", nd.id, i, nd.g.AppliedIndex(), err)
		}
	}
}

// sameCommands checks that every running replica applied the same commands.
func (c *cluster) sameCommands() []applyResult {
	c.t.Helper()
	var ref []applyResult
	var refID uint64
	for _, nd := range c.nodes {
		if nd.g == nil {
			continue
		}
		got := nd.sm.commands(c.t)
		if ref == nil {
			ref, refID = got, nd.id
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(ref) {
			c.t.Fatalf("replica %d applied %d commands, replica %d %d; they differ", nd.id, len(got), refID, len(ref))
		}
	}
	return ref
}

// openSingle starts a single-replica group on db.
func openSingle(t testing.TB, db *kv.DB, adjust func(*Config)) (*Group, *testSM) {
	t.Helper()
	sm := newTestSM(t, db)
	cfg := Config{GroupID: 7, ID: 1, Peers: []Peer{{ID: 1}}, DB: db, Prefix: []byte("\x00r"), SM: sm, Log: testLog()}
	if adjust != nil {
		adjust(&cfg)
	}
	g, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g, sm
}
