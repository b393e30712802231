package lfsck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
)

// OST is one OST as the checker reaches it (gRPC in the MDS, the store
// itself in unit tests).
type OST interface {
	Check(ctx context.Context, req *pb.LfsckCheckRequest) (*pb.LfsckCheckReply, error)
	Summary(ctx context.Context, req *pb.LfsckSummaryRequest) (*pb.LfsckSummaryReply, error)
	Orphans(ctx context.Context, req *pb.LfsckOrphansRequest) (*pb.LfsckOrphansReply, error)
	Repair(ctx context.Context, req *pb.LfsckObjRepairRequest) (*pb.LfsckObjRepairReply, error)
	GetObjects(ctx context.Context, objs []*pb.StripeObject) ([]*pb.ObjectAttr, error)
}

// Env is what the checker needs from the server it runs in.
type Env struct {
	Target *mdt.Target
	// Propose sends a command through the MDT's log and returns the reply
	// of its apply.
	Propose func(ctx context.Context, cmd *pb.Command) (*pb.Reply, error)
	// OSTs returns the OSTs known now; an OST that is down may be missing
	// or fail its calls.
	OSTs func() map[uint32]OST
	Log  *slog.Logger
	// RPCTimeout bounds one call to an OST (default 20 s).
	RPCTimeout time.Duration
	// Activity counts the MDT's foreground operations (its applied log
	// index); nil: the checker never yields to clients.
	Activity func() uint64
	// Invalidate has the mounted clients drop what they cache of files
	// whose data a repair changed (a stripe re-created empty, replaced or
	// given back), as Lustre's LFSCK does by taking their locks; nil:
	// nothing to tell.
	Invalidate func(ctx context.Context, fids []fid.FID)
	// Tuning holds the knobs an admin may set (NACRE_LFSCK_* in the
	// server's environment, read by cmd/nacre); the zero value is the
	// default.
	Tuning Tuning
	// Remote reaches the other MDTs, for the names that cross MDTs
	// (remote directories); nil: one MDT.
	Remote Remote
}

// Remote is what the namespace check asks of the other MDTs. Errors that
// say an object or a name does not exist unwrap to syscall.ENOENT.
type Remote interface {
	// Getattr reads an object, with its linkEA, on the MDT that holds it.
	Getattr(ctx context.Context, f fid.FID) (*pb.Inode, error)
	// Lookup reads parent/name on the MDT that holds parent: the FID it
	// names and whether the entry is remote.
	Lookup(ctx context.Context, parent fid.FID, name string) (fid.FID, bool, error)
	// Relink puts the remote entry parent/name -> f (of type typ, DT_*)
	// back on the parent's MDT, if the name is free.
	Relink(ctx context.Context, parent fid.FID, name string, f fid.FID, typ uint32) error
}

// Tuning adjusts how a run shares the machine with clients.
type Tuning struct {
	// Nice is the nice level of the scanning thread (0: not changed;
	// lowerPriority says why the default leaves it).
	Nice int
	// BusyDuty is the share of time the scan takes while clients are
	// active (0: 0.05; 1: never yield; see pacer).
	BusyDuty float64
	// NoSummaries turns off the OST summaries: every stripe is checked by
	// its record instead (summary.go).
	NoSummaries bool
}

// Checker is the checker of one MDT. It runs on the MDT's leader; every
// replica has one, idle until its replica leads.
type Checker struct {
	env Env
	log *slog.Logger

	ctlMu sync.Mutex // serialises Start, Stop, Resume (LU-19499)

	mu    sync.Mutex
	state *pb.LfsckState // the latest run: persisted, or a dry run's (memory only)
	cur   *run
	last  *run // the last finished run (its live figures for reports)
	// began: a run started since state was last read from the store
	// (then state is that run's, newer than the store; a dry run's is
	// in memory only).
	began bool
	done  runFigures // Progress: what the runs that ended counted (progress.go)
	shown runFigures // Progress: the highest totals returned
}

// ErrRunning: a check is already running.
var ErrRunning = errors.New("the checker is already running")

// New returns an idle checker.
func New(env Env) *Checker {
	if env.Log == nil {
		env.Log = slog.New(slog.DiscardHandler)
	}
	if env.RPCTimeout == 0 {
		env.RPCTimeout = 20 * time.Second
	}
	if env.OSTs == nil {
		env.OSTs = func() map[uint32]OST { return nil }
	}
	c := &Checker{env: env, log: env.Log.With("component", "lfsck")}
	c.state = c.loadState()
	return c
}

// loadState reads the persisted state (a fresh one if none or garbage).
func (c *Checker) loadState() *pb.LfsckState {
	st := &pb.LfsckState{}
	v, err := c.env.Target.DB().Get(mdt.KeyLfsckState)
	if err == nil {
		if proto.Unmarshal(v, st) != nil {
			c.log.Warn("checker state does not decode; starting from a clean state")
			st = &pb.LfsckState{}
		}
	}
	if st.Params == nil {
		st.Params = &pb.LfsckParams{}
	}
	have := map[uint32]bool{}
	for _, cs := range st.Components {
		have[cs.Component] = true
		// A run of this process reports its own state: a stored scanning
		// status is a run whose server died (kill -9, power cut). Lustre
		// shows it as crashed too until it resumes, and with
		// NACRE_LFSCK_NO_AUTO nothing resumes it by itself.
		if cs.Status == StPhase1 || cs.Status == StPhase2 {
			cs.Status = StCrashed
		}
	}
	for _, comp := range Components {
		if !have[comp] {
			st.Components = append(st.Components, &pb.LfsckComponentState{Component: comp})
		}
	}
	sort.Slice(st.Components, func(i, j int) bool { return st.Components[i].Component < st.Components[j].Component })
	return st
}

func compState(st *pb.LfsckState, comp uint32) *pb.LfsckComponentState {
	for _, cs := range st.Components {
		if cs.Component == comp {
			return cs
		}
	}
	cs := &pb.LfsckComponentState{Component: comp}
	st.Components = append(st.Components, cs)
	return cs
}

// Running reports whether a check runs.
func (c *Checker) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil
}

// Scrubbing reports whether a run that repairs the OI (an OI scrub, not a
// dry run) is under way.
func (c *Checker) Scrubbing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cur != nil && !c.cur.dry && c.cur.on(Scrub)
}

// Wait waits until the current run (if any) ends.
func (c *Checker) Wait(ctx context.Context) error {
	c.mu.Lock()
	r := c.cur
	c.mu.Unlock()
	if r == nil {
		return nil
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Start starts (or resumes) a check as req asks.
func (c *Checker) Start(ctx context.Context, req *pb.LfsckStartRequest) (string, error) {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	c.mu.Lock()
	busy := c.cur != nil
	c.mu.Unlock()
	if busy {
		return "", fmt.Errorf("%w: stop it first, or change its speed with `nacre lfsck set`: %w", ErrRunning, syscall.EALREADY)
	}
	types, err := ParseTypes(req.Types)
	if err != nil {
		return "", err
	}
	switch req.ErrorPolicy {
	case "", "continue", "failout", "abort":
	default:
		return "", &usageError{"-e " + req.ErrorPolicy + ": use continue or failout"}
	}
	if req.Window != nil && (*req.Window == 0 || *req.Window > 1<<20) {
		return "", &usageError{fmt.Sprintf("-w %d: the window must be 1 to 1048576", *req.Window)}
	}
	c.mu.Lock()
	prev := proto.Clone(c.state).(*pb.LfsckState)
	c.mu.Unlock()
	if !req.DryRun && prev.Params.DryRun {
		// What query shows after a dry run is that run, kept in memory
		// only; a real run continues from the stored state (a stopped
		// real run resumes from its checkpoint).
		prev = c.loadState()
	}

	// Resume when the selected components were interrupted, the request
	// does not reset, and the run kind (dry or not) is the same.
	resumable := func(comp uint32) bool {
		switch compState(prev, comp).Status {
		case StPhase1, StPhase2, StStopped, StPaused, StCrashed, StFailed:
			return true
		}
		return false
	}
	if types == 0 {
		for _, comp := range Components {
			if prev.Params.Types&(1<<comp) != 0 && resumable(comp) {
				types |= 1 << comp
			}
		}
		if types == 0 {
			types = 1<<Scrub | 1<<Namespace | 1<<Layout
		}
	}
	resume := !req.Reset_ && prev.Phase != 0 && prev.Params.Types == types && prev.Params.DryRun == req.DryRun
	if resume {
		for _, comp := range Components {
			if types&(1<<comp) != 0 && !resumable(comp) {
				resume = false
			}
		}
	}
	p := &pb.LfsckParams{Types: types, Window: defaultWindow, CheckpointIntervalMs: defaultCheckpoint.Milliseconds()}
	if resume || !req.Reset_ {
		// Parameters persist unless given (or reset).
		p.Speed, p.Window = prev.Params.Speed, prev.Params.Window
		if p.Window == 0 {
			p.Window = defaultWindow
		}
		if resume {
			p.CreateOstobj, p.CreateMdtobj, p.Failout = prev.Params.CreateOstobj, prev.Params.CreateMdtobj, prev.Params.Failout
		}
	}
	if req.Speed != nil {
		p.Speed = *req.Speed
	}
	if req.Window != nil {
		p.Window = *req.Window
	}
	p.DryRun = req.DryRun
	p.AllTargets = req.AllTargets
	p.Orphan = req.Orphan || (resume && prev.Params.Orphan)
	p.CreateOstobj = p.CreateOstobj || req.CreateOstobj
	p.CreateMdtobj = p.CreateMdtobj || req.CreateMdtobj
	if req.ErrorPolicy != "" {
		p.Failout = req.ErrorPolicy == "failout" || req.ErrorPolicy == "abort"
	}
	if req.CheckpointIntervalMs > 0 {
		p.CheckpointIntervalMs = req.CheckpointIntervalMs
	}
	if err := c.begin(ctx, prev, p, resume); err != nil {
		return "", err
	}
	what := "started"
	if resume {
		what = "resumed"
	}
	return fmt.Sprintf("%s %s on %s: %s", what, kindOfRun(p), c.env.Target.Identity().Label(), typeList(types)), nil
}

func kindOfRun(p *pb.LfsckParams) string {
	if p.DryRun {
		return "a dry run"
	}
	return "the checker"
}

func typeList(types uint32) string {
	s := ""
	for _, comp := range Components {
		if types&(1<<comp) != 0 {
			if s != "" {
				s += ","
			}
			s += ComponentNames[comp]
		}
	}
	return s
}

const (
	defaultWindow     = 65536
	defaultCheckpoint = 60 * time.Second
)

// begin prepares the state of a new or resumed run and starts it.
func (c *Checker) begin(ctx context.Context, prev *pb.LfsckState, p *pb.LfsckParams, resume bool) error {
	now := time.Now().UnixNano()
	st := prev
	if !resume {
		st = proto.Clone(prev).(*pb.LfsckState)
		st.Run++
		// Commands applied up to now are in the store the scan reads;
		// the start itself comes later in the log.
		st.RunStartIndex = c.env.Target.Applied() + 1
		st.DirentsUnread = false
		st.Phase = 1
		st.Position = 0
		st.Phase2Position = nil
		st.Phase2Step = 0
		if p.Types&(1<<Layout) != 0 {
			// The list explains the layout check's last "partial": a
			// run without it keeps it.
			st.IncompleteOsts = nil
		}
	}
	st.Params = p
	for _, comp := range Components {
		cs := compState(st, comp)
		if p.Types&(1<<comp) == 0 {
			continue
		}
		if !resume {
			success, lastDone := cs.SuccessCount, cs.LastCompletedNs
			*cs = pb.LfsckComponentState{Component: comp, SuccessCount: success, LastCompletedNs: lastDone}
		}
		cs.Status = StPhase1
		if st.Phase == 2 {
			cs.Status = StPhase2
		}
		cs.LatestStartNs = now
		cs.LatestStartPosition = st.Position
		cs.Param = paramBits(p)
		if p.Auto {
			cs.Flags |= FlAuto
		}
	}
	r := newRun(c, st)
	if !p.DryRun {
		// Persist the start, and reset the counters of a fresh run, in one
		// entry: a crash from here on resumes this run.
		op := &pb.LfsckStateOp{Set: []*pb.LfsckKV{{Key: mdt.KeyLfsckState, Value: mustMarshal(st)}}}
		if !resume {
			for _, comp := range Components {
				if p.Types&(1<<comp) != 0 {
					op.DeletePrefix = append(op.DeletePrefix, mdt.LfsckCounterPrefix(comp), mdt.LfsckReportPrefix(comp), mdt.LfsckTracePrefix(comp))
				}
			}
		}
		if err := c.proposeState(ctx, op); err != nil {
			return fmt.Errorf("record the checker's start: %w", err)
		}
	}
	// What the run starts from (a resumed run's figures so far, the
	// counters as the start left them): Progress counts from here.
	r.base = c.figuresOf(st, r.live())
	c.mu.Lock()
	c.state = proto.Clone(st).(*pb.LfsckState)
	c.cur = r
	c.began = true
	c.mu.Unlock()
	go r.main()
	return nil
}

func paramBits(p *pb.LfsckParams) uint32 {
	var b uint32
	if p.Failout {
		b |= PFailout
	}
	if p.DryRun {
		b |= PDryRun
	}
	if p.AllTargets {
		b |= PAllTargets
	}
	if p.Orphan {
		b |= POrphan
	}
	if p.CreateOstobj {
		b |= PCreateOST
	}
	if p.CreateMdtobj {
		b |= PCreateMDT
	}
	return b
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("lfsck: marshal %T: %v", m, err))
	}
	return b
}

func (c *Checker) proposeState(ctx context.Context, op *pb.LfsckStateOp) error {
	c.mu.Lock()
	if c.cur != nil {
		c.cur.pac.own.Add(1)
	}
	c.mu.Unlock()
	rep, err := c.env.Propose(ctx, &pb.Command{Op: &pb.Command_LfsckState{LfsckState: op}})
	if err != nil {
		return err
	}
	if rep.Errno != 0 {
		return fmt.Errorf("%s: %w", rep.Message, syscall.Errno(rep.Errno))
	}
	return nil
}

// Stop stops the running check, checkpointing it, and waits until it has
// stopped. It always returns, also with an OST down.
func (c *Checker) Stop(ctx context.Context) (string, error) {
	return c.halt(ctx, StStopped)
}

// Pause stops a running check for a server shutdown: it resumes by itself
// at the next start (status paused).
func (c *Checker) Pause(ctx context.Context) {
	c.halt(ctx, StPaused)
}

func (c *Checker) halt(ctx context.Context, status uint32) (string, error) {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	c.mu.Lock()
	r := c.cur
	c.mu.Unlock()
	if r == nil {
		return "the checker is not running", nil
	}
	r.halt(status)
	select {
	case <-r.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	return "stopped " + typeList(r.st.Params.Types), nil
}

// Abandon stops a running check without recording anything: this replica
// lost the leadership, and the new leader resumes from the last checkpoint.
func (c *Checker) Abandon() {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	c.mu.Lock()
	r := c.cur
	c.mu.Unlock()
	if r != nil {
		r.halt(haltAbandon)
		<-r.done
	}
	// The next leader's runs change the store: this replica reads it
	// again when it leads (Resume).
	c.mu.Lock()
	c.state = c.loadState()
	c.began = false
	c.mu.Unlock()
}

// Set changes the speed limit (objects/s, 0: none) or the window of the
// running check; they are saved with the next checkpoint.
func (c *Checker) Set(speed *uint64, window *uint32) error {
	if window != nil && (*window == 0 || *window > 1<<20) {
		return &usageError{fmt.Sprintf("window %d: use 1 to 1048576", *window)}
	}
	c.mu.Lock()
	r := c.cur
	c.mu.Unlock()
	if r == nil {
		return errors.New("the checker is not running; give -s and -w to nacre lfsck start")
	}
	if speed != nil {
		r.setSpeed(*speed)
	}
	if window != nil {
		r.setWindow(int(*window))
	}
	return nil
}

// Resume is called when this replica becomes the leader (and at start):
// an interrupted real run (crashed, paused, or scanning when the previous
// leader died) resumes from its checkpoint, and a store restored from a
// backup gets an OI scrub.
func (c *Checker) Resume(ctx context.Context) error {
	c.ctlMu.Lock()
	c.mu.Lock()
	busy := c.cur != nil
	st := c.loadState()
	if !c.began {
		// Else a run started here before this replica's leadership was
		// noticed (an admin can be quicker than the 200 ms tick): what it
		// left is newer, and a dry run's result is in memory only.
		c.state = proto.Clone(st).(*pb.LfsckState)
	}
	c.mu.Unlock()
	c.ctlMu.Unlock()
	if busy {
		return nil
	}
	_, err := c.env.Target.DB().Get(mdt.KeyRestored)
	restored := err == nil
	interrupted := false
	for _, comp := range Components {
		if st.Params.Types&(1<<comp) == 0 {
			continue
		}
		switch compState(st, comp).Status {
		case StPhase1, StPhase2, StPaused, StCrashed:
			interrupted = true
		}
	}
	if interrupted && !st.Params.DryRun && st.Phase != 0 {
		// A run that was scanning when its server died is "crashed"; one
		// paused at shutdown stays "paused" in its history; both resume.
		for _, comp := range Components {
			cs := compState(st, comp)
			if st.Params.Types&(1<<comp) != 0 && (cs.Status == StPhase1 || cs.Status == StPhase2) {
				cs.Status = StCrashed
			}
		}
		c.mu.Lock()
		c.state = st
		c.mu.Unlock()
		c.log.Info("resuming an interrupted check", "types", typeList(st.Params.Types), "phase", st.Phase, "position", st.Position)
		c.ctlMu.Lock()
		defer c.ctlMu.Unlock()
		return c.begin(ctx, st, st.Params, true)
	}
	if restored {
		c.log.Warn("this MDT was restored from a file-level backup: its object index is stale; running an OI scrub")
		c.ctlMu.Lock()
		defer c.ctlMu.Unlock()
		p := &pb.LfsckParams{Types: 1 << Scrub, Window: defaultWindow, Auto: true, CheckpointIntervalMs: defaultCheckpoint.Milliseconds()}
		return c.begin(ctx, st, p, false)
	}
	return nil
}

// finish records the end of a run (called by the run itself).
func (c *Checker) finish(r *run) {
	end := c.figuresOf(r.snapshotState(), r.live())
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == r {
		c.cur = nil
	}
	c.last = r
	c.runEnded(r, end)
	if r.haltMode() != haltAbandon {
		c.state = r.snapshotState()
	}
}

// DB is the store the checker works on.
func (c *Checker) DB() *kv.DB { return c.env.Target.DB() }
