package lfsck

import (
	"fmt"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
)

// TestErrorPolicy: an object the scan cannot check counts as failed in the
// component that runs. With -e continue the run goes on and completes; the
// failed object's directory entries are passed over, not reported as
// orphans. With -e failout the run stops, failed.
func TestErrorPolicy(t *testing.T) {
	for _, policy := range []string{"continue", "failout"} {
		t.Run(policy, func(t *testing.T) {
			h := newHarness(t, 2)
			d := h.mkdir(fid.Root, "d")
			for i := range 5 {
				h.create(d, fmt.Sprintf("f%d", i), 1, []byte("data"))
			}
			// The scan goes in local key order: the root, with its
			// entries, comes first.
			fault.Arm("lfsck.scan.object", fault.Action{Kind: "error", Count: 1})
			defer fault.Disarm("lfsck.scan.object")
			rep := h.run(New(h.env()), &pb.LfsckStartRequest{Types: []string{"namespace"}, Reset_: true, ErrorPolicy: policy})
			ns := rep.Components["namespace"]
			if ns.Failed != 1 || ns.FailedPhase1 != 1 {
				t.Errorf("namespace failed %d (phase 1: %d), want 1: %s", ns.Failed, ns.FailedPhase1, describe(rep))
			}
			if n := rep.Components["scrub"].Failed; n != 0 {
				t.Errorf("scrub, which did not run, failed %d", n)
			}
			want := "completed"
			if policy == "failout" {
				want = "failed"
			}
			if ns.Status != want {
				t.Errorf("status %s, want %s", ns.Status, want)
			}
			if ns.Inconsistent != 0 || len(ns.Counters) != 0 {
				t.Errorf("a failed object made the run find inconsistencies: %s", describe(rep))
			}
		})
	}
}

// TestOIScanKeepsToTheSpeedLimit: the OI entries the object scan did not
// confirm (here 600 dangling ones) are read after it, and count against
// the speed limit as objects do.
func TestOIScanKeepsToTheSpeedLimit(t *testing.T) {
	h := newHarness(t, 1)
	d := h.mkdir(fid.Root, "d")
	const n = 600
	for i := range n {
		name := fmt.Sprintf("f%d", i)
		f := h.create(d, name, 0, nil)
		h.inject("oi_dangling", f, d, name, 0)
	}
	c := New(h.env())
	speed := uint64(1 << 30) // a limit, but no waiting
	rep := h.run(c, &pb.LfsckStartRequest{Types: []string{"scrub"}, Reset_: true, Speed: &speed})
	if got := rep.Components["scrub"].Counters["dangling"].Repaired; got != n {
		t.Fatalf("%d dangling OI entries repaired, want %d: %s", got, n, describe(rep))
	}
	c.mu.Lock()
	paced := c.last.lim.n
	c.mu.Unlock()
	// About n objects in the object scan, and n OI entries after it.
	if paced < 2*n-64 {
		t.Fatalf("the speed limit accounted for %d items, want at least %d (objects and unconfirmed OI entries)", paced, 2*n-64)
	}
}
