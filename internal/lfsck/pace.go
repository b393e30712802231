package lfsck

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// How a run shares the machine: a speed limit (-s), yielding to clients
// while they are active, and the scanning thread's priority.

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
	if d := time.Until(due); d > 0 {
		return sleep(ctx, d)
	}
	return nil
}

func (l *limiter) get() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// pacer makes the scan yield to clients: while the MDT applies foreground
// operations (its log index advances by more than the checker's own
// commands), the scan works in slices of 2 ms and sleeps between them so
// that it uses at most `duty` of a core (Tuning.BusyDuty: default 5%, 1 =
// never yield). Without clients it runs at full speed; a speed limit
// applies on top.
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
	if err := sleep(ctx, d); err != nil {
		return err
	}
	p.yielded.Add(int64(d))
	p.sliceT0 = time.Now()
	return nil
}

// sleep waits for d, or until ctx is done (errHalted: the run stops).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return errHalted
	case <-t.C:
		return nil
	}
}

// lowerPriority moves the scanning goroutine to its own thread at nice
// level nice (0: none). A low priority looks like the way to leave
// clients the CPU, but the scan's thread is then preempted while it holds
// locks the clients' requests need (pebble's cache shards): measured,
// nice 19 cost clients more than nice 0 on a busy machine. The pacer
// yields instead. The thread ends with the goroutine.
func lowerPriority(nice int) {
	if nice == 0 {
		return
	}
	runtime.LockOSThread()
	unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice)
}
