package itest

import (
	"context"
	"testing"

	"nacre/internal/bench"
	"nacre/test/testcluster"
)

// TestBenchmarksOverMDTCounts runs the two benchmarks that compare MDT
// counts small: bench md --mdts (phases on a fresh cluster per count,
// workers spread over the MDTs, ratios to the first count) and bench
// lfsck --mdts (a tree on every MDT, the namespace check on all at once,
// a point per MDT).
func TestBenchmarksOverMDTCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters of 1 and 2 MDTs")
	}
	ctx := context.Background()
	md, err := bench.RunMDScale(ctx, bench.MDScaleOptions{MD: bench.MDOptions{Workers: 2, Items: 40, Phases: []string{"file"}},
		MDTCounts: []int{1, 2}, ClusterDir: t.TempDir(), Binary: testcluster.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(md.Runs) != 2 || md.Runs[0].MDTs != 1 || md.Runs[1].MDTs != 2 || md.Runs[1].Result.MDTs != 2 {
		t.Fatalf("md runs: %+v", md.Runs)
	}
	for _, run := range md.Runs {
		for _, p := range run.Result.Phases {
			if p.Ops != 80 || p.Errors != 0 || p.OpsPerSec <= 0 || run.Speedup[p.Name] <= 0 {
				t.Fatalf("%d MDTs, phase %s: %+v (speedup %v)", run.MDTs, p.Name, p, run.Speedup[p.Name])
			}
		}
	}
	if md.Runs[0].Speedup["file_create"] != 1 {
		t.Fatalf("the first count's ratio to itself: %v", md.Runs[0].Speedup)
	}
	lf, err := bench.RunLfsckBench(ctx, bench.LfsckBenchOptions{MDTCounts: []int{2}, MDTFiles: 150, Dirs: 2, Subdirs: 2, Threads: 2, Repeat: 1,
		ClusterDir: t.TempDir(), Binary: testcluster.Binary(t)})
	if err != nil {
		t.Fatal(err)
	}
	if len(lf.MDTScale) != 2 {
		t.Fatalf("lfsck points %d, want one per MDT: %+v", len(lf.MDTScale), lf.MDTScale)
	}
	for i, p := range lf.MDTScale {
		if p.MDTs != 2 || p.MDT == nil || *p.MDT != uint32(i) || p.Objects < 150 || p.ObjectsPerS <= 0 || p.Component != "namespace" {
			t.Fatalf("lfsck point %d: %+v", i, p)
		}
	}
}
