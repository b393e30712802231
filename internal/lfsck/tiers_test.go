package lfsck

import (
	"bytes"
	"context"
	pb "nacre/api/nacrepb"
	"nacre/internal/mdt"
	"slices"
	"testing"
	"time"
)

// Tests that arm no fault point (fault.Arm), and read no fault point's
// hits, call t.Parallel: they run together once the tests that arm one,
// each alone, have run. Fault points are the process's, so a run in a
// parallel test would hit a point another test armed. Tests whose figures
// are rates over real time (TestSpeedLimitHoldsAndChangesWhileRunning,
// TestLiveReportPerComponent) run alone too.

// sized is n, or n/div under -short (the fast tier), for the tests whose
// population's size is not what they assert.
func sized(n, div int) int {
	if testing.Short() {
		return max(1, n/div)
	}
	return n
}

// agedBulk is the number of bulk files agedDamaged makes: every test
// that compares runs over aged trees uses the same size.
func agedBulk() int { return sized(600, 4) }

// waitFor polls cond until it holds; the test fails with what if it
// does not within timeout.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
	}
}

// held is a gate (harness.gate) that holds the calls it matches until
// their caller gives up, as a hung OST does (a gRPC call ends with its
// context), and says when it holds the first one.
type held struct {
	match   func(call string, ost uint32) bool
	entered chan struct{}
}

func newHeld(match func(call string, ost uint32) bool) *held {
	return &held{match: match, entered: make(chan struct{}, 1)}
}

func (g *held) gate(ctx context.Context, call string, ost uint32) error {
	if !g.match(call, ost) {
		return nil
	}
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	return ctx.Err()
}

// wait waits until a call is held.
func (g *held) wait(t testing.TB, what string) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(30 * time.Second):
		t.Fatalf("no call held: %s", what)
	}
}

// writesTrace says whether cmd records namespace trace items: the run
// enters phase 2.
func writesTrace(cmd *pb.Command) bool {
	op, ok := cmd.Op.(*pb.Command_LfsckState)
	if !ok {
		return false
	}
	for _, kv := range op.LfsckState.Set {
		if bytes.HasPrefix(kv.Key, mdt.LfsckTracePrefix(Namespace)) {
			return true
		}
	}
	return false
}

// adopts says whether cmd applies an adoption of orphan OST objects.
func adopts(cmd *pb.Command) bool {
	op, ok := cmd.Op.(*pb.Command_LfsckRepair)
	if !ok {
		return false
	}
	for _, rep := range op.LfsckRepair.Repairs {
		if rep.Component == Layout && slices.Contains(rep.Kinds, KLyOrphan) && len(rep.Muts) > 0 {
			return true
		}
	}
	return false
}

// bareLayout is a layout component in phase 1 (summaries on) with no MDT
// and no OST behind it: the scan's work per stripe, without the scan.
func bareLayout(seq uint64) *layoutCheck {
	r := &run{seq: seq, st: &pb.LfsckState{Phase: 1, Params: &pb.LfsckParams{Types: 1 << Layout}}}
	r.scrub = newOIScrub(r)
	r.layout = newLayoutCheck(r)
	return r.layout
}
