package bench

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMDOnLocalDirectory runs every phase against a plain directory (the
// path backend) and checks the shape of the result and its encodings.
func TestMDOnLocalDirectory(t *testing.T) {
	dir := t.TempDir()
	tl := &Timeline{Interval: 20 * time.Millisecond, Unit: "ops"}
	r, err := RunMD(context.Background(), MDOptions{Path: dir, Workers: 3, Items: 50, Depth: 2, Branch: 2,
		Iterations: 2, WriteBytes: 100, ReadBytes: 100, Timeline: tl})
	if err != nil {
		t.Fatal(err)
	}
	want := "tree_create,dir_create,dir_stat,dir_rename,dir_remove,file_create,file_stat,file_read,file_remove,tree_remove"
	if got := r.PhaseNames(); got != want {
		t.Fatalf("phases %s, want %s", got, want)
	}
	for _, p := range r.Phases {
		n := 3 * 50 * 2
		if strings.HasPrefix(p.Name, "tree_") {
			n = 3 * 6 * 2 // 2 + 4 directories per worker tree, two iterations
		}
		if p.Ops != n || p.Errors != 0 || p.OpsPerSec <= 0 || p.MinRate > p.OpsPerSec || p.MaxRate < p.OpsPerSec {
			t.Fatalf("phase %+v: want %d ops", p, n)
		}
	}
	if len(r.Runs) != 2 {
		t.Fatalf("%d runs", len(r.Runs))
	}
	// Everything the benchmark made is gone.
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left %d entries behind", len(ents))
	}
	var js bytes.Buffer
	json.NewEncoder(&js).Encode(r)
	var decoded struct {
		Phases []struct {
			Name      string  `json:"name"`
			OpsPerSec float64 `json:"ops_per_sec"`
			MeanUs    float64 `json:"mean_us"`
			P99Us     float64 `json:"p99_us"`
		} `json:"phases"`
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil || len(decoded.Phases) != 10 || decoded.Phases[5].Name != "file_create" || decoded.Phases[5].OpsPerSec <= 0 {
		t.Fatalf("JSON schema: %v %s", err, js.String()[:200])
	}
	var cb bytes.Buffer
	WriteMDCSV(&cb, r)
	rows, err := csv.NewReader(&cb).ReadAll()
	if err != nil || len(rows) != 1+10+2*10 || rows[0][1] != "phase" {
		t.Fatalf("CSV: %d rows, %v", len(rows), err)
	}
	pts := tl.Points()
	if len(pts) == 0 {
		t.Fatal("timeline recorded nothing")
	}
	file := filepath.Join(t.TempDir(), "md.png")
	legend, err := WritePlot(file, "test", "ops", append(pts, TimelinePoint{T: 9, Phase: "file_create", Rate: 5,
		Servers: map[string]ServerRates{"nacre-OST0000": {DiskWrite: 1e6, NetIn: 2e6}}}))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(file)
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 800 {
		t.Fatalf("plot is not a usable PNG: %v", err)
	}
	joined := strings.Join(legend, "|")
	for _, s := range []string{"file_create", "nacre-OST0000 disk write", "nacre-OST0000 net in"} {
		if !strings.Contains(joined, s) {
			t.Fatalf("plot lacks series %q (has %s)", s, joined)
		}
	}
}

// The ls phase comes right after file_stat, on the same files.
func TestMDLsPhase(t *testing.T) {
	r, err := RunMD(context.Background(), MDOptions{Path: t.TempDir(), Workers: 2, Items: 20, Phases: []string{"file", "ls"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.PhaseNames(), "file_create,file_stat,file_ls,file_read,file_remove"; got != want {
		t.Fatalf("phases %s, want %s", got, want)
	}
	for _, p := range r.Phases {
		if p.Ops != 40 || p.Errors != 0 {
			t.Fatalf("phase %+v: want 40 ops", p)
		}
	}
}

// The link phase links to one file per worker, in a tree's leaves too,
// and leaves nothing behind: the target goes after the last unlink.
func TestMDLinkPhase(t *testing.T) {
	dir := t.TempDir()
	r, err := RunMD(context.Background(), MDOptions{Path: dir, Workers: 2, Items: 20, Depth: 1, Branch: 2, Phases: []string{"link"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.PhaseNames(), "tree_create,link_create,link_stat,link_remove,tree_remove"; got != want {
		t.Fatalf("phases %s, want %s", got, want)
	}
	for _, p := range r.Phases[1:4] {
		if p.Ops != 40 || p.Errors != 0 {
			t.Fatalf("phase %+v: want 40 ops", p)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
}

func TestMDRefusesBadOptions(t *testing.T) {
	for _, o := range []MDOptions{
		{Path: t.TempDir(), Workers: 0, Items: 1},
		{Path: "/nonexistent/dir", Workers: 1, Items: 1},
		{Path: t.TempDir(), Workers: 1, Items: 1, Depth: 2, Branch: 0},
		{Path: t.TempDir(), Workers: 1, Items: 1, Phases: []string{"files"}},
		{Path: t.TempDir(), Workers: 1, Items: 1, Phases: []string{"dir", "ls"}},
		{Workers: 1, Items: 1},
	} {
		if _, err := RunMD(context.Background(), o); err == nil {
			t.Errorf("accepted %+v", o)
		}
	}
}

func TestCompareAlternatesAndComputesRatios(t *testing.T) {
	a, _ := ParseTarget("path:" + t.TempDir())
	b, _ := ParseTarget("path:" + t.TempDir())
	r, err := RunCompare(context.Background(), CompareOptions{A: a, B: b, Rounds: 3, Bench: "md", MD: MDOptions{Workers: 1, Items: 30, Phases: []string{"file"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Rows) != 4 {
		t.Fatalf("%d rows", len(r.Rows))
	}
	for _, row := range r.Rows {
		if len(row.Ratios) != 3 || len(row.A) != 3 || row.MinRatio > row.Median || row.MaxRatio < row.Median || row.Median <= 0 {
			t.Fatalf("row %+v", row)
		}
	}
	if _, err := ParseTarget("ftp:x"); err == nil {
		t.Fatal("bad target accepted")
	}
}
