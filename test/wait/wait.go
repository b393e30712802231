// Package wait is how Nacre's tests wait for something to become true: a
// condition polled with a bound, never a sleep that hopes it is long
// enough. Polls start a millisecond apart and back off to a fifth of a
// second, so a cheap condition is seen at once and an expensive one (a
// command run, a scrape) is not run in a tight loop. Inside a
// testing/synctest bubble the polls advance the bubble's fake clock.
// Only tests import it.
package wait

import (
	"testing"
	"time"
)

// maxPause is the longest pause between two polls.
const maxPause = 200 * time.Millisecond

// Poll calls cond until it returns true or timeout has passed, and says
// whether it held. For test-support code that reports a failure itself.
func Poll(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for pause := time.Millisecond; ; pause = min(2*pause, maxPause) {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(min(pause, time.Until(deadline)+time.Millisecond))
	}
}

// For polls cond until it returns true; if it does not within timeout,
// it fails t, naming what was awaited. Call it from the test's goroutine.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(timeout, cond) {
		t.Fatalf("after %v: still waiting for %s", timeout, what)
	}
}

// NoErr polls check until it returns nil; if it does not within timeout,
// it fails t, naming what was awaited and check's last error. Call it
// from the test's goroutine.
func NoErr(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	var err error
	if !Poll(timeout, func() bool { err = check(); return err == nil }) {
		t.Fatalf("after %v: still waiting for %s: %v", timeout, what, err)
	}
}
