package lfsck

import (
	"context"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
)

// The layout check with OST summaries (summary.go) must find exactly what
// the object-by-object check finds: in an aged tree with every kind of
// damage, with the summaries of every OST failing (each stripe is then
// checked one by one), and with summaries turned off.
func TestLayoutFindsTheSameWithAndWithoutSummaries(t *testing.T) {
	want := uninterrupted(t)
	for _, how := range []string{"summaries fail", "summaries off"} {
		t.Run(how, func(t *testing.T) {
			off := how == "summaries off"
			if !off {
				fault.Arm("lfsck.layout.summary", fault.Action{Kind: "error"})
				defer fault.Disarm("lfsck.layout.summary")
			}
			h := newHarnessPool(t, 2, 4096)
			agedDamaged(h, agedBulk())
			env := h.env()
			env.Tuning.NoSummaries = off
			rep := h.run(New(env), fullReq(0))
			if got := figures(rep); got != want {
				t.Fatalf("%s:\n%s\nwith summaries:\n%s", how, got, want)
			}
			if how == "summaries fail" && fault.Hits("lfsck.layout.summary") == 0 {
				t.Fatal("the summaries were not asked for")
			}
		})
	}
}

// TestStopDuringSummaryVerifyCountsOnce stops the run while it compares
// the summaries (after the scan): the resumed run verifies everything
// again and must end with the figures of an uninterrupted run.
func TestStopDuringSummaryVerifyCountsOnce(t *testing.T) {
	want := uninterrupted(t)
	h := newHarnessPool(t, 2, 4096)
	agedDamaged(h, agedBulk())
	// The verification's first check of an object the summaries did not
	// settle is held until the stop.
	const point = "lfsck.layout.verify"
	before := fault.Hits(point)
	fault.Arm(point, fault.Action{Kind: "delay", Count: 1}) // no delay: the hit marks the start of verify
	defer fault.Disarm(point)
	verifying := newHeld(func(call string, _ uint32) bool { return call == "check" && fault.Hits(point) > before })
	h.gate = verifying.gate
	c := New(h.env())
	ctx := context.Background()
	if _, err := c.Start(ctx, fullReq(0)); err != nil {
		t.Fatal(err)
	}
	verifying.wait(t, "the run never checked an object during the summaries' verification")
	if _, err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if s := c.Report().Components["layout"].Status; s != "stopped" {
		t.Fatalf("status after a stop during verification: %s", s)
	}
	h.gate = nil
	msg, err := c.Start(ctx, &pb.LfsckStartRequest{Types: allRepairs.Types, Orphan: true, CreateMdtobj: true, CreateOstobj: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "resumed") {
		t.Fatalf("start after stop: %s", msg)
	}
	c.Wait(ctx)
	if got := figures(c.Report()); got != want {
		t.Fatalf("after a stop during verification:\n%s\nuninterrupted:\n%s", got, want)
	}
}
