package lfsck

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/mdt"
)

// haltAbandon: stop without recording anything (leadership lost).
const haltAbandon = 100

// run is one check, from start (or resume) to its end: the driver of its
// components (component.go).
type run struct {
	c   *Checker
	env Env
	log *slog.Logger
	dry bool

	ctx    context.Context
	cancel context.CancelFunc
	halted atomic.Uint32
	done   chan struct{}

	mu    sync.Mutex     // guards st and times
	st    *pb.LfsckState // the state checkpoints record; written by the run
	times runTimes

	led  ledger     // the scan's position and the figures
	lim  limiter    // the speed limit (-s)
	pac  pacer      // yielding to clients
	rep  *repairer  // the repairs found, on their way to the MDT's log
	base runFigures // the figures it started from (Progress)
	seq  uint64     // our object sequence on every OST
	osts ostConns

	scrub  *oiScrub
	ns     *nsCheck
	layout *layoutCheck
	comps  []component // the components that are on, in order
}

// runTimes are a run's times, under run.mu.
type runTimes struct {
	phaseT0   time.Time   // the current phase's start in this process
	base      [4][2]int64 // run time per component and phase before this resume
	lastCkpt  time.Time
	ckptCount [4]uint64 // checked per component at the last checkpoint (real-time speed)
}

func newRun(c *Checker, st *pb.LfsckState) *run {
	r := &run{c: c, env: c.env, log: c.log, st: st, dry: st.Params.DryRun, done: make(chan struct{}),
		seq: fid.OSTSeq(c.env.Target.Identity().Index)}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.lim.set(st.Params.Speed)
	r.pac.init(c.env.Activity, c.env.Tuning.BusyDuty)
	r.rep = newRepairer(r)
	r.scrub, r.ns, r.layout = newOIScrub(r), newNsCheck(r), newLayoutCheck(r)
	for _, comp := range []component{r.scrub, r.ns, r.layout} {
		if r.on(comp.id()) {
			r.comps = append(r.comps, comp)
		}
	}
	r.led.scanPos = st.Position
	for _, comp := range Components {
		cs := compState(st, comp)
		r.led.t1[comp][tChecked], r.led.t1[comp][tFailed] = cs.CheckedPhase1, cs.FailedPhase1
		r.led.t2[comp][tChecked], r.led.t2[comp][tFailed] = cs.CheckedPhase2, cs.FailedPhase2
		for i, n := range statNames {
			r.led.t1[comp][tStat+i] = cs.Stats[n]
		}
		if r.dry {
			for name, cnt := range cs.Counters {
				if k, ok := KindNumber(comp, name); ok && k < 16 {
					r.led.t1[comp][tFound+int(k)] = cnt.Inconsistent
					r.led.t1[comp][tRepaired+int(k)] = cnt.Repaired
				}
			}
		}
		r.times.base[comp] = [2]int64{cs.RunTimePhase1Ns, cs.RunTimePhase2Ns}
		r.times.ckptCount[comp] = r.led.t1[comp][tChecked]
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

func (r *run) setWindow(w int) {
	r.mu.Lock()
	r.st.Params.Window = uint32(w)
	r.mu.Unlock()
	r.layout.q.setWindow(w)
}

// snapshotState copies the state for readers.
func (r *run) snapshotState() *pb.LfsckState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return proto.Clone(r.st).(*pb.LfsckState)
}

func (r *run) main() {
	defer close(r.done)
	defer r.c.finish(r)
	defer r.quit()
	defer r.cancel()
	defer func() {
		if p := recover(); p != nil {
			// A checker must never take its server down (Lustre's LBUGs on
			// garbage, §8.2): record the failure and stop.
			r.log.Error("checker panicked; stopping it", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			r.setStatus(StFailed)
			r.checkpointQuiet()
		}
	}()
	lowerPriority(r.c.env.Tuning.Nice)
	r.mu.Lock()
	r.times.phaseT0 = time.Now()
	r.times.lastCkpt = r.times.phaseT0
	r.mu.Unlock()
	err := r.execute()
	r.end(err)
}

// quit waits for the work the components run beside the driver (its
// context cancelled, work in flight ends unfinished).
func (r *run) quit() {
	for _, c := range r.comps {
		c.quit()
	}
}

func (r *run) execute() error {
	if r.st.Phase <= 1 {
		if err := r.phase1(); err != nil {
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

func (r *run) phase1() error {
	r.mu.Lock()
	r.st.Phase = 1
	r.mu.Unlock()
	start := r.st.Position
	for _, c := range r.comps {
		c.prep()
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
	for _, c := range r.comps {
		if err := c.endScan(); err != nil {
			return err
		}
	}
	if err := r.rep.flush(); err != nil {
		return err
	}
	for _, c := range r.comps {
		if err := c.post(); err != nil {
			return err
		}
	}
	return r.enterPhase2()
}

// enterPhase2 records what phase 2 needs and moves every component to
// phase 2.
func (r *run) enterPhase2() error {
	if err := fault.Hit("lfsck.phase2.enter"); err != nil {
		return err
	}
	for _, c := range r.comps {
		if err := c.enterPhase2(); err != nil {
			return err
		}
	}
	r.mu.Lock()
	now := time.Now()
	for _, comp := range Components {
		if r.on(comp) {
			cs := compState(r.st, comp)
			cs.Status = StPhase2
			r.times.base[comp][0] += now.Sub(r.times.phaseT0).Nanoseconds()
		}
	}
	r.st.Phase = 2
	r.st.Phase2Position = nil
	r.st.Phase2Step = 0
	r.times.phaseT0 = now
	r.mu.Unlock()
	return r.checkpoint()
}

func (r *run) phase2() error {
	for _, c := range r.comps {
		if err := c.phase2(); err != nil {
			return err
		}
	}
	if err := r.rep.flush(); err != nil {
		return err
	}
	for _, c := range r.comps {
		if err := c.settle(); err != nil {
			return err
		}
	}
	return nil
}

// setPhase2 records where phase 2 is: the step (0: the namespace's trace,
// 1: the layout's orphan scan) and the position within it.
func (r *run) setPhase2(step uint32, pos []byte) {
	r.mu.Lock()
	r.st.Phase2Step, r.st.Phase2Position = step, pos
	r.mu.Unlock()
}

// phase2At is where phase 2 is (setPhase2).
func (r *run) phase2At() (uint32, []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st.Phase2Step, r.st.Phase2Position
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
	case mode != 0 && (err == nil || errors.Is(err, errHalted) || errors.Is(err, context.Canceled) || errno.CodeOf(err) == errno.Canceled):
		// A stop cancels the run's context: a proposal or RPC in flight
		// then ends Canceled (errno.Canceled), which is the stop, not a
		// failure.
		r.setStatus(mode)
		r.checkpointQuiet()
		r.log.Info("checker stopped", "status", StatusName(mode), "position", r.st.Position)
		return
	case err != nil:
		r.log.Error("checker failed", "err", err)
		r.setStatus(StFailed)
		r.checkpointQuiet()
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
		r.times.base[comp][1] += now.Sub(r.times.phaseT0).Nanoseconds()
	}
	r.st.Phase = 0
	r.times.phaseT0 = now
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

// checkpointQuiet checkpoints at a stop or failure: the work in flight
// ends unfinished (the checkpoint stays before it), and the checkpoint
// works with the run's context cancelled.
func (r *run) checkpointQuiet() {
	r.cancel()
	r.quit()
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
	r.mu.Lock()
	last := r.times.lastCkpt
	r.mu.Unlock()
	if time.Since(last) < iv {
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
	t1, t2 := r.led.figures()
	pos := r.st.Position
	if r.st.Phase == 1 {
		pos, t1 = r.led.checkpoint()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	r.st.Position = pos
	for _, c := range r.comps {
		c.checkpoint(r.st)
	}
	for _, comp := range Components {
		if !r.on(comp) {
			continue
		}
		cs := compState(r.st, comp)
		cs.CheckedPhase1, cs.FailedPhase1 = t1[comp][tChecked], t1[comp][tFailed]
		cs.CheckedPhase2, cs.FailedPhase2 = t2[comp][tChecked], t2[comp][tFailed]
		r.times.ckptCount[comp] = cs.CheckedPhase1 + cs.CheckedPhase2
		if cs.Stats == nil {
			cs.Stats = map[string]uint64{}
		}
		for i, n := range statNames {
			if v := t1[comp][tStat+i] + t2[comp][tStat+i]; v != 0 {
				cs.Stats[n] = v
			}
		}
		if r.dry {
			cs.Counters = map[string]*pb.LfsckCount{}
			for k, name := range KindNames[comp] {
				f := t1[comp][tFound+int(k)] + t2[comp][tFound+int(k)]
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
		run := r.times.base[comp]
		if r.st.Phase != 0 {
			run[ph] += now.Sub(r.times.phaseT0).Nanoseconds()
		}
		cs.RunTimePhase1Ns, cs.RunTimePhase2Ns = run[0], run[1]
	}
	r.times.lastCkpt = now
}

// failed counts a failure of comp in phase (1 or 2); with -e failout it
// ends the run.
func (r *run) failed(comp uint32, phase int, err error) error {
	r.led.fail(phase, comp)
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
		cs.FirstFailurePosition = r.led.at.Load() + 1
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
		cs.FirstInconsistentPosition = r.led.at.Load() + 1
	}
	r.mu.Unlock()
}

// report counts an inconsistency that is not repaired, once per run and
// key, if key still holds v (the value it was found in).
func (r *run) report(comp, kind uint32, key, v []byte) {
	r.found(comp)
	rk := append([]byte{byte(kind)}, key...)
	rep := &pb.LfsckRepair{Component: comp, Kinds: []uint32{kind}, ReportKey: rk}
	if v != nil {
		rep.Conds = []*pb.LfsckCond{condVal(key, v)}
	}
	r.rep.add(comp, nil, rep)
}

// countFound counts a finding of a dry run, for the work of file e in
// phase 1 (nil: the object being scanned).
func (r *run) countFound(e *entry, comp, kind uint32) {
	if r.st.Phase == 2 {
		r.led.add2(comp, tFound+int(kind), 1)
		return
	}
	r.led.addTo(e, comp, tFound+int(kind), 1)
}
