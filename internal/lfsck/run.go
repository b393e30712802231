package lfsck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/mdt"
	"nacre/internal/objrec"
)

// haltAbandon: stop without recording anything (leadership lost).
const haltAbandon = 100

// tally holds a run's progress figures per component: checked, failed,
// kinds found and repaired (dry runs; real runs count at apply), and
// statistics. Arrays add and subtract cheaply, which exact checkpoints
// need (see layout.go: figures of work still in flight are held back).
type tally [4][48]uint64

const (
	tChecked  = 0
	tFailed   = 1
	tFound    = 2  // + kind
	tRepaired = 18 // + kind
	tStat     = 34 // + stat
)

// Statistics (not inconsistencies).
const (
	sDirectories = iota
	sMultiLinked
	sFiles
	sStripes
	sUninitialized
	sSkipped
	sDirents
	sObjects
	sRebuilt
	sChanged // repairs an OST refused: the object changed since its check
	nStats
)

var statNames = []string{"directories", "multiple_linked_checked", "files", "stripes", "uninitialized_objects",
	"skipped", "dirents", "objects", "rebuild_scanned", "changed_before_repair"}

func (t *tally) add(o *tally) {
	for c := range t {
		for i := range t[c] {
			t[c][i] += o[c][i]
		}
	}
}

func (t *tally) sub(o *tally) {
	for c := range t {
		for i := range t[c] {
			t[c][i] -= o[c][i]
		}
	}
}

// run is one check, from start (or resume) to its end.
type run struct {
	c   *Checker
	env Env
	log *slog.Logger
	st  *pb.LfsckState // guarded by mu for readers; written by the run
	dry bool

	ctx    context.Context
	cancel context.CancelFunc
	halted atomic.Uint32
	done   chan struct{}
	resume bool

	lim limiter
	pac pacer
	rep *repairer
	lay *layoutChecker
	exp *expectations // the layout check's table and the OSTs' summaries (nil: off)

	// Phase 1 findings carried to phase 2.
	// direntsUnread: entries of a directory were passed over (saved with
	// the checkpoints as LfsckState.dirents_unread).
	direntsUnread atomic.Bool
	names         *nameMatch
	items         []*pb.LfsckTraceItem
	overflowed    map[fid.FID]overflowed // objects whose linkEA is marked overflowed (resolveNames)
	omu           sync.Mutex             // guards overlay against the OST result handlers
	overlay       map[fid.FID]uint64     // OI corrections (FID -> local)
	losers        map[uint64]bool        // objects that lost an OI conflict
	confirmed     fidBitmap              // FIDs whose OI entry the object scan confirmed
	refs          map[uint32]*bitmap     // OST objects of our sequence named by a layout
	refsIdx       []*bitmap              // the same, by OST index (refsOf)
	dups          map[stripe]bool        // OST objects named twice, no PFID known
	lost          map[lostSlot]stripe    // with -o: dangling slots left for after the orphan step (lost.go); under mu
	// dangling: the trace items of objects phase 2 found missing, to look
	// at again once the run's own creations are applied (settleDangling);
	// under mu.
	dangling map[fid.FID][]*pb.LfsckTraceItem
	claims   map[nameKey][]fid.FID // phase 2's claims, for settleDangling
	boundary map[uint32]uint64     // first unassigned object per OST (pool next)
	reported map[string]bool       // dry run: reports counted

	mu        sync.Mutex
	t1        tally // phase 1, live
	t2        tally // phase 2
	pos       atomic.Uint64
	phaseT0   time.Time
	runBase   [4][2]int64 // run time per component and phase before this resume
	lastCkpt  time.Time
	ckptCount [4]uint64     // checked per component at the last checkpoint (real-time speed)
	orphanPos atomic.Uint64 // phase 2: OST index << 48 | object id the orphan scan asks about (report)
	base      runFigures    // the figures it started from (Progress)
	failErr   error
	ost       uint64 // our object sequence on every OST
	checkBuf  []checkItem
	enc       objrec.Encoder // the layout scan's record digests
	ostMu     sync.Mutex
	ostMap    map[uint32]OST
	ostAt     time.Time
}

// overflowed is an object whose linkEA is marked overflowed: the bytes of
// names it has room for, and its local key.
type overflowed struct {
	room  int
	local uint64
}

func newRun(c *Checker, st *pb.LfsckState, resume bool) *run {
	r := &run{
		c: c, env: c.env, log: c.log, st: st, dry: st.Params.DryRun, resume: resume,
		done: make(chan struct{}), names: newNameMatch(), overlay: map[fid.FID]uint64{}, losers: map[uint64]bool{},
		confirmed: fidBitmap{}, refs: map[uint32]*bitmap{}, dups: map[stripe]bool{}, lost: map[lostSlot]stripe{}, boundary: map[uint32]uint64{},
		reported: map[string]bool{}, ost: fid.OSTSeq(c.env.Target.Identity().Index),
	}
	r.direntsUnread.Store(st.DirentsUnread)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.lim.set(st.Params.Speed)
	r.pac.init(c.env.Activity, c.env.Tuning.BusyDuty)
	r.rep = newRepairer(r)
	r.lay = newLayoutChecker(r, int(st.Params.Window))
	r.lay.scanPos = st.Position
	if r.on(Layout) && st.Phase <= 1 {
		r.exp = newExpectations(r)
	}
	for _, comp := range Components {
		cs := compState(st, comp)
		r.t1[comp][tChecked], r.t1[comp][tFailed] = cs.CheckedPhase1, cs.FailedPhase1
		r.t2[comp][tChecked], r.t2[comp][tFailed] = cs.CheckedPhase2, cs.FailedPhase2
		for i, n := range statNames {
			r.t1[comp][tStat+i] = cs.Stats[n]
		}
		if r.dry {
			for name, cnt := range cs.Counters {
				if k, ok := KindNumber(comp, name); ok && k < 16 {
					r.t1[comp][tFound+int(k)] = cnt.Inconsistent
					r.t1[comp][tRepaired+int(k)] = cnt.Repaired
				}
			}
		}
		r.runBase[comp] = [2]int64{cs.RunTimePhase1Ns, cs.RunTimePhase2Ns}
	}
	for _, comp := range Components {
		r.ckptCount[comp] = r.t1[comp][tChecked]
	}
	return r
}

func (r *run) on(comp uint32) bool { return r.st.Params.Types&(1<<comp) != 0 }

func (r *run) haltMode() uint32 { return r.halted.Load() }

// halt asks the run to stop; it cancels every call in flight.
func (r *run) halt(status uint32) {
	r.halted.CompareAndSwap(0, status)
	r.cancel()
}

func (r *run) stopping() bool { return r.halted.Load() != 0 || r.ctx.Err() != nil }

var errHalted = errors.New("checker stopped")

func (r *run) setSpeed(s uint64) {
	r.lim.set(s)
	r.mu.Lock()
	r.st.Params.Speed = s
	r.mu.Unlock()
}

// snapshotState copies the state for readers.
func (r *run) snapshotState() *pb.LfsckState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return proto.Clone(r.st).(*pb.LfsckState)
}

// lowerPriority moves the scanning goroutine to its own thread at nice
// level nice (0: none). A low priority
// looks like the way to leave clients the CPU, but the scan's thread is
// then preempted while it holds locks the clients' requests need (pebble's
// cache shards): measured, nice 19 cost clients more than nice 0 on a busy
// machine. The pacer (below) yields instead. The thread ends with the
// goroutine.
func lowerPriority(nice int) {
	if nice == 0 {
		return
	}
	runtime.LockOSThread()
	unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice)
}

func (r *run) main() {
	defer close(r.done)
	defer r.c.finish(r)
	defer r.cancel()
	defer func() {
		if p := recover(); p != nil {
			// A checker must never take its server down (Lustre's LBUGs on
			// garbage, §8.2): record the failure and stop.
			r.log.Error("checker panicked; stopping it", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r.setStatus(StFailed)
			r.failErr = fmt.Errorf("internal error: %v", p)
			r.checkpointQuiet(true)
		}
	}()
	lowerPriority(r.c.env.Tuning.Nice)
	r.mu.Lock()
	r.phaseT0 = time.Now()
	r.lastCkpt = r.phaseT0
	r.mu.Unlock()
	err := r.execute()
	r.end(err)
}

func (r *run) execute() error {
	if r.st.Phase <= 1 {
		r.mu.Lock()
		r.st.Phase = 1
		r.mu.Unlock()
		start := r.st.Position
		if r.exp != nil {
			// The OSTs summarise their objects while the MDT scans.
			r.exp.fetch()
			defer r.exp.stop()
		}
		if start > 0 {
			// Resuming: rebuild what phase 1 keeps in memory (name pairs,
			// layout references) from the part already checked.
			if err := r.scan(0, start, true); err != nil {
				return err
			}
		}
		if err := r.scan(start, 0, false); err != nil {
			return err
		}
		if r.on(Scrub) {
			if err := r.scanOI(); err != nil {
				return err
			}
		}
		if err := r.lay.drain(); err != nil {
			return err
		}
		if r.exp != nil {
			if err := r.exp.verify(); err != nil {
				return err
			}
			r.lay.thaw()
			r.exp.stop()
			r.exp = nil // the table's memory goes
		}
		if err := r.rep.flush(); err != nil {
			return err
		}
		if r.on(Layout) {
			if err := r.resolveDups(); err != nil {
				return err
			}
		}
		items, err := r.resolveNames()
		if err != nil {
			return err
		}
		if err := r.enterPhase2(items); err != nil {
			return err
		}
	} else if r.on(Layout) && r.st.Params.Orphan {
		// Resuming phase 2: the orphan scan needs the layout references.
		if err := r.scan(0, 0, true); err != nil {
			return err
		}
	}
	return r.phase2()
}

// enterPhase2 records the trace and moves every component to phase 2.
func (r *run) enterPhase2(items []*pb.LfsckTraceItem) error {
	if err := fault.Hit("lfsck.phase2.enter"); err != nil {
		return err
	}
	if !r.dry {
		if err := r.writeTrace(items); err != nil {
			return err
		}
		if err := r.saveLost(); err != nil {
			return err
		}
	} else {
		r.items = items
	}
	r.mu.Lock()
	now := time.Now()
	for _, comp := range Components {
		if r.on(comp) {
			cs := compState(r.st, comp)
			cs.Status = StPhase2
			r.runBase[comp][0] += now.Sub(r.phaseT0).Nanoseconds()
		}
	}
	r.st.Phase = 2
	r.st.Phase2Position = nil
	r.st.Phase2Step = 0
	r.phaseT0 = now
	r.mu.Unlock()
	return r.checkpoint()
}

func (r *run) setStatus(s uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, comp := range Components {
		if r.on(comp) {
			compState(r.st, comp).Status = s
		}
	}
}

// end records how the run ended.
func (r *run) end(err error) {
	mode := r.halted.Load()
	switch {
	case mode == haltAbandon:
		return
	case mode != 0 && (err == nil || errors.Is(err, errHalted) || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled):
		// A stop cancels the run's context: a proposal or RPC in flight
		// then ends with gRPC's Canceled, which is the stop, not a failure.
		r.setStatus(mode)
		r.checkpointQuiet(true)
		r.log.Info("checker stopped", "status", StatusName(mode), "position", r.st.Position)
		return
	case err != nil:
		r.failErr = err
		r.log.Error("checker failed", "err", err)
		r.setStatus(StFailed)
		r.checkpointQuiet(true)
		return
	}
	r.mu.Lock()
	now := time.Now()
	for _, comp := range Components {
		if !r.on(comp) {
			continue
		}
		cs := compState(r.st, comp)
		cs.Status = StCompleted
		if comp == Layout && len(r.st.IncompleteOsts) > 0 {
			cs.Status = StPartial
			cs.Flags |= FlIncomplete
		}
		cs.SuccessCount++
		cs.LastCompletedNs = now.UnixNano()
		cs.Flags |= FlScannedOnce
		cs.Flags &^= FlAuto
		r.runBase[comp][1] += now.Sub(r.phaseT0).Nanoseconds()
	}
	r.st.Phase = 0
	r.phaseT0 = now
	r.mu.Unlock()
	if err := r.checkpointFinal(); err != nil {
		r.log.Error("record the checker's completion", "err", err)
	}
	r.log.Info("checker completed", "types", typeList(r.st.Params.Types), "dry_run", r.dry)
}

// checkpointFinal records a completed run: its state, and drops the trace
// (and the restore marker once the OI is rebuilt).
func (r *run) checkpointFinal() error {
	r.fillState()
	if r.dry {
		return nil
	}
	op := &pb.LfsckStateOp{Set: []*pb.LfsckKV{{Key: mdt.KeyLfsckState, Value: mustMarshal(r.snapshotState())}}}
	for _, comp := range Components {
		if r.on(comp) {
			op.DeletePrefix = append(op.DeletePrefix, mdt.LfsckTracePrefix(comp))
		}
	}
	if r.on(Scrub) {
		op.Set = append(op.Set, &pb.LfsckKV{Key: mdt.KeyRestored})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return r.c.proposeState(ctx, op)
}

// checkpointQuiet checkpoints at a stop or failure; it works with the
// run's context already cancelled.
func (r *run) checkpointQuiet(final bool) {
	r.lay.abort()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if !r.dry {
		r.rep.flushCtx(ctx)
	}
	r.fillState()
	if r.dry {
		return
	}
	if err := r.c.proposeState(ctx, &pb.LfsckStateOp{Set: []*pb.LfsckKV{{Key: mdt.KeyLfsckState, Value: mustMarshal(r.snapshotState())}}}); err != nil {
		r.log.Warn("checkpoint at stop failed; the run resumes from the previous one", "err", err)
	}
}

// maybeCheckpoint checkpoints when the interval has passed.
func (r *run) maybeCheckpoint() error {
	iv := time.Duration(r.st.Params.CheckpointIntervalMs) * time.Millisecond
	if iv <= 0 {
		iv = defaultCheckpoint
	}
	if time.Since(r.lastCkpt) < iv {
		return nil
	}
	return r.checkpoint()
}

// checkpoint saves the earliest unfinished position and the figures of
// everything before it: queued repairs are applied first, and work still
// in flight to the OSTs is held back (checkpoints cover producer and
// consumer, lesson §9.3).
func (r *run) checkpoint() error {
	if err := r.rep.flush(); err != nil {
		return err
	}
	r.fillState()
	if err := fault.Hit("lfsck.checkpoint"); err != nil {
		return err
	}
	if r.dry {
		return nil
	}
	ctx, cancel := context.WithTimeout(r.ctx, 30*time.Second)
	defer cancel()
	if err := r.c.proposeState(ctx, &pb.LfsckStateOp{Set: []*pb.LfsckKV{{Key: mdt.KeyLfsckState, Value: mustMarshal(r.snapshotState())}}}); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return fault.Hit("lfsck.checkpoint.after")
}

// fillState copies the checkpointable figures into the state.
func (r *run) fillState() {
	var t1 tally
	var pos uint64
	if r.st.Phase == 1 {
		pos, t1 = r.lay.checkpointFigures()
	} else {
		r.mu.Lock()
		t1 = r.t1
		r.mu.Unlock()
		pos = r.st.Position
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if r.st.Phase == 1 {
		r.st.Position = pos
	}
	r.st.DirentsUnread = r.st.DirentsUnread || r.direntsUnread.Load()
	for _, comp := range Components {
		if !r.on(comp) {
			continue
		}
		cs := compState(r.st, comp)
		cs.CheckedPhase1, cs.FailedPhase1 = t1[comp][tChecked], t1[comp][tFailed]
		cs.CheckedPhase2, cs.FailedPhase2 = r.t2[comp][tChecked], r.t2[comp][tFailed]
		r.ckptCount[comp] = cs.CheckedPhase1 + cs.CheckedPhase2
		if cs.Stats == nil {
			cs.Stats = map[string]uint64{}
		}
		for i, n := range statNames {
			if v := t1[comp][tStat+i] + r.t2[comp][tStat+i]; v != 0 {
				cs.Stats[n] = v
			}
		}
		if r.dry {
			cs.Counters = map[string]*pb.LfsckCount{}
			for k, name := range KindNames[comp] {
				f := t1[comp][tFound+int(k)] + r.t2[comp][tFound+int(k)]
				if f != 0 {
					cs.Counters[name] = &pb.LfsckCount{Inconsistent: f}
				}
			}
		}
		cs.LastCheckpointNs = now.UnixNano()
		cs.LastCheckpointPosition = r.st.Position
		ph := 0
		if r.st.Phase == 2 {
			ph = 1
		}
		run := r.runBase[comp]
		if r.st.Phase != 0 {
			run[ph] += now.Sub(r.phaseT0).Nanoseconds()
		}
		cs.RunTimePhase1Ns, cs.RunTimePhase2Ns = run[0], run[1]
	}
	r.lastCkpt = now
}

// failed counts a failure; with -e failout it ends the run.
func (r *run) failed(comp uint32, phase int, err error) error {
	r.mu.Lock()
	if phase == 1 {
		r.t1[comp][tFailed]++
	} else {
		r.t2[comp][tFailed]++
	}
	r.mu.Unlock()
	return r.noteFailure(comp, "checker: item failed", err)
}

// repairFailed notes a repair of comp that apply refused (the store
// counted it).
func (r *run) repairFailed(comp uint32, err error) error {
	return r.noteFailure(comp, "checker: repair refused", fmt.Errorf("a repair was refused: %w", err))
}

// noteFailure records a failure of comp beyond its count: the first
// failure's position, the log, and -e failout's end of the run.
func (r *run) noteFailure(comp uint32, msg string, err error) error {
	r.mu.Lock()
	cs := compState(r.st, comp)
	if cs.FirstFailurePosition == 0 {
		cs.FirstFailurePosition = r.pos.Load() + 1
	}
	r.mu.Unlock()
	r.log.Warn(msg, "component", ComponentNames[comp], "err", err)
	if r.st.Params.Failout {
		return fmt.Errorf("%s failed (-e failout): %w", ComponentNames[comp], err)
	}
	return nil
}

// found notes that an inconsistency was found (for the flags and the first
// inconsistent position).
func (r *run) found(comp uint32) {
	r.mu.Lock()
	cs := compState(r.st, comp)
	cs.Flags |= FlInconsistent
	if cs.FirstInconsistentPosition == 0 {
		cs.FirstInconsistentPosition = r.pos.Load() + 1
	}
	r.mu.Unlock()
}

// limiter paces the scan to a number of objects per second; the rate can
// change at any time.
type limiter struct {
	mu    sync.Mutex
	rate  uint64
	start time.Time
	n     uint64
}

func (l *limiter) set(rate uint64) {
	l.mu.Lock()
	l.rate, l.start, l.n = rate, time.Now(), 0
	l.mu.Unlock()
}

// wait accounts for n objects and sleeps as long as the scan is ahead of
// the limit.
func (l *limiter) wait(ctx context.Context, n uint64) error {
	l.mu.Lock()
	if l.rate == 0 {
		l.mu.Unlock()
		return nil
	}
	l.n += n
	due := l.start.Add(time.Duration(float64(l.n) / float64(l.rate) * float64(time.Second)))
	l.mu.Unlock()
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errHalted
	case <-t.C:
		return nil
	}
}

func (l *limiter) get() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// pacer makes the scan yield to clients: while the MDT applies foreground
// operations (its log index advances by more than the checker's own
// commands), the scan works in slices of 2 ms and sleeps between them so
// that it uses at most `duty` of a core (default 10%,
// NACRE_LFSCK_BUSY_DUTY, 1 = never yield). Without clients it runs at full
// speed; a speed limit applies on top.
type pacer struct {
	activity  func() uint64
	own       atomic.Uint64 // log entries the checker proposed itself
	duty      float64
	lastCheck time.Time
	lastAct   uint64
	busy      bool
	sliceT0   time.Time
	yielded   atomic.Int64 // ns slept for clients (reports)
}

const (
	paceSample = 100 * time.Millisecond
	paceSlice  = 2 * time.Millisecond
	busyOps    = 10 // foreground entries per sample that mean "clients are active"
)

func (p *pacer) init(activity func() uint64, duty float64) {
	p.activity = activity
	p.duty = 0.05
	if duty > 0 && duty <= 1 {
		p.duty = duty
	}
}

// pace is called by the scan every few objects.
func (p *pacer) pace(ctx context.Context) error {
	if p.activity == nil || p.duty >= 1 {
		return nil
	}
	now := time.Now()
	if now.Sub(p.lastCheck) >= paceSample {
		a := p.activity() - p.own.Load()
		p.busy = !p.lastCheck.IsZero() && a-p.lastAct > busyOps
		p.lastAct, p.lastCheck = a, now
		if !p.busy {
			p.sliceT0 = now
		}
	}
	if !p.busy {
		return nil
	}
	if p.sliceT0.IsZero() {
		p.sliceT0 = now
	}
	if now.Sub(p.sliceT0) < paceSlice {
		return nil
	}
	d := time.Duration(float64(paceSlice) * (1 - p.duty) / p.duty)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errHalted
	case <-t.C:
	}
	p.yielded.Add(int64(d))
	p.sliceT0 = time.Now()
	return nil
}
