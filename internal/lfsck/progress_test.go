package lfsck

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
)

// TestProgressAddsUpRuns: the metrics' figures (Progress) are the runs'
// figures added up: a first run's equal its report, a second run adds
// its own, a dry run counts what it finds, and they never go back, also
// across stops and resumes (one every 300 items checked).
func TestProgressAddsUpRuns(t *testing.T) {
	t.Parallel() // arms no fault point (tiers_test.go)
	h := newHarnessPool(t, 2, 4096)
	agedDamaged(h, sized(300, 3))
	c := New(h.env())
	for _, p := range c.Progress() {
		if p.Running || p.Checked != 0 || p.Repaired != 0 {
			t.Fatalf("idle checker's progress %+v", p)
		}
	}
	want := func(what string, sum map[string]*ComponentReport) {
		t.Helper()
		p := c.Progress()
		for _, comp := range Components {
			name := ComponentNames[comp]
			w := sum[name]
			if p[comp].Checked != w.Checked || p[comp].Repaired != w.Repaired || p[comp].Inconsistent != w.Inconsistent ||
				p[comp].Failed != w.Failed || p[comp].Running {
				t.Fatalf("%s: %s progress %+v, want checked %d inconsistent %d repaired %d failed %d", what, name, p[comp],
					w.Checked, w.Inconsistent, w.Repaired, w.Failed)
			}
		}
	}
	sum := map[string]*ComponentReport{}
	add := func(r *Report) {
		for name, cr := range r.Components {
			s := sum[name]
			if s == nil {
				s = &ComponentReport{}
				sum[name] = s
			}
			s.Checked += cr.Checked
			s.Inconsistent += cr.Inconsistent
			s.Repaired += cr.Repaired
			s.Failed += cr.Failed
		}
	}
	r1 := h.run(c, fullReq(0))
	if f, r := totals(r1); f == 0 || r == 0 {
		t.Fatalf("first run found %d, repaired %d: %s", f, r, describe(r1))
	}
	add(r1)
	want("after one run", sum)
	if r1.Components["namespace"].Checked == 0 {
		t.Fatal("the run checked nothing")
	}

	dry := fullReq(0)
	dry.DryRun = true
	add(h.run(c, dry))
	want("after a dry run", sum)

	add(h.run(c, fullReq(0)))
	want("after a second run", sum)

	// Stops and resumes: running while it runs, and never going back.
	ctx := context.Background()
	if _, err := c.Start(ctx, fullReq(1000)); err != nil {
		t.Fatal(err)
	}
	var last [4]Progress
	sawRunning := false
	deadline := time.Now().Add(2 * time.Minute)
	for i := 0; c.Running(); i++ {
		if time.Now().After(deadline) {
			t.Fatalf("stops and resumes every 300 items checked did not end the run in 2 minutes: %s", describe(c.Report()))
		}
		waitForProgress(t, c, 100) // a step
		p := c.Progress()
		for _, comp := range Components {
			if p[comp].Checked < last[comp].Checked || p[comp].Repaired < last[comp].Repaired {
				t.Fatalf("%s progress went back: %+v after %+v", ComponentNames[comp], p[comp], last[comp])
			}
			if p[comp].Running {
				sawRunning = true
				if p[comp].Phase == 0 {
					t.Fatalf("%s running in phase 0", ComponentNames[comp])
				}
			}
		}
		last = p
		if i%3 == 2 {
			if _, err := c.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if c.Report().Components["namespace"].Status == "completed" {
				break
			}
			if _, err := c.Start(ctx, proto.Clone(allRepairs).(*pb.LfsckStartRequest)); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.Wait(ctx)
	if !sawRunning {
		t.Fatal("Progress never showed the run running")
	}
	p := c.Progress()
	final := c.Report()
	for _, comp := range Components {
		name := ComponentNames[comp]
		// Work in flight at a stop is done again after the resume: at
		// least the run's figures are added.
		if p[comp].Checked < sum[name].Checked+final.Components[name].Checked || p[comp].Running {
			t.Fatalf("%s after stops and resumes: %+v, want checked >= %d", name, p[comp], sum[name].Checked+final.Components[name].Checked)
		}
		if p[comp].Position != final.Components[name].LastCheckpointPosition {
			t.Fatalf("%s position %d, last checkpoint %d", name, p[comp].Position, final.Components[name].LastCheckpointPosition)
		}
	}
}
