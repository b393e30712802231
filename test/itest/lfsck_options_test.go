package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/layout"
	"nacre/internal/lfsck"
	"nacre/test/testcluster"
)

// lfsckStart runs `nacre lfsck start ARGS` (no --wait) and returns what
// it prints.
func lfsckStart(t *testing.T, cl *testcluster.Cluster, args ...string) string {
	t.Helper()
	out, err := cl.Run(append([]string{"lfsck", "start"}, args...)...)
	if err != nil {
		t.Fatalf("nacre lfsck start %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestLfsckOptionsThroughTheCLI drives, on one cluster, the options no
// other test covers: `lfsck status -t namespace --json` (one component,
// the documented fields); -r discarding a stopped run's checkpoint (while
// a plain start resumes it); `lfsck set -s` and `-w` on a running check;
// -e failout and -e continue with an object the scan cannot check; and
// `fault inject --stripe 1` damaging stripe 1 of a two-stripe file.
func TestLfsckOptionsThroughTheCLI(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()
	d, err := c.Mkdir(ctx, fid.Root, "bulk", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 800; i++ {
		if _, _, err := c.Create(ctx, fid.FromPB(d.Fid), fmt.Sprintf("f%d", i), 0o644, client.CreateOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	clean := lfsckRun(t, cl, "-r")
	if f, _ := found(clean); f != 0 {
		t.Fatalf("a new file system is inconsistent: %s", summary(clean))
	}
	fullNS := clean.Components["namespace"]

	t.Run("status-json", func(t *testing.T) { statusJSON(t, cl, clean) })
	t.Run("reset-and-set", func(t *testing.T) { resetAndSet(t, cl) })
	t.Run("error-policy", func(t *testing.T) { errorPolicy(t, cl, fullNS) })
	t.Run("inject-stripe-1", func(t *testing.T) { injectStripe1(t, ctx, cl, c) })
}

// statusJSON: `lfsck status -t namespace --json` prints the namespace
// component alone, with the fields docs/lfsck.md lists, equal to the
// component in `lfsck query --json`.
func statusJSON(t *testing.T, cl *testcluster.Cluster, q *lfsck.Report) {
	out, err := cl.Run("lfsck", "status", "-t", "namespace", "--json")
	if err != nil {
		t.Fatalf("lfsck status -t namespace --json: %v\n%s", err, out)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, out)
	}
	for _, k := range []string{"version", "components", "mdt", "params"} {
		if _, ok := m[k]; ok {
			t.Fatalf("status --json holds %q: the whole report, not one component:\n%s", k, out)
		}
	}
	numbers := []string{"checked", "repaired", "inconsistent", "failed", "checked_phase1", "checked_phase2",
		"failed_phase1", "failed_phase2", "success_count", "latest_start_position", "last_checkpoint_position",
		"first_failure_position", "first_inconsistent_position", "run_time_phase1", "run_time_phase2",
		"average_speed_phase1", "average_speed_phase2", "average_speed_total", "real_time_speed"}
	for _, k := range numbers {
		if _, ok := m[k].(float64); !ok {
			t.Fatalf("%q is %T (%v), want a number:\n%s", k, m[k], m[k], out)
		}
	}
	for _, k := range []string{"status", "current_position", "last_completed_time", "latest_start_time", "last_checkpoint_time"} {
		if s, ok := m[k].(string); !ok || s == "" {
			t.Fatalf("%q is %T (%v), want a string:\n%s", k, m[k], m[k], out)
		}
	}
	for _, k := range []string{"flags", "param"} {
		if _, ok := m[k].([]any); !ok {
			t.Fatalf("%q is %T, want a list:\n%s", k, m[k], out)
		}
	}
	for _, k := range []string{"counters", "stats"} {
		if _, ok := m[k].(map[string]any); !ok {
			t.Fatalf("%q is %T, want an object:\n%s", k, m[k], out)
		}
	}
	var cr lfsck.ComponentReport
	if err := json.Unmarshal([]byte(out), &cr); err != nil {
		t.Fatal(err)
	}
	want := q.Components["namespace"]
	if cr.Status != "completed" || cr.Checked != cr.CheckedPhase1+cr.CheckedPhase2 || cr.Checked != want.Checked ||
		cr.Stats["objects"] == 0 || cr.Stats["objects"] != want.Stats["objects"] || cr.Stats["dirents"] == 0 ||
		cr.SuccessCount != want.SuccessCount || cr.LatestStart != want.LatestStart || !contains(cr.Flags, "scanned-once") {
		t.Fatalf("status --json does not match query --json:\n%s\nquery: %+v", out, want)
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// resetAndSet: a stopped run resumes at its checkpoint with its saved
// speed limit; with -r the next run starts at position 0 ("started"); a
// running check follows `lfsck set -s` and `-w` at once.
func resetAndSet(t *testing.T, cl *testcluster.Cluster) {
	defer cl.Run("lfsck", "stop") // on a failure, for the next subtests
	ns := func() (*lfsck.Report, *lfsck.ComponentReport) {
		r := lfsckQuery(t, cl)
		return r, r.Components["namespace"]
	}
	stop := func() uint64 {
		t.Helper()
		if out, err := cl.Run("lfsck", "stop"); err != nil {
			t.Fatalf("stop: %v\n%s", err, out)
		}
		_, c := ns()
		if c.Status != "stopped" || c.LastCheckpointPosition == 0 {
			t.Fatalf("after stop: %s at checkpoint %d", c.Status, c.LastCheckpointPosition)
		}
		return c.LastCheckpointPosition
	}
	// 50 objects/s: the ~800 objects take 16 s.
	if out := lfsckStart(t, cl, "-r", "-t", "namespace", "-s", "50", "--checkpoint-interval-ms", "100"); !strings.Contains(out, "started") {
		t.Fatalf("start -r: %s", out)
	}
	time.Sleep(time.Second) // the run gets going and checkpoints
	ckpt := stop()
	out := lfsckStart(t, cl)
	if !strings.Contains(out, "resumed") {
		t.Fatalf("start after stop: %s", out)
	}
	r, c := ns()
	if !r.Running || c.LatestStartPosition != ckpt || r.Params.SpeedLimit != 50 {
		t.Fatalf("resumed: running %v at %d (checkpoint %d), speed %d (saved 50)", r.Running, c.LatestStartPosition, ckpt, r.Params.SpeedLimit)
	}
	time.Sleep(500 * time.Millisecond) // the resumed run goes on
	stop()
	out = lfsckStart(t, cl, "-r", "-t", "namespace", "-s", "50")
	if !strings.Contains(out, "started") || strings.Contains(out, "resumed") {
		t.Fatalf("start -r after stop: %s", out)
	}
	r, c = ns()
	if !r.Running || c.LatestStartPosition != 0 {
		t.Fatalf("start -r: running %v, latest start position %d, want 0", r.Running, c.LatestStartPosition)
	}
	// (The limiter lets the scan go 64 objects at a time.)
	if c.Stats["objects"] > 200 {
		t.Fatalf("start -r: %d objects checked at once, at 50 objects/s", c.Stats["objects"])
	}

	// Change the running check from the command line.
	if out, err := cl.Run("lfsck", "set", "-w", "100"); err != nil || strings.TrimSpace(out) != "MDT0000: window 100" {
		t.Fatalf("lfsck set -w 100: %v\n%s", err, out)
	}
	if r, _ := ns(); r.Params.AsyncWindow != 100 || !r.Running {
		t.Fatalf("after set -w 100: window %d, running %v", r.Params.AsyncWindow, r.Running)
	}
	t0 := time.Now()
	if out, err := cl.Run("lfsck", "set", "-s", "0"); err != nil {
		t.Fatalf("lfsck set -s 0: %v\n%s", err, out)
	}
	if r, _ := ns(); r.Params.SpeedLimit != 0 && r.Running {
		t.Fatalf("after set -s 0: speed limit %d", r.Params.SpeedLimit)
	}
	r = waitStatus(t, cl, "namespace", 20*time.Second, "completed")
	if d := time.Since(t0); d > 6*time.Second {
		t.Fatalf("after set -s 0 the run took %v more (at 50 objects/s: 16 s)", d)
	}
	if c := r.Components["namespace"]; c.LatestStartPosition != 0 || c.Stats["objects"] < 800 {
		t.Fatalf("the run after -r: started at %d, %d objects", c.LatestStartPosition, c.Stats["objects"])
	}
	if out, err := cl.Run("lfsck", "set", "-s", "10"); err == nil {
		t.Fatalf("lfsck set with no check running succeeded:\n%s", out)
	}
}

// errorPolicy: the scan fails on its first object (fault point
// lfsck.scan.object). With -e failout the run stops there, failed; with
// -e continue it goes on and completes, the failure counted.
func errorPolicy(t *testing.T, cl *testcluster.Cluster, full *lfsck.ComponentReport) {
	defer cl.Run("fault", "arm", "lfsck.scan.object=off", "--target", "mdt0")
	var checked [2]uint64
	for i, policy := range []string{"failout", "continue"} {
		if out, err := cl.Run("fault", "arm", "lfsck.scan.object=error*1", "--target", "mdt0"); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		lfsckStart(t, cl, "-r", "-t", "namespace", "-e", policy)
		// (Whether start --wait exits non-zero for a failed run is not
		// relied on: the status is polled.)
		r := waitStatus(t, cl, "namespace", 30*time.Second, "failed", "completed")
		c := r.Components["namespace"]
		t.Logf("-e %s: %s, checked %d, failed %d", policy, c.Status, c.CheckedPhase1, c.Failed)
		want := "failed"
		if policy == "continue" {
			want = "completed"
		}
		if c.Status != want || c.Failed != 1 || r.Params.ErrorPolicy != policy || r.Running {
			t.Fatalf("-e %s: %s, failed %d, policy %s, running %v; want %s, 1 failure", policy, c.Status, c.Failed, r.Params.ErrorPolicy, r.Running, want)
		}
		if policy == "failout" && !contains(c.Param, "failout") {
			t.Fatalf("-e failout: param %v", c.Param)
		}
		checked[i] = c.CheckedPhase1
	}
	// failout stopped at the first object; continue checked the rest.
	if checked[0] >= checked[1] || checked[0] > full.CheckedPhase1/10 || checked[1] < full.CheckedPhase1/2 {
		t.Fatalf("checked: failout %d, continue %d, a clean run %d", checked[0], checked[1], full.CheckedPhase1)
	}
}

// injectStripe1: `fault inject ost_object_missing --stripe 1` deletes the
// object of stripe 1, not 0: after -c re-creates it, stripe 1's ranges
// read as zeros and stripe 0's hold their data.
func injectStripe1(t *testing.T, ctx context.Context, cl *testcluster.Cluster, c *client.Client) {
	tr := buildLTree(t, ctx, c, "stripe1")
	if out, err := cl.Run("fault", "inject", "ost_object_missing", "--path", tr.path+"/f1", "--stripe", "1"); err != nil {
		t.Fatalf("inject: %v\n%s", err, out)
	}
	quiesce(t, cl)
	r := lfsckRun(t, cl, "-r", "-c")
	if got := r.Components["layout"].Counters["dangling"]; got.Inconsistent != 1 || got.Repaired != 1 {
		t.Fatalf("want layout.dangling 1/1: %s", summary(r))
	}
	if f, rp := found(r); f != 1 || rp != 1 {
		t.Fatalf("other counters moved: %s", summary(r))
	}
	// The file keeps its size (the MDT's): stripe 1's ranges, to the
	// end, read as zeros.
	mustRead(t, ctx, c, tr.path+"/f1", layout.View(tr.data1, 64<<10, 2, map[int]bool{0: true}, 0))
	mustRead(t, ctx, c, tr.path+"/f2", tr.data2)
}
