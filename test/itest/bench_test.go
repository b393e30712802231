package itest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nacre/internal/bench"
	"nacre/test/testcluster"
)

// TestBenchmarksOnACluster runs every benchmark small against a real
// cluster and checks its figures' shape: phases, counts, JSON schema and
// the series of a plot.
func TestBenchmarksOnACluster(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	ctx := context.Background()

	t0 := time.Now()
	md, err := bench.RunMD(ctx, bench.MDOptions{MGS: cl.MGS, Workers: 3, Items: 40, SharedDir: true, StripeCount: 2})
	if err != nil {
		t.Fatal(err)
	}
	if md.PhaseNames() != "dir_create,dir_stat,dir_rename,dir_remove,file_create,file_stat,file_read,file_remove" {
		t.Fatalf("md phases %s", md.PhaseNames())
	}
	for _, p := range md.Phases {
		if p.Ops != 120 || p.Errors != 0 || p.OpsPerSec <= 0 || p.P99Us < p.P50Us {
			t.Fatalf("md phase %+v", p)
		}
	}
	js, _ := json.Marshal(md)
	var schema struct {
		Phases []map[string]any `json:"phases"`
	}
	json.Unmarshal(js, &schema)
	for _, k := range []string{"name", "ops_per_sec", "mean_us", "p99_us"} {
		if _, ok := schema.Phases[0][k]; !ok {
			t.Fatalf("md JSON lacks %q: %s", k, js)
		}
	}

	t.Logf("md %v", time.Since(t0))
	t0 = time.Now()
	sv, err := bench.RunSurvey(ctx, bench.SurveyOptions{MGS: cl.MGS, Threads: []int{1, 3}, Files: 30})
	if err != nil {
		t.Fatal(err)
	}
	if len(sv.Rows) != 2 {
		t.Fatalf("survey rows %d", len(sv.Rows))
	}
	for _, row := range sv.Rows {
		for _, op := range []string{"create", "lookup", "getattr", "setattr", "destroy"} {
			if row.Rates[op] <= 0 {
				t.Fatalf("survey %d threads: %s rate %v", row.Threads, op, row.Rates[op])
			}
		}
	}

	t.Logf("survey %v", time.Since(t0))
	t0 = time.Now()
	tl := &bench.Timeline{MGS: cl.MGS, Interval: 200 * time.Millisecond, Unit: "bytes"}
	io, err := bench.RunIO(ctx, bench.IOOptions{MGS: cl.MGS, Workers: 2, Size: 2 << 20, Block: 1 << 20,
		Patterns: []string{"seq", "random"}, Modes: []string{"fpp", "shared"}, StripeCounts: []int{2}, Timeline: tl})
	if err != nil {
		t.Fatal(err)
	}
	if len(io.Rows) != 2*2*2 {
		t.Fatalf("io rows %d", len(io.Rows))
	}
	for _, row := range io.Rows {
		var perOST float64
		for _, v := range row.PerOST {
			perOST += v
		}
		if row.MiBPerSec <= 0 || row.Bytes != 4<<20 || perOST <= 0 {
			t.Fatalf("io row %+v", row)
		}
	}
	png := filepath.Join(t.TempDir(), "io.png")
	legend, err := bench.WritePlot(png, "io", "bytes", tl.Points())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
		t.Fatalf("plot file: %v", err)
	}
	if !strings.Contains(strings.Join(legend, "|"), "nacre-OST0001 net in") {
		t.Fatalf("plot lacks the OSTs' series: %v", legend)
	}

	t.Logf("io %v", time.Since(t0))
	t0 = time.Now()
	age, err := bench.RunAge(ctx, bench.AgeOptions{MGS: cl.MGS, Dest: "/aged", Random: true, Files: 60, MaxSize: 64 << 10, Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("age %v", time.Since(t0))
	c := cl.Client(t)
	n := 0
	var walk func(p string)
	walk = func(p string) {
		ino, err := c.Resolve(ctx, p, false)
		if err != nil {
			t.Fatal(err)
		}
		ents, err := c.ReadDirAll(ctx, fidOf(ino), false)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Type == 4 {
				walk(p + "/" + string(e.Name))
			} else if string(e.Name) != ".nacre-age-state.json" {
				n++
			}
		}
	}
	walk("/aged")
	if n != age.Files || n != 60 {
		t.Fatalf("aged tree holds %d files, the result says %d", n, age.Files)
	}

	// popd and compare draw timelines too.
	ptl := &bench.Timeline{MGS: cl.MGS, Interval: 100 * time.Millisecond, Unit: "files"}
	ptl.Start(ctx)
	ptl.SetPhase("create")
	pr, err := bench.PopD(ctx, bench.PopDOptions{MGS: cl.MGS, Root: "p", Dirs: 2, Subdirs: 2, Threads: 4, Files: 400, Timeline: ptl})
	ptl.Stop()
	if err != nil {
		t.Fatal(err)
	}
	// The rates times their intervals add up to the files made.
	var made, prevT float64
	for _, p := range ptl.Points() {
		made += p.Rate * (p.T - prevT)
		prevT = p.T
	}
	if pr.Files != 400 || made < 390 || made > 410 {
		t.Fatalf("popd made %d files; its timeline adds up to %.0f", pr.Files, made)
	}
	cr, err := bench.RunCompare(ctx, bench.CompareOptions{A: bench.Target{Label: "a", MGS: cl.MGS}, B: bench.Target{Label: "b", MGS: cl.MGS},
		Rounds: 2, Bench: "md", MD: bench.MDOptions{Workers: 1, Items: 600, Phases: []string{"file"}}, Timeline: true, TimelineEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	phases := map[string]bool{}
	last := -1.0
	for _, p := range cr.Points {
		phases[p.Phase] = true
		if p.T <= last {
			t.Fatalf("compare timeline goes back in time at %+v", p)
		}
		last = p.T
	}
	if !phases["a file_create"] || !phases["b file_remove"] {
		t.Fatalf("compare timeline phases %v", phases)
	}
	png = filepath.Join(t.TempDir(), "compare.png")
	if _, err := bench.WritePlot(png, "compare", "ops", cr.Points); err != nil {
		t.Fatal(err)
	}
}
