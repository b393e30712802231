package wait

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

func TestPollSeesAConditionSoonAfterItBecomesTrue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if !Poll(time.Second, func() bool { return time.Since(start) >= 300*time.Millisecond }) {
			t.Fatal("Poll gave up on a condition true after 300 ms of its 1 s")
		}
		if d := time.Since(start); d > 300*time.Millisecond+maxPause {
			t.Fatalf("Poll saw the condition %v after it held", d-300*time.Millisecond)
		}
	})
}

func TestPollGivesUpAtItsDeadlineHavingLookedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var calls int
		var last time.Duration
		if Poll(time.Second, func() bool { calls++; last = time.Since(start); return false }) {
			t.Fatal("Poll said a condition that never held held")
		}
		if d := time.Since(start); d < time.Second || d > time.Second+maxPause {
			t.Fatalf("Poll gave up after %v, want 1 s", d)
		}
		if last < time.Second || calls < 10 {
			t.Fatalf("%d polls, the last %v after the start; want many, the last at the deadline", calls, last)
		}
	})
}

// fatalTB records the failure of a helper instead of ending the test.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper()                        {}
func (f *fatalTB) Fatalf(format string, a ...any) { f.msg = fmt.Sprintf(format, a...) }

func TestNoErrNamesWhatItAwaitedAndTheLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fatalTB{TB: t}
		n := 0
		NoErr(f, time.Second, "the OST to come back", func() error { n++; return fmt.Errorf("attempt %d: %w", n, errors.ErrUnsupported) })
		if !strings.Contains(f.msg, "the OST to come back") || !strings.Contains(f.msg, fmt.Sprintf("attempt %d:", n)) {
			t.Fatalf("failure %q does not name what was awaited and the last error (attempt %d)", f.msg, n)
		}
		f.msg = ""
		For(f, time.Second, "x", func() bool { return true })
		if f.msg != "" {
			t.Fatalf("For failed on a condition that held: %q", f.msg)
		}
	})
}
