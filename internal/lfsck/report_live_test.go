package lfsck

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
)

// TestLiveReportPerComponent: while a run goes on, each component shows
// its own real-time speed (the namespace check counts entries as well as
// objects, so it is faster than the scrub over the same objects; both
// used to show their sum), and -A is recorded as the all_targets param.
func TestLiveReportPerComponent(t *testing.T) {
	h := newHarnessPool(t, 1, 4096)
	populate(h, 1, 3000, 1)
	c := New(h.env())
	req := fullReq(2000)
	req.Types = []string{"scrub", "namespace"}
	req.AllTargets = true
	if _, err := c.Start(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	seen := false
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline) && !seen; time.Sleep(20 * time.Millisecond) {
		rep := c.Report()
		sc, ns := rep.Components["scrub"], rep.Components["namespace"]
		if !slices.Contains(ns.Param, "all_targets") {
			t.Fatalf("params %v: all_targets missing after a start with -A", ns.Param)
		}
		if sc.RealTimeSpeed > 0 && ns.RealTimeSpeed > 0 {
			if ns.RealTimeSpeed <= sc.RealTimeSpeed {
				t.Fatalf("namespace at %.0f/s, scrub at %.0f/s: want each its own figure (namespace counts entries too)", ns.RealTimeSpeed, sc.RealTimeSpeed)
			}
			seen = true
		}
	}
	if !seen {
		t.Fatal("no report showed both components' real-time speeds")
	}
}

// TestPhase2ReportsTheOrphanScanPosition: in phase 2 the current position
// names the OST and object the orphan scan has reached.
func TestPhase2ReportsTheOrphanScanPosition(t *testing.T) {
	h := newHarnessPool(t, 2, 4096)
	populate(h, 1, 200, 2)
	listing := newHeld(func(call string, _ uint32) bool { return call == "orphans" })
	h.gate = listing.gate
	c := New(h.env())
	if _, err := c.Start(context.Background(), &pb.LfsckStartRequest{Types: []string{"layout"}, Orphan: true, Reset_: true}); err != nil {
		t.Fatal(err)
	}
	defer c.Stop(context.Background())
	listing.wait(t, "the orphan scan never listed an OST's objects")
	if pos := c.Report().Components["layout"].CurrentPosition; !strings.HasPrefix(pos, "phase 2: orphan OST objects, OST0000 object ") {
		t.Fatalf("while the orphan scan lists OST0000's objects, the position is %q", pos)
	}
}

// TestOrphanScanResumesAtItsCheckpoint: a run stopped while the orphan
// scan is at OST0001 resumes there; OST0000, listed and adopted before
// the stop, is not listed again (it was, before phase 2 kept a position).
func TestOrphanScanResumesAtItsCheckpoint(t *testing.T) {
	h := newHarnessPool(t, 2, 4096)
	populate(h, 1, 100, 2)
	var listings atomic.Int64
	var hold atomic.Bool
	hold.Store(true)
	ost1 := newHeld(func(call string, ost uint32) bool { return call == "orphans" && ost == 1 && hold.Load() })
	h.gate = func(ctx context.Context, call string, ost uint32) error {
		if call == "orphans" {
			listings.Add(1)
		}
		return ost1.gate(ctx, call, ost)
	}
	c := New(h.env())
	ctx := context.Background()
	req := &pb.LfsckStartRequest{Types: []string{"layout"}, Orphan: true, Reset_: true, CheckpointIntervalMs: 1}
	if _, err := c.Start(ctx, req); err != nil {
		t.Fatal(err)
	}
	ost1.wait(t, "the orphan scan never reached OST0001")
	if pos := c.Report().Components["layout"].CurrentPosition; !strings.Contains(pos, "OST0001") {
		t.Fatalf("while the orphan scan lists OST0001's objects, the position is %q", pos)
	}
	if _, err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	hold.Store(false)
	before := listings.Load()
	msg, err := c.Start(ctx, &pb.LfsckStartRequest{Types: []string{"layout"}, Orphan: true})
	if err != nil || !strings.Contains(msg, "resumed") {
		t.Fatalf("start after stop: %q %v", msg, err)
	}
	if err := c.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if rep := c.Report(); rep.Components["layout"].Status != "completed" {
		t.Fatalf("resumed run: %s", describe(rep))
	}
	// OST0001's range is listed again (the listing the stop interrupted);
	// OST0000's must not be.
	if n := listings.Load() - before; n > 1 {
		t.Fatalf("the resumed orphan scan listed %d ranges, want at most 1 (OST0001's)", n)
	}
}
