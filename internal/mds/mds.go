// Package mds is the metadata server: the network front end of an MDT.
//
// Reads (lookup, getattr, readdir, xattrs, fid2path) are served from the
// MDT's applied state. Every mutation arrives as a Command; the leader
// stamps it with the time and the OSTs to take objects from, proposes it to
// the MDT's Raft group (internal/raftgroup), and replies with what the
// state machine (internal/mdt) returned when it applied the entry. A
// replicated MDT answers once a quorum has the entry durably; a single
// replica answers once the entry is written, syncs within a commit window,
// and hands the client the unsynced entries to keep until then (the
// durability contract, durability.go).
//
// While it leads, the server also keeps the replicated bookkeeping going:
// it obtains FID sequence ranges from the MGS, precreates objects on every
// OST and records them in the pools (so a create never waits for an OST),
// destroys the OST objects of removed files, and after a restart or
// failover first has every OST destroy the precreated objects that were
// never used.
package mds

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
	"nacre/internal/pki"
	"nacre/internal/raftgroup"
	"nacre/internal/reserve"
	"nacre/internal/target"
	"nacre/internal/version"
)

// Pool sizes per OST: refill below poolLow, up to poolHigh. At 20,000
// creates/s spread over two OSTs a full pool lasts about three seconds,
// many times the time one precreate round trip takes.
const (
	poolLow      = 16384
	poolHigh     = 32768
	seqLowWater  = 2 * uint64(fid.Width)
	seqGrantSize = 64
	waitReady    = 10 * time.Second
	waitSettle   = 2 * time.Second        // for OSTs that are up but whose pool is not ready yet
	waitRefill   = 300 * time.Millisecond // for an empty pool, when a create asks for more stripes than are ready
)

// Config configures a metadata server.
type Config struct {
	ID    target.Identity
	DB    *kv.DB
	Log   *slog.Logger
	Reg   *prometheus.Registry
	GRPC  *grpc.Server
	MGS   nacregrpc.MGSClient
	Group func(sm raftgroup.StateMachine) (*raftgroup.Group, error)
	// Options are the server's knobs (options.go).
	Options Options
	// TLS, if set, are the credentials the server dials the OSTs with.
	TLS *pki.Creds
}

// Server is a running metadata server.
type Server struct {
	nacregrpc.UnimplementedMDSServer
	id    target.Identity
	log   *slog.Logger
	db    *kv.DB
	t     *mdt.Target
	group *raftgroup.Group
	mgs   nacregrpc.MGSClient
	opts  Options
	tls   *pki.Creds // dialling the OSTs
	seq   seqPolicy  // FID sequence grants (maintain.go)
	// oiFresh: the store is not (or no longer) marked restored (oiwait.go).
	oiFresh atomic.Bool

	linearizable bool // reads wait for the read index (replicated groups)

	mu   sync.Mutex
	osts map[uint32]*ostState
	// rm counts removals under way (shared.go); orphanGrace and
	// openGrace are the grace periods of open.go and shared.go.
	rm                     removals
	orphanGrace, openGrace time.Duration
	opensSeen              atomic.Bool // mdt.Target.OpensSeen, once true
	// replicas: the other replicas of this MDT as the MGS last listed
	// them, by replica id (their state and space; space.go).
	replicas map[uint64]*pb.TargetInfo
	rr       atomic.Uint64
	cfgAt    atomic.Int64 // when the OSTs were last read from the MGS (unix ns)
	cfgMu    sync.Mutex   // one freshConfig at a time
	cfgTry   time.Time    // the last freshConfig attempt (under cfgMu)
	nodemaps nodemaps     // from the MGS with the configuration (nodemap.go)
	// peers: the other MDTs, for cross-MDT transactions (dtx.go).
	peers *mdtPeers
	// bg: the work decide leaves to finish after its answer (background).
	bgMu      sync.Mutex
	bgStopped bool
	bg        sync.WaitGroup

	stop chan struct{}
	wg   sync.WaitGroup

	m            metrics
	lfsckMetrics *lfsckCollector // nacre_lfsck_* (metrics.go)
	// checkerLeads: this replica leads and its checker took over (read
	// the replicated state, resumed an interrupted run); until then the
	// checker's commands are refused, to be retried (lfsck.go).
	checkerLeads atomic.Bool
	// space refuses what would add to the MDT's store once its device is
	// down to the store's reserve (package space); nil for a store in
	// memory.
	space *reserve.Guard
	// tail and rec are the durability contract's (durability.go).
	tail     unsyncedTail
	rec      recovery
	tailLost bool // the log may have lost its unsynced tail since the last start
}

type ostState struct {
	index     uint32
	addr      string
	cc        *grpc.ClientConn
	cli       nacregrpc.OSSClient
	up        bool
	poolReady bool // orphan cleanup done during this leadership
	busy      bool // a pool operation is running
	// full: the OST reported too little free space or too few free
	// inodes; new files take no objects on it until it has twice the
	// reserve again (ostFull). Its statfs is kept for the message.
	full   bool
	statfs *pb.Statfs
}

// Start opens the MDT state machine, starts its Raft group and registers
// the MDS service on cfg.GRPC.
func Start(cfg Config) (*Server, error) {
	t, err := mdt.Open(cfg.DB, cfg.ID, cfg.Log)
	if err != nil {
		return nil, err
	}
	s := &Server{id: cfg.ID, log: cfg.Log, db: cfg.DB, t: t, mgs: cfg.MGS, opts: cfg.Options, tls: cfg.TLS, seq: parseSeqPolicy(cfg.Options.SeqGrant),
		osts: map[uint32]*ostState{}, replicas: map[uint64]*pb.TargetInfo{}, stop: make(chan struct{}),
		peers: newMDTPeers(cfg.ID.Index, cfg.ID.Fsname, cfg.TLS)}
	if cfg.DB.Dir() != "" {
		s.space = reserve.NewGuard(cfg.DB.Dir(), cfg.ID.Label(), cfg.DB.MemTableSize(), nil)
	}
	s.m = newMetrics(cfg.Reg, cfg.ID.Name())
	if err := s.readRunRecord(); err != nil {
		return nil, err
	}
	sm := &smAdapter{t: t, s: s}
	g, err := cfg.Group(sm)
	if err != nil {
		return nil, fmt.Errorf("start raft group of %s: %w", cfg.ID.Name(), err)
	}
	s.group = g
	sm.group.Store(g)
	if err := s.startDurability(); err != nil {
		g.Stop()
		return nil, err
	}
	s.linearizable = len(cfg.ID.Peers) > 1
	// Through the nodemaps (nodemap.go).
	nacregrpc.RegisterMDSServer(cfg.GRPC, s.Served())
	s.startClientServices(cfg.GRPC, cfg.Reg) // locks, sessions, open files (open.go)
	s.startChecker(cfg.GRPC, cfg.Reg)        // nacre lfsck and nacre fault (lfsck.go)
	s.wg.Add(2)
	go s.maintain()
	go s.tendDtx()
	return s, nil
}

// Target is the MDT state machine (for the checker and tools).
func (s *Server) Target() *mdt.Target { return s.t }

// Group is the MDT's Raft group.
func (s *Server) Group() *raftgroup.Group { return s.group }

// IsLeader reports whether this replica leads the MDT's group.
func (s *Server) IsLeader() bool { return s.group.IsLeader() }

// Stop stops background work and the Raft group.
func (s *Server) Stop() {
	s.stopChecker() // pauses a running check (lfsck.go)
	close(s.stop)
	s.wg.Wait()
	s.bgMu.Lock()
	s.bgStopped = true
	s.bgMu.Unlock()
	s.bg.Wait()
	lazy := s.group.Lazy()
	switch err := s.group.Stop(); {
	case err != nil && lazy:
		// The log failed (to sync): what it held unsynced may never
		// reach the disk, so the next start recovers from the clients.
		s.markTailLost()
	case err == nil && !s.rec.active.Load():
		s.stopDurability()
	}
	s.mu.Lock()
	for _, o := range s.osts {
		if o.cc != nil {
			o.cc.Close()
		}
	}
	s.mu.Unlock()
	s.peers.close()
}

// LocalStatfs reports the MDT's space and inodes.
func (s *Server) LocalStatfs() *pb.Statfs {
	u, _ := reserve.Statfs(s.db.Dir()) // zero when it cannot be read
	// What new names may still use: the store's reserve is not theirs
	// (admitSpace), as on an OST (ost.Store.Statfs).
	avail := u.Avail - min(u.Avail, reserve.Bytes(u.Total, s.db.MemTableSize()))
	return s.t.Statfs(u.Total, u.Free, avail)
}

// smAdapter lets the Raft group drive the MDT.
type smAdapter struct {
	t     *mdt.Target
	s     *Server
	group atomic.Pointer[raftgroup.Group] // set once Start has it
}

func (a *smAdapter) Apply(es []raftgroup.Entry) ([]any, error) {
	in := make([]mdt.Entry, len(es))
	for i, e := range es {
		in[i] = mdt.Entry{Index: e.Index, Data: e.Data}
	}
	replies, err := a.t.Apply(in)
	if err != nil {
		return nil, err
	}
	if g := a.group.Load(); g != nil && a.s.tail.on.Load() {
		synced, term := g.SyncedIndex(), g.Term()
		for _, e := range es {
			if e.Data != nil {
				a.s.tail.add(e.Index, term, e.Data, synced)
			}
		}
	}
	out := make([]any, len(replies))
	for i, r := range replies {
		if r != nil {
			out[i] = r
		}
	}
	return out, nil
}

func (a *smAdapter) Applied() uint64 { return a.t.Applied() }

// Snapshot is an image of the MDT's replicated key range.
func (a *smAdapter) Snapshot() (raftgroup.SnapshotData, error) {
	return raftgroup.SnapshotKV(a.t.DB(), raftgroup.KeyRange{Lower: mdt.StateLower}), nil
}

// Restore installs an image received from the leader.
func (a *smAdapter) Restore(r raftgroup.SnapshotData) error {
	defer r.Close()
	return a.t.ReplaceState(func(db *kv.DB) error {
		return raftgroup.RestoreKV(db, r, raftgroup.KeyRange{Lower: mdt.StateLower})
	})
}

// propose sends a command through the log and returns the state machine's
// reply. Failures that a retry can fix come back as Unavailable.
func (s *Server) propose(ctx context.Context, cmd *pb.Command) (*pb.Reply, error) {
	return s.proposeCmd(ctx, cmd, false)
}

// proposeCmd proposes cmd; lazy lets the group answer before the entry is
// synced (a client's change under the durability contract, durability.go).
// Until a recovery ends, only its replayed entries go to the log.
func (s *Server) proposeCmd(ctx context.Context, cmd *pb.Command, lazy bool) (*pb.Reply, error) {
	if err := s.waitRecovered(ctx); err != nil {
		return nil, err
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, errno.Errorf(errno.InvalidArgument, "encode command: %v", err)
	}
	propose := s.group.Propose
	if lazy {
		propose = s.group.ProposeLazy
	}
	res, err := propose(ctx, data)
	if err != nil {
		return nil, s.groupErr(err)
	}
	r, ok := res.(*pb.Reply)
	if !ok || r == nil {
		return nil, errno.Errorf(errno.Internal, "no reply from the state machine")
	}
	s.revokeLookups(cmd)
	return r, nil
}

func (s *Server) groupErr(err error) error {
	var nl *raftgroup.NotLeaderError
	switch {
	case errors.As(err, &nl):
		if nl.Addr == "" && nl.Leader != 0 && nl.Leader == s.group.Leader() {
			nl.Addr = s.group.LeaderAddr() // so that clients follow the redirect at once
		}
		return errno.NotLeader(s.id.Label(), nl.Leader, nl.Addr)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return errno.From(err)
	default:
		return errno.Errorf(errno.Unavailable, "%s: %v", s.id.Label(), err)
	}
}

func (s *Server) Hello(ctx context.Context, r *pb.HelloRequest) (*pb.HelloReply, error) {
	if r.Fsname != "" && r.Fsname != s.id.Fsname {
		return nil, errno.Errorf(errno.FailedPrecondition, "%s serves file system %q, not %q", s.id.Label(), s.id.Fsname, r.Fsname)
	}
	return &pb.HelloReply{ProtocolVersion: version.Protocol, Fsname: s.id.Fsname, Kind: pb.TargetKind_TARGET_MDT, Index: s.id.Index, Uuid: s.id.UUID}, nil
}

// Mutate is the one entry point of every namespace change.
func (s *Server) Mutate(ctx context.Context, cmd *pb.Command) (*pb.Reply, error) {
	start := time.Now()
	op := opName(cmd)
	if err := s.serving(); err != nil {
		return nil, err
	}
	switch cmd.Op.(type) {
	case *pb.Command_DtxPrepare, *pb.Command_DtxFinish, *pb.Command_DtxResolve, *pb.Command_DtxForget, *pb.Command_DtxStatus, *pb.Command_RemoteEntry:
		r, err := s.serveDtx(ctx, cmd)
		if err == nil {
			s.m.observe(op, start, r.Errno)
		}
		return r, err
	}
	have, keeps := cmd.ReplayHave, cmd.Keeps
	cmd.ReplayHave, cmd.Keeps = 0, false // not part of the logged command
	if fault.Hit(FaultReplyPrecheckSkip) == nil {
		if r, ok := s.t.ReplyFor(cmd.ClientId, cmd.RequestId); ok {
			s.attachReplay(r, have, keeps)
			s.m.observe(op, start, r.Errno)
			return r, nil
		}
	}
	if !s.group.IsLeader() {
		return nil, s.groupErr(&raftgroup.NotLeaderError{Leader: s.group.Leader()})
	}
	// Applied against a stale OI, the command would fail, and its error
	// would stay in the log and the reply cache.
	if err := s.waitOI(ctx, false); err != nil {
		return nil, errno.Errorf(errno.Unavailable, "%v", err)
	}
	cmd.NowNs = time.Now().UnixNano()
	if err := s.admitSpace(cmd); err != nil {
		return nil, err
	}
	if carriesDtx(cmd) {
		return nil, errno.Errorf(errno.InvalidArgument, "%s: a client's command may not carry a cross-MDT transaction", s.id.Label())
	}
	switch o := cmd.Op.(type) {
	case *pb.Command_Create:
		if o.Create.Mdt != nil && *o.Create.Mdt != s.id.Index {
			r, err := s.remoteMkdir(ctx, cmd, o.Create, *o.Create.Mdt)
			if err == nil {
				s.m.observe(op, start, r.Errno)
			}
			return r, err
		}
		if err := s.waitFIDs(ctx); err != nil {
			return nil, err
		}
		if isRegular(o.Create.Mode) && !o.Create.DelayLayout {
			osts, err := s.pickOSTs(ctx, s.createHint(o.Create))
			if err != nil {
				return nil, err
			}
			o.Create.Osts = osts
		}
	case *pb.Command_SetLayout:
		if r, err := s.layoutInUse(ctx, cmd.ClientId, o.SetLayout); r != nil || err != nil {
			return r, err
		}
		osts, err := s.pickOSTs(ctx, o.SetLayout.Layout)
		if err != nil {
			return nil, err
		}
		o.SetLayout.Osts = osts
	case *pb.Command_Setxattr:
		if r := s.xattrNamesFull(o.Setxattr); r != nil {
			return r, nil
		}
	case *pb.Command_Unlink:
		// Remote entries are directories: only an rmdir looks (a plain
		// unlink of one is refused by apply, EISDIR).
		if f, remote := s.remoteDir(o.Unlink); remote {
			r, err := s.remoteRmdir(ctx, cmd, o.Unlink, f)
			if err == nil {
				s.m.observe(op, start, r.Errno)
			}
			return r, err
		}
	case *pb.Command_Link:
		if r := s.notHere(fid.FromPB(o.Link.Fid), "link"); r != nil {
			return r, nil
		}
	case *pb.Command_Rename:
		if r := s.notHere(fid.FromPB(o.Rename.DstParent), "rename"); r != nil {
			return r, nil
		}
		if f, remote := s.remoteEntry(o.Rename.SrcParent, o.Rename.SrcName); remote {
			r, err := s.remoteRename(ctx, cmd, o.Rename, f)
			if err == nil {
				s.m.observe(op, start, r.Errno)
			}
			return r, err
		}
		if o.Rename.Flags&renameWhiteout != 0 {
			if err := s.waitFIDs(ctx); err != nil { // the whiteout is a new object
				return nil, err
			}
		}
	case *pb.Command_Setattr, *pb.Command_Removexattr:
	default:
		return nil, errno.Errorf(errno.InvalidArgument, "%s: clients may not send %T", s.id.Label(), cmd.Op)
	}
	if r := s.reservedName(cmd); r != nil {
		return r, nil
	}
	var given uint64
	var idle bool
	if c, ok := cmd.Op.(*pb.Command_Create); ok && c.Create.Open {
		given, idle = s.rm.quiet() // for noteCreateOpen, below
	}
	r, err := s.proposeRemoval(ctx, cmd, keeps)
	if err != nil {
		return nil, err
	}
	if r.TimeNs != cmd.NowNs && cmd.ClientId != 0 {
		// Apply found the request in the reply cache: an earlier entry
		// of the log executed it (a retry that reached a new leader
		// before it had applied that entry).
		s.log.Info("retried request answered from the reply cache by apply", "op", op, "client", cmd.ClientId, "request", cmd.RequestId, "index", r.Index)
	}
	if err := s.replyFaults(ctx, op, cmd, r); err != nil {
		return nil, err
	}
	if c, ok := cmd.Op.(*pb.Command_Create); ok && c.Create.Open && r.Errno == 0 && r.Inode != nil {
		if r, err = s.noteCreateOpen(ctx, cmd.ClientId, r, given, idle); err != nil {
			return nil, err
		}
	}
	s.attachReplay(r, have, keeps)
	s.m.observe(op, start, r.Errno)
	return r, nil
}

func isRegular(mode uint32) bool {
	return mode&syscall.S_IFMT == 0 || mode&syscall.S_IFMT == syscall.S_IFREG
}

func opName(cmd *pb.Command) string {
	switch o := cmd.Op.(type) {
	case *pb.Command_Create:
		switch o.Create.Mode & syscall.S_IFMT {
		case syscall.S_IFDIR:
			return "mkdir"
		case syscall.S_IFLNK:
			return "symlink"
		case 0, syscall.S_IFREG:
			return "create"
		}
		return "mknod"
	case *pb.Command_Link:
		return "link"
	case *pb.Command_Unlink:
		if o.Unlink.Dir {
			return "rmdir"
		}
		return "unlink"
	case *pb.Command_Rename:
		return "rename"
	case *pb.Command_Setattr:
		return "setattr"
	case *pb.Command_Setxattr:
		return "setxattr"
	case *pb.Command_Removexattr:
		return "removexattr"
	case *pb.Command_SetLayout:
		return "setlayout"
	}
	return "internal"
}

// waitFIDs waits (briefly, at start) until the MDT holds a FID sequence.
func (s *Server) waitFIDs(ctx context.Context) error {
	deadline := time.Now().Add(waitReady)
	for s.t.SeqRemaining() == 0 {
		if time.Now().After(deadline) {
			return errno.Errorf(errno.Unavailable, "%s has no FID sequence yet: the MGS has not answered", s.id.Label())
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return errno.From(err)
		}
	}
	return nil
}

// pickOSTs orders the OSTs a new file may take objects from: round robin
// over OSTs that are up and have precreated objects, starting at the hint's
// stripe offset if it names one. It waits briefly when no pool is ready yet
// (only right after a start), never during normal operation.
// createHint is what orders the OSTs of a create: its own layout, with
// what it leaves open (the stripe count, the first OST) taken from the
// directory's default, as the state machine will (mdt defaultLayout).
// Without it, a directory set to start on one OST (setstripe -i) had its
// files start on every OST in turn.
func (s *Server) createHint(op *pb.CreateOp) *pb.Layout {
	h := op.Layout
	if h != nil && h.StripeOffset >= 0 {
		return h // names its first OST (nacre put -i)
	}
	count, offset := s.t.DirDefault(fid.FromPB(op.Parent))
	out := &pb.Layout{StripeCount: count, StripeOffset: offset}
	if h != nil && h.StripeCount != 0 {
		out.StripeCount = h.StripeCount
	}
	return out
}

// XattrListMax is what listxattr(2) can return at most: the names of a
// file's extended attributes, each with its NUL (the kernel's
// XATTR_LIST_MAX).
const XattrListMax = 64 << 10

// xattrNamesFull refuses (ENOSPC, as ext4 says when a file's xattrs fill
// their space) a new extended attribute whose name would make the file's
// list longer than listxattr can return: getfattr -d, cp -a and rsync -X
// then failed on the file for good (E2BIG). Checked before the command
// is proposed, as apply must not change its answers: concurrent sets can
// pass it together, which costs at most a little over the bound.
func (s *Server) xattrNamesFull(op *pb.SetxattrOp) *pb.Reply {
	f := fid.FromPB(op.Fid)
	names, err := s.t.Listxattr(f, &pb.Cred{Uid: 0})
	if err != nil {
		return nil // apply answers for a file that is gone
	}
	total := len(op.Name) + 1
	for _, n := range names {
		if n == string(op.Name) {
			return nil // replaced: the list does not grow
		}
		total += len(n) + 1
	}
	if total <= XattrListMax {
		return nil
	}
	return &pb.Reply{Errno: int32(syscall.ENOSPC), Message: fmt.Sprintf("set xattr %q on %s: the names of its extended attributes would take %d bytes, more than the %d listxattr can return", op.Name, f, total, XattrListMax)}
}

// layoutInUse refuses a new layout for a file another client has open:
// that client writes through the layout it read at open, into objects the
// new layout gives up (they are destroyed), and its close then records a
// size the new objects do not hold. Lustre revokes the file's layout lock
// instead; here the one client that may change the layout of an open file
// is the one holding it (the mount orders its own writes around it). A new
// leadership does not know the opens yet: the client is asked to retry.
//
// A mount tells the MDS of a last close up to 5 s late, batched
// (fusefs's closeBatchDelay), so `touch f; nacre setstripe f` finds f
// still open there: the check waits that long for the open to go.
func (s *Server) layoutInUse(ctx context.Context, client uint64, op *pb.SetLayoutOp) (*pb.Reply, error) {
	lm := s.LDLM()
	if lm == nil {
		return nil, nil
	}
	f := fid.FromPB(op.Fid)
	ino, err := s.t.Getattr(f, false)
	if err != nil || ino.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, nil // apply answers for what is gone or not a file
	}
	if time.Since(s.group.LeaderSince()) < s.openGrace && s.t.OpensSeen() {
		return nil, errno.Errorf(errno.Unavailable, "%s leads since less than %s and does not know yet which files clients have open; retry", s.id.Label(), s.openGrace)
	}
	for deadline := time.Now().Add(layoutOpenWait); lm.HeldOpen(f, client, s.orphanGrace); {
		if time.Now().After(deadline) {
			return &pb.Reply{Errno: int32(syscall.EBUSY), Message: "the file is open on another client, which writes through its current layout; close it there first"}, nil
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return nil, errno.From(err)
		}
	}
	return nil, nil
}

// layoutOpenWait is how long a new layout waits for a file's opens on
// other clients to go: a mount's batched close notice (5 s, sent by a
// timer that ticks every second), and two seconds more.
const layoutOpenWait = 8 * time.Second

func (s *Server) pickOSTs(ctx context.Context, hint *pb.Layout) ([]uint32, error) {
	start := time.Now()
	deadline := start.Add(waitReady)
	// The stripes asked for, when the create says (a directory's default
	// is resolved later, in the state machine).
	want := 0
	if hint != nil {
		want = int(hint.StripeCount)
		if hint.StripeCount < 0 {
			want = math.MaxInt
		}
	}
	refreshed := false
	for {
		ready, settling, empty, down, full := s.readyOSTs()
		if want > len(ready) && !refreshed {
			// An OST that registered since the last configuration read
			// (once a second) is not known yet: read it now (freshConfig),
			// so that "every OST" means every OST up.
			refreshed = true
			s.freshConfig()
			continue
		}
		// Right after a start or a leader change the pools come up one
		// by one: wait a little for the OSTs still cleaning up, so that a
		// file does not get fewer stripes than asked only because its
		// create came first. An empty pool is being refilled (a refill
		// takes milliseconds): a create that would otherwise get fewer
		// stripes than it asks waits for it a little too, but not long,
		// as an OST that is full stays empty.
		waited := time.Since(start)
		if (settling > 0 && waited < waitSettle) || (want > len(ready) && empty > 0 && waited < waitRefill) {
			ready = nil
		}
		if len(ready) > 0 {
			if hint == nil || hint.StripeOffset < 0 {
				if w := s.qosWeights(ready); w != nil {
					return weightedOrder(ready, w, rand.Uint64N), nil
				}
			}
			start := int(s.rr.Add(1) % uint64(len(ready)))
			if hint != nil && hint.StripeOffset >= 0 {
				for i, o := range ready {
					if o == uint32(hint.StripeOffset) {
						start = i
					}
				}
			}
			out := make([]uint32, 0, len(ready))
			for i := range ready {
				out = append(out, ready[(start+i)%len(ready)])
			}
			return out, nil
		}
		if len(full) > 0 && settling == 0 && empty == 0 && down == 0 {
			// Every OST is up and full: waiting would not help. (With
			// one down, as in a rolling restart, it may come back with
			// room: wait for it as for any OST.)
			return nil, errno.Errorf(errno.ResourceExhausted, "every OST is full (%s): remove files or add an OST", strings.Join(full, ", "))
		}
		if time.Now().After(deadline) {
			if len(full) > 0 {
				return nil, errno.Errorf(errno.ResourceExhausted, "%s: no OST with room is up (full: %s; down: %d); check `nacre status` and `nacre df`", s.id.Label(), strings.Join(full, ", "), down)
			}
			return nil, errno.Errorf(errno.ResourceExhausted, "%s: no OST is up with precreated objects; check `nacre status`", s.id.Label())
		}
		if err := sleepCtx(ctx, 10*time.Millisecond); err != nil {
			return nil, errno.From(err)
		}
	}
}

// readyOSTs returns the OSTs with objects to hand out, how many OSTs are
// up but still setting up their pool, how many have a ready pool that is
// empty (being refilled), how many are known but down, and the OSTs that
// are up but full, described for a message.
func (s *Server) readyOSTs() (ready []uint32, settling, empty, down int, full []string) {
	pools := s.t.Pools()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.osts {
		switch {
		case !o.up:
			down++
		case o.full:
			full = append(full, describeFull(o))
		case o.poolReady && pools[i].Avail() > 0:
			ready = append(ready, i)
		case o.poolReady:
			empty++
		case o.cli != nil:
			settling++
		}
	}
	sort.Slice(ready, func(a, b int) bool { return ready[a] < ready[b] })
	sort.Strings(full)
	return ready, settling, empty, down, full
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// readBarrier makes a read linearizable in a replicated group
// (leadership.go).
func (s *Server) readBarrier(ctx context.Context) error {
	if err := s.serving(); err != nil {
		return err
	}
	if !s.group.Replicated() {
		return nil
	}
	return s.linearRead(ctx)
}

// errnoOf is err's errno, 0 for nil (a success: mdt.ErrnoOf(nil) is EIO,
// which counted every readdir as an error in the MDS's metrics).
func errnoOf(err error) int32 {
	if err == nil {
		return 0
	}
	return int32(mdt.ErrnoOf(err))
}

// byteSlices converts names or paths for the wire, where they are bytes
// (POSIX names need not be UTF-8).
func byteSlices(ss []string) [][]byte {
	if ss == nil {
		return nil
	}
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

func (s *Server) Lookup(ctx context.Context, r *pb.LookupRequest) (*pb.Reply, error) {
	start := time.Now()
	if err := s.readBarrier(ctx); err != nil {
		return nil, err
	}
	var ino *pb.Inode
	err := s.afterOI(ctx, func() (err error) {
		ino, err = s.t.Lookup(fid.FromPB(r.Parent), string(r.Name), r.Cred)
		return err
	})
	if err != nil {
		s.m.observe("lookup", start, errnoOf(err))
		return &pb.Reply{Errno: errnoOf(err), Message: err.Error()}, nil
	}
	s.m.observe("lookup", start, 0)
	return &pb.Reply{Inode: ino}, nil
}

func (s *Server) Getattr(ctx context.Context, r *pb.GetattrRequest) (*pb.Reply, error) {
	start := time.Now()
	if err := s.readBarrier(ctx); err != nil {
		return nil, err
	}
	var ino *pb.Inode
	err := s.afterOI(ctx, func() (err error) {
		ino, err = s.t.Getattr(fid.FromPB(r.Fid), r.WantLinks)
		return err
	})
	if err != nil {
		s.m.observe("getattr", start, errnoOf(err))
		return &pb.Reply{Errno: errnoOf(err), Message: err.Error()}, nil
	}
	s.m.observe("getattr", start, 0)
	return &pb.Reply{Inode: ino}, nil
}

func (s *Server) Readdir(ctx context.Context, r *pb.ReaddirRequest) (*pb.ReaddirReply, error) {
	start := time.Now()
	if err := s.readBarrier(ctx); err != nil {
		return nil, err
	}
	var ents []*pb.DirEntry
	var eof bool
	err := s.afterOI(ctx, func() (err error) {
		ents, eof, err = s.t.Readdir(fid.FromPB(r.Fid), r.Cookie, int(r.MaxEntries), r.Plus, r.Cred)
		return err
	})
	s.m.observe("readdir", start, errnoOf(err))
	if err != nil {
		return &pb.ReaddirReply{Errno: errnoOf(err)}, nil
	}
	return &pb.ReaddirReply{Entries: ents, Eof: eof}, nil
}

func (s *Server) Getxattr(ctx context.Context, r *pb.XattrRequest) (*pb.XattrReply, error) {
	start := time.Now()
	if err := s.readBarrier(ctx); err != nil {
		return nil, err
	}
	var v []byte
	err := s.afterOI(ctx, func() (err error) {
		v, err = s.t.Getxattr(fid.FromPB(r.Fid), string(r.Name), r.Cred)
		return err
	})
	s.m.observe("getxattr", start, errnoOf(err))
	if err != nil {
		return &pb.XattrReply{Errno: errnoOf(err)}, nil
	}
	return &pb.XattrReply{Value: v}, nil
}

func (s *Server) Listxattr(ctx context.Context, r *pb.XattrRequest) (*pb.XattrReply, error) {
	start := time.Now()
	if err := s.readBarrier(ctx); err != nil {
		return nil, err
	}
	var names []string
	err := s.afterOI(ctx, func() (err error) {
		names, err = s.t.Listxattr(fid.FromPB(r.Fid), r.Cred)
		return err
	})
	s.m.observe("listxattr", start, errnoOf(err))
	if err != nil {
		return &pb.XattrReply{Errno: errnoOf(err)}, nil
	}
	return &pb.XattrReply{Names: byteSlices(names)}, nil
}

func (s *Server) Fid2Path(ctx context.Context, r *pb.Fid2PathRequest) (*pb.Fid2PathReply, error) {
	if err := s.readBarrier(ctx); err != nil {
		return nil, err
	}
	if r.Cred != nil && r.Cred.Uid != 0 {
		// As Lustre's fid2path without CAP_DAC_READ_SEARCH: the paths
		// would name what directories the caller may not search hold.
		return &pb.Fid2PathReply{Errno: int32(syscall.EPERM)}, nil
	}
	var paths []string
	var tails []*pb.PathTail
	err := s.afterOI(ctx, func() (err error) {
		paths, tails, err = s.t.Fid2Path(fid.FromPB(r.Fid))
		return err
	})
	if err != nil {
		return &pb.Fid2PathReply{Errno: errnoOf(err)}, nil
	}
	return &pb.Fid2PathReply{Paths: byteSlices(paths), Tails: tails}, nil
}

func (s *Server) Statfs(ctx context.Context, _ *pb.StatfsRequest) (*pb.StatfsReply, error) {
	return &pb.StatfsReply{Statfs: s.LocalStatfs()}, nil
}
