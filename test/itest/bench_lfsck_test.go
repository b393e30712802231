package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nacre/internal/bench"
	"nacre/internal/cgroup"
	"nacre/internal/localcluster"
	"nacre/test/testcluster"
)

// TestLfsckBenchmarkShapes runs `nacre bench lfsck`'s three benchmarks
// small: the scaling tree (every component at each size), Table I (a
// local cluster of its own, with per-process CPU) and the load test (one
// point per setting), then checks the figures, the JSON names scripts
// read, and the plots.
func TestLfsckBenchmarkShapes(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	ctx := context.Background()
	o := bench.LfsckBenchOptions{
		MGS: cl.MGS, Sizes: []int{300, 600}, Dirs: 2, Subdirs: 2, Threads: 2, Repeat: 1,
		OSTCounts: []int{2}, OSTFiles: 200, OSTStripes: -1, OSTRestart: true, ClusterDir: t.TempDir(), Binary: testcluster.Binary(t),
		Load: true, LoadSeconds: 0.5, LoadRounds: 1,
	}
	res, err := bench.RunLfsckBench(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Scaling) != 2*4 {
		t.Fatalf("scaling points %d, want 8 (2 sizes x namespace, scrub, layout, all): %+v", len(res.Scaling), res.Scaling)
	}
	for i, p := range res.Scaling {
		size := []int{300, 600}[i/4]
		want := []string{"namespace", "scrub", "layout", "all"}[i%4]
		if p.Files != size || p.Component != want || p.Seconds <= 0 || p.ObjectsPerS <= 0 {
			t.Fatalf("scaling point %d: %+v, want %d files, %s", i, p, size, want)
		}
		// Every file is an object of each component (layout counts files,
		// the others also the directories of the tree).
		if p.Objects < uint64(size) {
			t.Fatalf("scaling point %+v checked fewer objects than files", p)
		}
	}
	if len(res.TableI) != 2 {
		t.Fatalf("table I points %d, want layout and all: %+v", len(res.TableI), res.TableI)
	}
	for _, p := range res.TableI {
		if p.OSTs != 2 || p.Files != 200 || p.Stripes != 400 || p.StripeCount != -1 || p.MDTCPUSeconds < 0 || p.OSTCPUSeconds < 0 || !p.Restarted {
			t.Fatalf("table I point %+v: want 2 OSTs, 200 files of 2 stripes, checked after a restart", p)
		}
	}
	names := map[string]bool{}
	for _, lp := range res.Load {
		names[lp.Setting] = true
		if lp.CreatesPerS <= 0 || lp.BaseCreatesPerS <= 0 {
			t.Fatalf("load point %+v without a create rate", lp)
		}
		if lp.Setting != "none" && lp.Setting != "full" && lp.SpeedLimit == 0 {
			t.Fatalf("load point %+v: a fraction of full speed needs a limit", lp)
		}
	}
	for _, s := range []string{"none", "full", "1/5", "2/5", "3/5", "4/5"} {
		if !names[s] {
			t.Fatalf("load setting %q missing: %+v", s, res.Load)
		}
	}

	js, _ := json.Marshal(res)
	var schema map[string]any
	json.Unmarshal(js, &schema)
	for _, k := range []string{"scaling", "table1", "load", "start", "cpus"} {
		if _, ok := schema[k]; !ok {
			t.Fatalf("JSON lacks %q: %s", k, js)
		}
	}
	lp := schema["load"].([]any)[1].(map[string]any)
	for _, k := range []string{"setting", "creates_per_s", "creates_per_s_without_checker", "relative_create_rate", "checker_objects_per_s"} {
		if _, ok := lp[k]; !ok {
			t.Fatalf("load JSON lacks %q: %v", k, lp)
		}
	}

	dir := t.TempDir()
	files, err := bench.WriteLfsckPlots(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("plots %v, want scaling, OSTs and load", files)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("%s is not a PNG (%v)", filepath.Base(f), err)
		}
	}
}

// TestLfsckBenchmarkInterleaved: with Interleave the scaling test builds a
// tree per size, each on a local cluster of its own, measures them in
// rounds, and reports the median per size and component, in the same
// shape as the growing tree.
func TestLfsckBenchmarkInterleaved(t *testing.T) {
	dir := t.TempDir()
	var progress bytes.Buffer
	res, err := bench.RunLfsckBench(context.Background(), bench.LfsckBenchOptions{
		Sizes: []int{200, 500}, Interleave: true, Dirs: 2, Subdirs: 2, Threads: 2, Repeat: 3,
		ClusterDir: dir, Binary: testcluster.Binary(t), Progress: &progress,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if len(res.Scaling) != 2*4 {
		t.Fatalf("scaling points %d, want 8: %+v", len(res.Scaling), res.Scaling)
	}
	for i, p := range res.Scaling {
		size := []int{200, 500}[i/4]
		if p.Files != size || p.Component != []string{"namespace", "scrub", "layout", "all"}[i%4] || p.Objects < uint64(size) || p.ObjectsPerS <= 0 {
			t.Fatalf("scaling point %d: %+v", i, p)
		}
	}
	// Rounds visit every size in turn: the second round of the small
	// tree comes after the first of the large one.
	out := progress.String()
	first500 := bytes.Index([]byte(out), []byte("round 1/3      500 files"))
	second200 := bytes.Index([]byte(out), []byte("round 2/3      200 files"))
	if first500 < 0 || second200 < 0 || second200 < first500 {
		t.Fatalf("the rounds do not alternate between the sizes:\n%s", out)
	}
	// Both clusters are stopped: nothing of them runs on.
	for _, size := range []string{"files200", "files500"} {
		if n := localcluster.Running(filepath.Join(dir, size)); n != 0 {
			t.Errorf("%d processes of the %s cluster still run", n, size)
		}
	}
}

// TestLfsckBenchmarkRunsItsClustersInTheirBudgets: with NodeCPU (`nacre
// bench lfsck --node-cpu`) the Table I cluster's target processes run in
// cgroups with their roles' budgets, which the progress prints and every
// point records, and which are removed with the cluster. It needs a
// writable cgroup cpu controller (root; this machine has cgroup v1's).
func TestLfsckBenchmarkRunsItsClustersInTheirBudgets(t *testing.T) {
	if _, err := cgroup.Usable(cgroup.Options{}); err != nil {
		t.Skipf("no usable cgroup cpu controller for --node-cpu here: %v", err)
	}
	budgets := localcluster.NodeCPU{MGS: 0.1, MDS: 0.5, OST: 0.25}
	var progress bytes.Buffer
	res, err := bench.RunLfsckBench(context.Background(), bench.LfsckBenchOptions{
		OSTCounts: []int{2}, OSTFiles: 100, OSTStripes: -1, Dirs: 2, Subdirs: 2, Threads: 2, Repeat: 1,
		ClusterDir: t.TempDir(), Binary: testcluster.Binary(t), Progress: &progress, NodeCPU: budgets,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	out := progress.String()
	const said = "CPU budgets: mgs 0.1 core, mds 0.5 core, ost 0.25 core, each target process in a cgroup of its own ("
	i := strings.Index(out, said)
	if i < 0 {
		t.Fatalf("the progress does not print the budgets:\n%s", out)
	}
	if !strings.Contains(out, "; node CPU mgs=0.1,mds=0.5,ost=0.25)") {
		t.Errorf("the result lines do not carry the budgets:\n%s", out)
	}
	if len(res.TableI) != 2 {
		t.Fatalf("table I points %+v, want layout and all", res.TableI)
	}
	for _, p := range res.TableI {
		if p.NodeCPU == nil || *p.NodeCPU != budgets {
			t.Errorf("point %+v: node_cpu %v, want %+v", p, p.NodeCPU, budgets)
		}
	}
	js, _ := json.Marshal(res.TableI[0])
	if !strings.Contains(string(js), `"node_cpu":{"mgs":0.1,"mds":0.5,"ost":0.25}`) {
		t.Errorf("JSON of a point: %s", js)
	}
	// "(cgroup v1: /sys/fs/cgroup/cpu/nacre/nacre-HASH/TARGET)"
	line := out[i+len(said):]
	line = line[:strings.IndexByte(line, '\n')]
	_, path, _ := strings.Cut(line, ": ")
	cluster := filepath.Dir(path)
	if !strings.Contains(cluster, "/nacre/") {
		t.Fatalf("no cgroup path in %q", line)
	}
	if _, err := os.Stat(cluster); !os.IsNotExist(err) {
		t.Errorf("the cluster's cgroup %s is left after the benchmark (%v)", cluster, err)
	}
}
