package raftgroup

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"nacre/internal/kv"
	"nacre/internal/raftlog"
)

// Entry is one committed log entry as the state machine sees it. Data is
// exactly what was proposed; it is nil for raft's own entries (the empty
// entry a new leader appends, membership changes), which the state
// machine only records as applied.
type Entry struct {
	Index uint64
	Data  []byte
}

// SnapshotData is a state machine image in transit: StateMachine.Snapshot
// returns one, which the transport reads to the end and closes;
// StateMachine.Restore is handed one over the received bytes. The image
// must include the applied index it reflects (see SnapshotKV).
type SnapshotData = io.ReadCloser

// StateMachine is implemented by the MDT (and later the MGS).
type StateMachine interface {
	// Apply applies committed entries in log order. It must apply them
	// atomically together with recording entries[len-1].Index as the
	// applied index in the same store the raft log lives in, and return
	// one result per entry (nil for Data==nil). An error is fatal for the
	// group (store failure): the group stops and reports it.
	//
	// The write need not be synced: see doc.go for why a lost apply is
	// always redone.
	Apply(entries []Entry) ([]any, error)
	// Applied returns the applied index recorded in the store.
	Applied() uint64
	// Snapshot returns a consistent image of the state. It is called from
	// a transport goroutine, concurrently with Apply, so it must capture
	// the state at one applied index (a kv snapshot does).
	Snapshot() (SnapshotData, error)
	// Restore replaces the whole state, and the applied index, by the
	// image, atomically: after a crash the store holds either the old
	// state or the new one. It runs on the group's loop, never
	// concurrently with Apply.
	Restore(SnapshotData) error
}

// TailLoser is implemented by a state machine whose owner can tell that
// the log may have lost its unsynced tail since the last start (a power
// cut while it answered under lazy commit, Config.CommitWindow, whatever
// the window is now). Only then does a store
// ahead of its log restart the log after the store's applied index;
// otherwise that is damage, and Start refuses.
type TailLoser interface {
	LogMayHaveLostTail() bool
}

// Peer is one replica of the group and the address its process serves
// the Raft service on.
type Peer struct {
	ID   uint64
	Addr string
}

// Config configures one replica of one group.
type Config struct {
	GroupID uint64
	// ID is this replica's id (> 0), unique in the group for all time:
	// a replaced replica gets a new id.
	ID uint64
	// Peers lists all voters, this replica included, when the group is
	// created; later starts take the configuration from the store and use
	// Peers only for addresses (and may list any replicas, or none). One
	// peer means a single replica.
	Peers []Peer
	// Join starts a replica that an existing group is about to add (with
	// AddVoter or AddLearner on its leader): it begins with no
	// configuration and learns everything, usually a snapshot, from the
	// leader.
	Join bool
	// DB is shared with the state machine: the group keeps its log
	// format, address book and snapshot-install marker under Prefix in it.
	DB *kv.DB
	// Prefix is reserved for the raft state in DB (the MDT gives "\x00r").
	Prefix []byte
	// LogDir is the directory of the group's Raft log (internal/raftlog),
	// on LogFS. Default: beside the DB's directory, named after it and the
	// group ("store.raftlog-1"); LogFS defaults to the DB's file system.
	LogDir string
	LogFS  vfs.FS
	// LogSegmentSize is the size of one log segment file (default 8 MiB).
	LogSegmentSize int64
	SM             StateMachine
	// Transport carries messages to the other replicas; nil when the
	// group has a single replica.
	Transport Transport

	TickInterval   time.Duration // default 100ms
	ElectionTicks  int           // default 10
	HeartbeatTicks int           // default 1

	// KeepEntries is how many applied entries stay in the log behind the
	// applied index for followers that lag (default 10,000); a follower
	// further behind is sent a snapshot.
	KeepEntries uint64
	// CacheBytes bounds the in-memory copy of the log's tail (default 16 MiB).
	CacheBytes int
	// SnapshotDir holds received snapshot images until they are restored;
	// empty keeps them in memory.
	SnapshotDir string

	// CommitWindow, when positive, lets a group with a single replica
	// answer proposals made with ProposeLazy once their entries are
	// written to the log, before an fsync covers them: the log is synced
	// within CommitWindow of the first unsynced write, at once for any
	// other proposal, and on Sync (doc.go, "Lazy commit"). A replicated
	// group syncs every write whatever it is set to.
	CommitWindow time.Duration

	// DisableLease makes Read always use ReadIndex (a heartbeat round)
	// instead of serving reads on the leader under a lease (lease.go).
	DisableLease bool

	// Name and Target name the group in errors for operators ("MDT0000",
	// and "mdt0" as nacre replica --target spells it); default: its number.
	Name, Target string
	// Fsname is the file system the group belongs to, for RaftAdmin's
	// Members (nacre replica add checks a new replica's).
	Fsname string
	// GuardEmptyVotes: while this replica's log holds only the starting
	// point, it votes for no candidate with a longer log (emptyVote). For
	// a replica whose store is new although the group already had a log
	// when it started (serve checks its peers): it may be one whose store
	// was lost and that was formatted again under its old id.
	GuardEmptyVotes bool
	// VoteWhileEmpty lifts GuardEmptyVotes: for an admin who knows this
	// replica never held the group's log (it was down since it was
	// formatted), when the others lost their majority.
	VoteWhileEmpty bool

	Log *slog.Logger
	// OnLeaderChange is called from a separate goroutine, in order, when
	// this replica's view of the leader changes.
	OnLeaderChange func(isLeader bool, leader uint64, term uint64)
}

// Errors returned by the group.
var (
	// ErrStopped: the group was stopped (or stopped itself after a fatal
	// error); pending and later calls fail with it.
	ErrStopped = errors.New("raftgroup: group stopped")
	// ErrNotLeader is matched (errors.Is) by every NotLeaderError.
	ErrNotLeader = errors.New("raftgroup: not the leader")
	// ErrProposalDropped: the proposal may or may not be committed, this
	// replica cannot tell (it lost leadership, or raft refused the entry);
	// retry, with the same request id, against the leader.
	ErrProposalDropped = errors.New("raftgroup: proposal dropped, outcome unknown (leadership changed); retry")
)

// NotLeaderError is returned by Propose and the membership calls on a
// replica that is not the leader. Leader is 0 when no leader is known
// (an election is in progress); Addr is the leader's address if known.
// errors.Is(err, ErrNotLeader) matches it, and errors.As fills either a
// NotLeaderError or a *NotLeaderError variable.
type NotLeaderError struct {
	Leader uint64
	Addr   string
}

func (e NotLeaderError) Error() string {
	if e.Leader == 0 {
		return "raftgroup: not the leader, and no leader is known (election in progress)"
	}
	return fmt.Sprintf("raftgroup: not the leader; the leader is replica %d at %s", e.Leader, e.Addr)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// As lets errors.As fill a *NotLeaderError variable too.
func (e NotLeaderError) As(target any) bool {
	if p, ok := target.(**NotLeaderError); ok {
		*p = &e
		return true
	}
	return false
}

// Status describes a replica, for `nacre status` and tests.
type Status struct {
	GroupID, ID uint64
	// State is "leader", "follower", "candidate", "pre-candidate" or "stopped".
	State                 string
	Leader, Term, Vote    uint64
	Commit, Applied       uint64
	FirstIndex, LastIndex uint64
	Voters, Learners      []uint64
	// Progress is the leader's view of every replica (leader only).
	Progress map[uint64]PeerProgress
	Stats    Stats
	// Lease: this replica leads under a valid lease (lease.go);
	// LeaseReads counts the reads it served so.
	Lease      bool
	LeaseReads uint64
}

// PeerProgress is the leader's view of one replica.
type PeerProgress struct {
	Addr         string
	Match, Next  uint64
	State        string // "probe", "replicate" or "snapshot"
	RecentActive bool
	Learner      bool
}

// Stats counts the group's work since Start.
type Stats struct {
	Proposals      uint64 // entries handed to raft by this replica
	Readies        uint64 // Ready structs handled
	LogWrites      uint64 // batches written to the raft log
	Syncs          uint64 // of which synced (one fsync each)
	SyncedEntries  uint64 // entries made durable by those syncs
	LazyWrites     uint64 // batches answered before their sync (CommitWindow)
	ApplyBatches   uint64 // StateMachine.Apply calls
	AppliedEntries uint64 // entries given to StateMachine.Apply
	Compactions    uint64
	SnapshotsSent  uint64
	SnapshotsRecv  uint64
	InlineTurns    uint64 // turns of the loop's work done by a lazy proposer (inline.go)
}

// EntriesPerSync is the average number of log entries made durable by one
// fsync: the batching the ready loop achieves.
func (s Stats) EntriesPerSync() float64 {
	if s.Syncs == 0 {
		return 0
	}
	return float64(s.SyncedEntries) / float64(s.Syncs)
}

type stats struct {
	proposals, readies, logWrites, syncs, syncedEntries atomic.Uint64
	applyBatches, appliedEntries, compactions           atomic.Uint64
	snapsSent, snapsRecv, lazyWrites, inlineTurns       atomic.Uint64
}

func (s *stats) load() Stats {
	return Stats{
		Proposals: s.proposals.Load(), Readies: s.readies.Load(), LogWrites: s.logWrites.Load(),
		Syncs: s.syncs.Load(), SyncedEntries: s.syncedEntries.Load(), LazyWrites: s.lazyWrites.Load(),
		ApplyBatches: s.applyBatches.Load(), AppliedEntries: s.appliedEntries.Load(),
		Compactions: s.compactions.Load(), SnapshotsSent: s.snapsSent.Load(), SnapshotsRecv: s.snapsRecv.Load(),
		InlineTurns: s.inlineTurns.Load(),
	}
}

// Group is one running replica of one Raft group.
type Group struct {
	cfg  Config
	id   uint64
	gid  uint64
	log  *slog.Logger
	db   *kv.DB
	sm   StateMachine
	tr   Transport
	keys keys

	// turn is held by whoever does the loop's work: the loop goroutine,
	// or a lazy proposer doing it in its place (inline.go). The fields
	// below, down to in, are owned by its holder.
	turn         sync.Mutex
	stepErr      error // a proposer's turn failed: the loop stops with it
	exited       bool  // the loop has stopped: no more turns
	inTurn       bool  // a proposer holds the turn
	rn           *raft.RawNode
	store        *logStore
	soft         raft.SoftState
	smApplied    uint64
	waiters      map[uint64]*proposal // by proposal sequence
	reads        map[uint64]*readBatch
	nextRead     uint64
	ticks        uint64
	appendQ      []*pb.Message
	applyQ       []*pb.Message
	confHist     []confAt  // configurations after the truncation point
	readFloor    uint64    // leader: index of its term's first entry
	replayTo     uint64    // the commit index at start
	replayed     chan bool // gets singleVoter() once raft applied through replayTo
	smEnts       []Entry
	spare        inboxItems
	lastCampaign uint64
	ls           leaseState
	unsynced     bool                   // the log holds writes no fsync covered yet (persistStage)
	lazyT        *time.Timer            // CommitWindow: the sync of the oldest unsynced lazy write
	lazyC        <-chan time.Time       // lazyT's channel while it is armed, else nil
	syncErr      error                  // a sync outside persistStage failed (syncLog)
	lazyEnts     uint64                 // entries written since the last sync
	out, batch   []*pb.Message          // messages to send (flushOut)
	held         map[uint64]*pb.Message // commit-index messages held back (holdCommitOnly)
	lost         error                  // the store lost acknowledged entries (lostEntries)
	warnedEmpty  bool                   // emptyVote logged

	in    inbox
	wake  chan struct{}
	stopC chan struct{}
	done  chan struct{}
	err   error // fatal error, set before done is closed

	seq        atomic.Uint64
	solo       atomic.Bool              // this replica is the group's only voter (and no learners)
	members    atomic.Pointer[[]uint64] // voters and learners (noteConf)
	guardEmpty atomic.Bool              // emptyVote applies (GuardEmptyVotes)
	leader     atomic.Uint64
	isLeader   atomic.Bool
	// leaderSince: when this replica last became leader (unix ns).
	leaderSince atomic.Int64
	term        atomic.Uint64
	commit      atomic.Uint64
	applied     atomic.Uint64
	synced      atomic.Uint64 // the log is durable up to this index
	startLast   uint64        // the log's last index when it was opened
	startTerm   uint64        // and the term then
	stats       stats

	stateMu   sync.Mutex
	leaderCh  chan struct{} // closed when the leader changes
	appliedCh chan struct{} // closed when the applied index advances

	peersMu sync.RWMutex
	peers   map[uint64]string
	// removed: the ids ever removed from the group as this replica saw
	// it (membership.go), never to be added again.
	removed map[uint64]bool
	// removedSelf is closed once this replica knows it was removed from
	// the group (Removed).
	removedSelf     chan struct{}
	removedSelfOnce sync.Once

	statusC  chan chan Status
	notify   *notifier
	stopOnce sync.Once
}

type confAt struct {
	index uint64
	cs    *pb.ConfState
}

// Start opens the replica's raft state in cfg.DB (creating it on first
// use) and starts it. A single-voter group is leader when Start returns,
// and its state machine has applied every command acknowledged before.
func Start(cfg Config) (*Group, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	g := &Group{
		cfg:       cfg,
		id:        cfg.ID,
		gid:       cfg.GroupID,
		log:       cfg.Log.With("group", cfg.GroupID, "replica", cfg.ID),
		db:        cfg.DB,
		sm:        cfg.SM,
		tr:        cfg.Transport,
		keys:      newKeys(cfg.Prefix),
		waiters:   map[uint64]*proposal{},
		reads:     map[uint64]*readBatch{},
		wake:      make(chan struct{}, 1),
		stopC:     make(chan struct{}),
		done:      make(chan struct{}),
		leaderCh:  make(chan struct{}),
		appliedCh: make(chan struct{}),
		statusC:   make(chan chan Status),
		replayed:  make(chan bool, 1),

		removedSelf: make(chan struct{}),
	}
	g.in.spools = map[uint64]*spool{}
	g.guardEmpty.Store(cfg.GuardEmptyVotes)
	g.initLease()
	// Proposal sequence numbers only need to be unique per (replica, term)
	// (see proposal.go); starting from the clock makes them unique across
	// restarts too, which helps when reading logs.
	g.seq.Store(uint64(time.Now().UnixNano()))

	boot := &pb.ConfState{}
	if !cfg.Join {
		for _, p := range cfg.Peers {
			boot.Voters = append(boot.Voters, p.ID)
		}
	}
	loc := logLoc{fs: cfg.LogFS, dir: cfg.LogDir, segment: cfg.LogSegmentSize}
	st, err := openLog(cfg.DB, g.keys, loc, boot, cfg.CacheBytes, cfg.ID, cfg.Join)
	if err != nil {
		if errors.Is(err, raftlog.ErrCorrupt) {
			// What the admin can do depends on whether other replicas
			// hold the group's state.
			fix := "restore the target from a backup (nacre mdt restore for an MDT)"
			if len(cfg.Peers) > 1 || cfg.Join {
				fix = "replace this replica (nacre replica replace), or " + fix
			}
			return nil, fmt.Errorf("raft group %d replica %d: %w; %s", g.gid, g.id, err, fix)
		}
		return nil, fmt.Errorf("raft group %d replica %d: %w", g.gid, g.id, err)
	}
	g.store = st
	st.peers = g.snapshotPeers
	looping := false
	defer func() {
		if !looping {
			// The loop closes the log when it ends; it never began.
			st.log.Close()
		}
	}()
	g.noteConf()
	if err := g.recover(); err != nil {
		return nil, fmt.Errorf("raft group %d replica %d: %w", g.gid, g.id, err)
	}
	g.startLast, g.startTerm = st.last(), st.hs.GetTerm()
	g.synced.Store(g.startLast)
	g.lazyT = time.NewTimer(time.Hour)
	g.lazyT.Stop()
	if err := checkSelf(cfg.DB, g.keys, g.gid, g.id); err != nil {
		return nil, err
	}
	if g.peers, err = loadPeers(cfg.DB, g.keys); err != nil {
		return nil, err
	}
	if g.removed, err = loadRemoved(cfg.DB, g.keys); err != nil {
		return nil, err
	}
	if g.removed[g.id] {
		g.noteRemovedSelf()
	}
	changed := false
	for _, p := range cfg.Peers {
		if p.Addr != "" && g.peers[p.ID] != p.Addr {
			g.peers[p.ID] = p.Addr
			changed = true
		}
	}
	if changed {
		if err := cfg.DB.Set(g.keys.peers, encodePeers(g.peers), false); err != nil {
			return nil, fmt.Errorf("raft group %d replica %d: write address book: %w", g.gid, g.id, err)
		}
	}

	rc := &raft.Config{
		ID:            g.id,
		ElectionTick:  cfg.ElectionTicks,
		HeartbeatTick: cfg.HeartbeatTicks,
		Storage:       st,
		// Raft re-delivers everything after the truncation point, not just
		// what the state machine lacks: the loop skips entries at or below
		// the state machine's applied index, and raft rebuilds the
		// configuration from the conf changes it re-delivers, so no
		// configuration has to be persisted apart from the log (doc.go).
		Applied:                   st.trunc.GetIndex(),
		AsyncStorageWrites:        true,
		MaxSizePerMsg:             1 << 20,
		MaxCommittedSizePerReady:  16 << 20,
		MaxUncommittedEntriesSize: 64 << 20,
		MaxInflightMsgs:           256,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		// Only the leader takes proposals, so that a proposal's waiter is
		// on the replica whose log holds the entry (proposal.go).
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    newRaftLogger(g.log),
	}
	if g.rn, err = newRawNode(rc); err != nil {
		return nil, fmt.Errorf("raft group %d replica %d: %w", g.gid, g.id, err)
	}
	bs := g.rn.BasicStatus()
	g.term.Store(bs.GetTerm())
	g.commit.Store(bs.GetCommit())
	g.applied.Store(g.smApplied)

	if g.tr != nil {
		g.tellSelf(g.peers[g.id])
		if err := g.tr.Register(g.gid, handler{g}); err != nil {
			return nil, fmt.Errorf("raft group %d replica %d: %w", g.gid, g.id, err)
		}
	}
	g.notify = newNotifier(cfg.OnLeaderChange)
	g.replayTo = bs.GetCommit()
	replayed := g.replayed
	g.log.Info("raft replica starting", "first", st.first(), "last", st.last(),
		"term", bs.GetTerm(), "commit", bs.GetCommit(), "sm_applied", g.smApplied,
		"voters", st.trunc.GetConfState().GetVoters())
	looping = true
	go g.run()

	// Wait until raft has re-delivered what was committed before: only
	// then is the configuration known (it may have changed after the
	// truncation point).
	var single bool
	select {
	case single = <-replayed:
	case <-g.done:
		return nil, fmt.Errorf("raft group %d replica %d: stopped while starting: %w", g.gid, g.id, g.Stop())
	}
	if !single && g.tr == nil {
		g.Stop()
		return nil, fmt.Errorf("raft group %d replica %d: its store belongs to a group of several replicas, but the target runs as a single one (formatted without --peers): "+
			"if its identity file was written again, give nacre format this replica's --replica-id and the group's --peers", g.gid, g.id)
	}
	if single {
		// Become leader and apply everything committed before the
		// restart (its commit index may not have been persisted; the
		// new term's first entry commits it), so that the state machine
		// reflects every acknowledged command when Start returns.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := g.waitLeader(ctx, true)
		if err == nil {
			err = g.ReadIndex(ctx)
		}
		if err != nil {
			g.log.Warn("single-voter group is not serving after start", "err", err)
		}
	}
	return g, nil
}

// newRawNode turns raft's panics on an inconsistent stored state into an
// error for Start.
func newRawNode(rc *raft.Config) (rn *raft.RawNode, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("raft refused the stored state: %v", r)
		}
	}()
	return raft.NewRawNode(rc)
}

func (c *Config) fill() error {
	switch {
	case c.ID == 0:
		return errors.New("raftgroup: replica id must be > 0")
	case c.DB == nil:
		return errors.New("raftgroup: Config.DB is nil")
	case c.SM == nil:
		return errors.New("raftgroup: Config.SM is nil")
	case len(c.Prefix) == 0:
		return errors.New("raftgroup: Config.Prefix is empty")
	case (len(c.Peers) > 1 || c.Join) && c.Transport == nil:
		return errors.New("raftgroup: a group with several replicas needs a Transport")
	}
	if c.TickInterval <= 0 {
		c.TickInterval = 100 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.KeepEntries == 0 {
		c.KeepEntries = 10000
	}
	if c.CacheBytes <= 0 {
		c.CacheBytes = 16 << 20
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.LogFS == nil {
		c.LogFS = c.DB.FS()
	}
	if c.LogDir == "" {
		c.LogDir = defaultLogDir(c.DB, c.GroupID)
	}
	return nil
}

// defaultLogDir is where a group's log goes when Config.LogDir is empty:
// beside the DB's directory.
func defaultLogDir(db *kv.DB, gid uint64) string {
	d := db.Dir()
	return filepath.Join(filepath.Dir(d), fmt.Sprintf("%s.raftlog-%d", filepath.Base(d), gid))
}

// recover reconciles the raft log with the state machine after a crash
// (doc.go, "Crash safety").
func (g *Group) recover() error {
	st := g.store
	g.smApplied = g.sm.Applied()

	var pend pb.SnapshotMetadata
	switch err := getProto(g.db, g.keys.pending, &pend); {
	case err == nil:
		// A snapshot install was interrupted. Restore is atomic, so the
		// state machine either still has its old state (drop the marker:
		// the log was not touched) or has the image; then the log's reset
		// either reached the disk (a snapshot is only installed ahead of
		// the log's truncation point, so the point tells) or is redone.
		switch {
		case st.trunc.GetIndex() >= pend.GetIndex():
			g.log.Info("interrupted snapshot install had finished", "index", pend.GetIndex())
		case g.smApplied >= pend.GetIndex():
			g.log.Info("finishing interrupted snapshot install", "index", pend.GetIndex(), "sm_applied", g.smApplied)
			if err := st.resetTo(&pend); err != nil {
				return err
			}
			hs := &pb.HardState{Term: new(st.hs.GetTerm()), Vote: new(st.hs.GetVote()), Commit: new(max(st.hs.GetCommit(), pend.GetIndex()))}
			if err := st.setHardState(hs); err != nil {
				return err
			}
			if err := st.log.Write(true); err != nil {
				return fmt.Errorf("recover interrupted snapshot install: %w", err)
			}
			if err := st.release(); err != nil {
				return err
			}
		default:
			g.log.Info("discarding interrupted snapshot install", "index", pend.GetIndex(), "sm_applied", g.smApplied)
		}
		if err := g.db.Delete(g.keys.pending, true); err != nil {
			return fmt.Errorf("recover interrupted snapshot install: %w", err)
		}
	case !errors.Is(err, kv.ErrNotFound):
		return fmt.Errorf("read pending snapshot marker: %w", err)
	}

	t, last := st.trunc.GetIndex(), st.last()
	// A new group's truncation point is past an entry nobody applies
	// (storage.go, openLog); compactions and snapshots never stop there.
	fresh := t == bootIndex && g.smApplied == 0
	if g.smApplied < t && !fresh {
		return fmt.Errorf("state machine applied index %d is behind the raft log's truncation point %d: store damaged", g.smApplied, t)
	}
	if g.smApplied > last && !fresh {
		// A snapshot's image may be newer than its index (snapshot.go):
		// until the leader's entries up to the image reach the log, the
		// state machine is ahead of it, and a crash can leave it so.
		// Those entries are committed, so other voters hold them and the
		// loop skips them when they come. A single voter has no one to
		// get them from: its log lost what it applied.
		if cs := st.trunc.GetConfState(); len(cs.GetVoters()) <= 1 && len(cs.GetVotersOutgoing()) == 0 {
			if tl, ok := g.sm.(TailLoser); ok && tl.LogMayHaveLostTail() {
				// Lazy commit (doc.go): the log's unsynced tail was lost
				// (a power cut) after the store's own unsynced writes had
				// reached the disk. The store holds everything it
				// applied; the log restarts after it, and the clients
				// replay what neither kept (the MDS's recovery).
				if err := g.restartLogAt(g.smApplied); err != nil {
					return err
				}
				return g.recover()
			}
			return fmt.Errorf("the Raft log in %s ends at index %d, but the store has applied entries up to %d: the log lost entries it had (a damaged or truncated segment file, or writes the disk acknowledged and then lost); the store holds everything applied: %s",
				g.cfg.LogDir, last, g.smApplied, g.relogHint())
		}
		g.log.Info("state machine is ahead of the raft log (a snapshot image newer than its index); the leader's entries will catch up",
			"sm_applied", g.smApplied, "last", last)
	}
	// The loop applies committed entries before it persists the commit
	// index that made them committed, and a crash can keep the first
	// write and lose the second; everything applied was committed. Raft
	// refuses a commit index beyond the log, so it stops at the last
	// entry (see above for a state machine ahead of the log).
	if c := min(max(g.smApplied, t), last); st.hs.GetCommit() < c {
		g.log.Info("raising persisted commit index to the applied index", "commit", st.hs.GetCommit(), "applied", c)
		st.hs = &pb.HardState{Term: new(st.hs.GetTerm()), Vote: new(st.hs.GetVote()), Commit: new(c)}
	}
	// The term is never below the last entry's. Only a lost batch after a
	// snapshot install can leave it so; a vote cast in the lost term was
	// never sent, so forgetting it is safe.
	if lt, _ := st.Term(last); st.hs.GetTerm() < lt {
		st.hs = &pb.HardState{Term: new(lt), Vote: new(uint64(0)), Commit: new(st.hs.GetCommit())}
	}
	return nil
}

// restartLogAt resets the log of a single voter to restart after index,
// which the state machine has applied although the log lost it (recover).
func (g *Group) restartLogAt(index uint64) error {
	st := g.store
	last := st.last()
	term := st.hs.GetTerm()
	if lt, _ := st.Term(last); lt > term {
		term = lt
	}
	g.log.Warn("the Raft log lost its unsynced tail; it restarts after the store's applied index",
		"log_last", last, "sm_applied", index, "term", term)
	meta := &pb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: st.conf}
	if err := st.resetTo(meta); err != nil {
		return err
	}
	hs := &pb.HardState{Term: new(st.hs.GetTerm()), Vote: new(st.hs.GetVote()), Commit: new(index)}
	if err := st.setHardState(hs); err != nil {
		return err
	}
	if err := st.log.Write(true); err != nil {
		return fmt.Errorf("restart raft log at %d: %w", index, err)
	}
	return st.release()
}

// Propose submits data as a command and waits until its entry is applied
// on this replica; it returns the state machine's result for that entry.
// It fails with NotLeaderError on a follower, ErrProposalDropped if the
// outcome became unknown, ErrStopped, or the context's error (the command
// may still be applied later).
func (g *Group) Propose(ctx context.Context, data []byte) (any, error) {
	return g.submit(ctx, data, false)
}

// submit queues a command for the loop and waits for its result.
func (g *Group) submit(ctx context.Context, data []byte, lazy bool) (any, error) {
	if err := g.checkLeader(); err != nil {
		return nil, err
	}
	p := &proposal{seq: g.seq.Add(1), done: make(chan result, 1), lazy: lazy}
	p.data = encodeProposal(g.id, p.seq, data)
	g.in.push(func(it *inboxItems) { it.props = append(it.props, p) })
	if lazy && g.Lazy() {
		g.takeTurn()
	} else {
		g.signal()
	}
	return g.await(ctx, p)
}

// ProposeLazy is Propose for a command whose proposer may be answered
// before its entry is durable: with Config.CommitWindow set and a single
// replica, the entry is applied and answered once it is written, and
// synced within the window (doc.go, "Lazy commit"). The caller learns
// what is durable from SyncedIndex, and waits for it with Sync.
func (g *Group) ProposeLazy(ctx context.Context, data []byte) (any, error) {
	return g.submit(ctx, data, true)
}

// SyncedIndex is the index up to which this replica's log is durable.
// Without lazy commit it is the last entry written.
func (g *Group) SyncedIndex() uint64 { return g.synced.Load() }

// StartIndex is the last index the log held when the replica started:
// entries after it were appended in this life.
func (g *Group) StartIndex() uint64 { return g.startLast }

// StartTerm is the term the replica started in, before any election.
func (g *Group) StartTerm() uint64 { return g.startTerm }

// Lazy reports whether proposals made with ProposeLazy are answered
// before their entries are synced now (CommitWindow set, single replica).
func (g *Group) Lazy() bool { return g.cfg.CommitWindow > 0 && g.solo.Load() }

// Sync makes everything the log holds durable and returns the synced
// index, which covers every entry applied before the call.
func (g *Group) Sync(ctx context.Context) (uint64, error) {
	type synced struct {
		index uint64
		err   error
	}
	done := make(chan synced, 1)
	g.in.push(func(it *inboxItems) {
		it.calls = append(it.calls, func() {
			g.syncLog() // syncErr is the loop's: read it there
			done <- synced{g.synced.Load(), g.syncErr}
		})
	})
	g.signal()
	select {
	case r := <-done:
		return r.index, r.err
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-g.done:
		return 0, g.stoppedErr()
	}
}

// WaitSynced returns once the log is durable up to index, syncing it
// if need be.
func (g *Group) WaitSynced(ctx context.Context, index uint64) error {
	if g.synced.Load() >= index {
		return nil
	}
	_, err := g.Sync(ctx)
	return err
}

func (g *Group) checkLeader() error {
	select {
	case <-g.done:
		return g.stoppedErr()
	default:
	}
	if !g.isLeader.Load() {
		return g.notLeader()
	}
	return nil
}

func (g *Group) notLeader() NotLeaderError {
	l := g.leader.Load()
	return NotLeaderError{Leader: l, Addr: g.peerAddr(l)}
}

func (g *Group) await(ctx context.Context, p *proposal) (any, error) {
	select {
	case r := <-p.done:
		return r.v, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-g.done:
		select {
		case r := <-p.done:
			return r.v, r.err
		default:
			return nil, g.stoppedErr()
		}
	}
}

func (g *Group) stoppedErr() error {
	if g.err != nil {
		return fmt.Errorf("%w: %v", ErrStopped, g.err)
	}
	return ErrStopped
}

// Replicated reports whether the group has replicas other than this one
// (or this replica has not learned the configuration yet): reads must
// then go through Read or ReadIndex to be linearizable.
func (g *Group) Replicated() bool { return !g.solo.Load() }

// noteConf records whether this replica is alone in the configuration
// (loop, or Start before the loop runs).
func (g *Group) noteConf() {
	cs := g.store.conf
	g.solo.Store(g.singleVoter() && len(cs.GetLearners()) == 0 && len(cs.GetLearnersNext()) == 0)
	var ids []uint64
	for _, l := range [][]uint64{cs.GetVoters(), cs.GetVotersOutgoing(), cs.GetLearners(), cs.GetLearnersNext()} {
		for _, id := range l {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	g.members.Store(&ids)
}

// MemberAddrs lists the addresses of the group's voters and learners as
// this replica's configuration has them, by replica id (those whose
// address it does not know are left out). It does not wait for the loop.
func (g *Group) MemberAddrs() []string {
	p := g.members.Load()
	if p == nil {
		return nil
	}
	var out []string
	for _, id := range *p {
		if a := g.peerAddr(id); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// IsLeader reports whether this replica is the leader.
func (g *Group) IsLeader() bool { return g.isLeader.Load() }

// LeaderSince is when this replica became the leader it is, or the zero
// time if it does not lead.
func (g *Group) LeaderSince() time.Time {
	if !g.isLeader.Load() {
		return time.Time{}
	}
	return time.Unix(0, g.leaderSince.Load())
}

// Leader is the leader's replica id, 0 if unknown.
func (g *Group) Leader() uint64 { return g.leader.Load() }

// LeaderAddr is the leader's address, "" if unknown.
func (g *Group) LeaderAddr() string { return g.peerAddr(g.leader.Load()) }

// Term is the current term.
func (g *Group) Term() uint64 { return g.term.Load() }

// AppliedIndex is the index the state machine has applied.
func (g *Group) AppliedIndex() uint64 { return g.applied.Load() }

// ID is this replica's id.
func (g *Group) ID() uint64 { return g.id }

// Stats returns the group's counters.
func (g *Group) Stats() Stats { return g.stats.load() }

// Done is closed when the group has stopped, by Stop or by a fatal error
// (see Err).
func (g *Group) Done() <-chan struct{} { return g.done }

// relogHint says how to start a single replica whose log lost applied
// entries again from its store.
func (g *Group) relogHint() string {
	if strings.HasPrefix(g.cfg.Target, "mdt") {
		dir := filepath.Dir(g.cfg.LogDir)
		return fmt.Sprintf("back the MDT up and restore it, which starts a new log from the store (nacre mdt backup --dir %s --out F; nacre mdt restore --dir %s --from F)", dir, dir)
	}
	return "restore the target directory from a backup"
}

// Removed is closed once this replica knows it was removed from the group
// (it applied its own removal, now or before a restart): it is no member,
// will never be one again, and only answers as a bystander. Its server
// stops (internal/server).
func (g *Group) Removed() <-chan struct{} { return g.removedSelf }

func (g *Group) noteRemovedSelf() { g.removedSelfOnce.Do(func() { close(g.removedSelf) }) }

// Role is this replica's role in its group as it knows it: "voter",
// "learner", or "not a member" (it is joining, or was removed).
func (g *Group) Role() string {
	st := g.Status()
	switch {
	case slices.Contains(st.Voters, st.ID):
		return "voter"
	case slices.Contains(st.Learners, st.ID):
		return "learner"
	}
	return "not a member"
}

// MarkRemoved notes that this replica was removed from its group, as
// another replica that knows the group's leader says: one removed while
// it was down never applies its own removal. Removed is closed.
func (g *Group) MarkRemoved() { g.noteRemovedSelf() }

// Err is the fatal error that stopped the group, nil while it runs or
// after a clean Stop.
func (g *Group) Err() error {
	select {
	case <-g.done:
		return g.err
	default:
		return nil
	}
}

// WaitLeader waits until a leader is known.
func (g *Group) WaitLeader(ctx context.Context) error { return g.waitLeader(ctx, false) }

func (g *Group) waitLeader(ctx context.Context, self bool) error {
	for {
		g.stateMu.Lock()
		ch := g.leaderCh
		g.stateMu.Unlock()
		if l := g.leader.Load(); l != 0 && (!self || l == g.id) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-g.done:
			return g.stoppedErr()
		}
	}
}

// ReadIndex is a linearizable read barrier: it returns once this
// replica's applied index has reached the leader's commit index as of
// some moment after the call began, so that reads of the local state
// that follow see every write acknowledged before the call. It works on
// followers too (the leader answers over the transport). Raft drops read
// requests while no leader is known; they are retried until ctx ends.
func (g *Group) ReadIndex(ctx context.Context) error {
	retry := time.Duration(g.cfg.ElectionTicks) * g.cfg.TickInterval
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		r := &readReq{done: make(chan readResult, 1)}
		g.in.push(func(it *inboxItems) { it.reads = append(it.reads, r) })
		g.signal()
		if timer == nil {
			timer = time.NewTimer(retry)
		} else {
			timer.Reset(retry)
		}
		select {
		case res := <-r.done:
			if res.retry {
				continue
			}
			return g.waitApplied(ctx, res.index)
		case <-timer.C:
			continue
		case <-ctx.Done():
			return ctx.Err()
		case <-g.done:
			return g.stoppedErr()
		}
	}
}

// WaitApplied waits until the applied index reaches index.
func (g *Group) WaitApplied(ctx context.Context, index uint64) error {
	return g.waitApplied(ctx, index)
}

func (g *Group) waitApplied(ctx context.Context, index uint64) error {
	for {
		g.stateMu.Lock()
		ch := g.appliedCh
		g.stateMu.Unlock()
		if g.applied.Load() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-g.done:
			return g.stoppedErr()
		}
	}
}

// Status returns the replica's state; Progress is filled on the leader.
func (g *Group) Status() Status {
	req := make(chan Status, 1)
	select {
	case g.statusC <- req:
		return <-req
	case <-g.done:
		s := Status{GroupID: g.gid, ID: g.id, State: "stopped", Term: g.term.Load(),
			Commit: g.commit.Load(), Applied: g.applied.Load(), Stats: g.stats.load()}
		return s
	}
}

// Stop stops the replica: pending calls fail with ErrStopped. It returns
// the fatal error that stopped the group earlier, if any. It does not
// close the DB.
func (g *Group) Stop() error {
	g.stopOnce.Do(func() { close(g.stopC) })
	<-g.done
	g.notify.close()
	return g.err
}

func (g *Group) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *Group) peerAddr(id uint64) string {
	if id == 0 {
		return ""
	}
	g.peersMu.RLock()
	defer g.peersMu.RUnlock()
	return g.peers[id]
}

// Peers returns the address book: every replica id this replica has
// heard of and its address.
func (g *Group) Peers() []Peer {
	g.peersMu.RLock()
	defer g.peersMu.RUnlock()
	out := make([]Peer, 0, len(g.peers))
	for id, a := range g.peers {
		out = append(out, Peer{ID: id, Addr: a})
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// broadcast closes *ch and replaces it, waking every waiter on it.
func (g *Group) broadcast(ch *chan struct{}) {
	g.stateMu.Lock()
	close(*ch)
	*ch = make(chan struct{})
	g.stateMu.Unlock()
}

// notifier calls OnLeaderChange in order from its own goroutine, so that
// a slow callback never stalls the ready loop.
type notifier struct {
	fn   func(bool, uint64, uint64)
	mu   sync.Mutex
	q    []leaderEvent
	wake chan struct{}
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

type leaderEvent struct {
	isLeader     bool
	leader, term uint64
}

func newNotifier(fn func(bool, uint64, uint64)) *notifier {
	n := &notifier{fn: fn, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if fn == nil {
		close(n.done)
		return n
	}
	go n.run()
	return n
}

func (n *notifier) post(e leaderEvent) {
	if n.fn == nil {
		return
	}
	n.mu.Lock()
	n.q = append(n.q, e)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *notifier) run() {
	defer close(n.done)
	for {
		select {
		case <-n.wake:
		case <-n.stop:
			return
		}
		n.mu.Lock()
		q := n.q
		n.q = nil
		n.mu.Unlock()
		for _, e := range q {
			n.fn(e.isLeader, e.leader, e.term)
		}
	}
}

func (n *notifier) close() {
	n.once.Do(func() { close(n.stop) })
	<-n.done
}

// checkSelf makes sure a store answers for one replica only: it records
// the replica id at the first start and refuses another one later. An
// identity file written again with another --replica-id would otherwise
// run this replica's log as that replica, a second voter of one id.
func checkSelf(db *kv.DB, k keys, gid, id uint64) error {
	v, err := db.Get(k.self)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		if err := db.Set(k.self, binary.BigEndian.AppendUint64(nil, id), true); err != nil {
			return fmt.Errorf("raft group %d replica %d: record the replica id: %w", gid, id, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("raft group %d replica %d: read the replica id: %w", gid, id, err)
	case len(v) != 8:
		return fmt.Errorf("raft group %d replica %d: the recorded replica id is damaged (%x)", gid, id, v)
	}
	if was := binary.BigEndian.Uint64(v); was != id {
		return fmt.Errorf("raft group %d: this store is replica %d's, but the target's identity names replica %d: "+
			"if its identity file was written again, give nacre format --replica-id %d (and the group's --peers); "+
			"a replica's id never changes (a new id is a new replica: nacre replica add)", gid, was, id, was)
	}
	return nil
}
