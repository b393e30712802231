package lfsck

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// The speed limit holds the scan to its rate (objects accounted in steps
// of 64, as the scan does) from the moment it is set, follows a new rate
// at once, and costs nothing without one.
func TestLimiterKeepsToTheRateAndFollowsANewOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		var l limiter
		objects := func(n int) time.Duration {
			t0 := time.Now()
			for i := 0; i < n/64; i++ {
				if err := l.wait(ctx, 64); err != nil {
					t.Fatal(err)
				}
			}
			return time.Since(t0)
		}
		if d := objects(6400); d != 0 {
			t.Fatalf("no limit: 6400 objects took %v", d)
		}
		l.set(1000)
		if d := objects(1280); d != 1280*time.Millisecond {
			t.Fatalf("at 1000 objects/s, 1280 objects took %v", d)
		}
		l.set(4000)
		if d := objects(2560); d != 640*time.Millisecond {
			t.Fatalf("at 4000 objects/s, 2560 objects took %v", d)
		}
		if l.get() != 4000 {
			t.Fatalf("rate %d, want 4000", l.get())
		}
	})
}

// A stop ends a wait for the limit at once.
func TestLimiterWaitEndsWithTheRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l limiter
		l.set(1)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(10*time.Millisecond, cancel)
		t0 := time.Now()
		if err := l.wait(ctx, 1000); !errors.Is(err, errHalted) {
			t.Fatalf("wait after a stop: %v, want errHalted", err)
		}
		if d := time.Since(t0); d != 10*time.Millisecond {
			t.Fatalf("the stopped wait returned after %v, want 10ms", d)
		}
	})
}

// scanFor runs a scan's loop for d of work (steps of 100 µs), pacing
// after each step, and returns the time the pacer slept.
func scanFor(t *testing.T, p *pacer, d time.Duration) time.Duration {
	t.Helper()
	slept := p.yielded.Load()
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(100 * time.Microsecond) // work
		if err := p.pace(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	return time.Duration(p.yielded.Load() - slept)
}

// While clients are active (the MDT's log advances by more than the
// checker's own commands), the scan takes its duty share of the time and
// sleeps the rest; without them, or with only the checker's own commands,
// it never sleeps; a duty of 1 never yields.
func TestPacerYieldsWhileClientsAreBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var applied, own atomic.Uint64
		busy := atomic.Bool{}
		stopClients := make(chan struct{})
		go func() { // clients: 50 operations every 100 ms while busy
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stopClients:
					return
				case <-tick.C:
					if busy.Load() {
						applied.Add(5)
					}
				}
			}
		}()
		defer close(stopClients)
		var p pacer
		p.init(applied.Load, 0.1)
		if slept := scanFor(t, &p, time.Second); slept != 0 {
			t.Fatalf("idle MDT: the scan slept %v", slept)
		}
		busy.Store(true)
		t0 := time.Now()
		slept := scanFor(t, &p, 2*time.Second)
		total := time.Since(t0)
		// The first sample (100 ms) sees the clients; from there the scan
		// works 2 ms and sleeps 18 ms.
		if share := float64(slept) / float64(total-paceSample); share < 0.85 || share > 0.95 {
			t.Fatalf("busy MDT at duty 0.1: the scan slept %v of %v (%.2f), want about 0.9", slept, total, share)
		}
		busy.Store(false)
		scanFor(t, &p, 200*time.Millisecond) // the next samples see the clients gone
		if slept := scanFor(t, &p, time.Second); slept != 0 {
			t.Fatalf("clients gone: the scan slept %v", slept)
		}

		// The checker's own commands are not clients.
		var q pacer
		q.init(func() uint64 { return own.Load() }, 0.1)
		go func() {
			for range 100 {
				time.Sleep(10 * time.Millisecond)
				own.Add(5)
				q.own.Add(5)
			}
		}()
		if slept := scanFor(t, &q, time.Second); slept != 0 {
			t.Fatalf("only the checker's own commands: the scan slept %v", slept)
		}

		var never pacer
		never.init(applied.Load, 1)
		busy.Store(true)
		if slept := scanFor(t, &never, time.Second); slept != 0 {
			t.Fatalf("duty 1: the scan slept %v", slept)
		}
	})
}
