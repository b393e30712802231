package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestPlanRandomFollowsSeed000(t *testing.T) {
	plan := PlanRandom(5000, 32<<10, 8<<20, 7)
	if len(plan) != 5000 {
		t.Fatalf("%d files", len(plan))
	}
	perDir := map[string]int{}
	for _, f := range plan {
		depth := strings.Count(f.Dir, "/") + 1
		if depth < 1 || depth > 10 {
			t.Fatalf("depth %d in %s", depth, f.Dir)
		}
		if f.Size > 8<<20 {
			t.Fatalf("size %d above the cap", f.Size)
		}
		perDir[f.Dir+"|"+f.Name]++
		perDir[f.Dir]++
	}
	for k, n := range perDir {
		if !strings.Contains(k, "|") && (n < 1 || n > 100) {
			t.Fatalf("%d files in %s", n, k)
		}
		if strings.Contains(k, "|") && n != 1 {
			t.Fatalf("duplicate file %s", k)
		}
	}
	again := PlanRandom(5000, 32<<10, 8<<20, 7)
	if again[4321] != plan[4321] {
		t.Fatal("the same seed made another plan")
	}
}

func sampleDarshanLog(t *testing.T) string {
	out, err := exec.Command("python3", "-c", "import darshan,os; print(os.path.dirname(darshan.__file__))").Output()
	if err != nil {
		t.Fatalf("the Python package darshan is needed (bash scripts/install-deps.sh installs it): %v", err)
	}
	log := filepath.Join(strings.TrimSpace(string(out)), "examples", "example_logs", "ior_hdf5_example.darshan")
	if _, err := os.Stat(log); err != nil {
		t.Fatalf("sample log: %v", err)
	}
	return log
}

// TestAgeFromDarshanSampleLog recreates the files of a sample Darshan log
// in a local directory: the same number of files and the same size
// distribution, with sizes above the cap reduced.
func TestAgeFromDarshanSampleLog(t *testing.T) {
	log := sampleDarshanLog(t)
	ctx := context.Background()
	recs, err := ReadDarshan(ctx, "", []string{log})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) == 0 {
		t.Fatal("no records in the sample log")
	}
	const cap = 64 << 10
	want := map[string]int{}
	capped := 0
	for _, r := range recs {
		s := r.Size
		if s > cap {
			s = cap
			capped++
		}
		want[SizeBucket(s)]++
	}
	dest := t.TempDir()
	res, err := RunAge(ctx, AgeOptions{Dest: dest, Local: true, Darshan: []string{log}, MaxSize: cap})
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != len(recs) || res.Capped != capped {
		t.Fatalf("aged %d files (%d capped), the log has %d (%d above the cap)", res.Files, res.Capped, len(recs), capped)
	}
	got := map[string]int{}
	n := 0
	filepath.Walk(dest, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && info.Name() != ageStateFile {
			n++
			got[SizeBucket(uint64(info.Size()))]++
		}
		return nil
	})
	if n != len(recs) {
		t.Fatalf("%d files on disk, want %d", n, len(recs))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("size bucket %s: %d files, want %d (all %v vs %v)", k, got[k], v, got, want)
		}
	}
	// A second run of the same plan resumes: nothing left to do.
	again, err := RunAge(ctx, AgeOptions{Dest: dest, Local: true, Darshan: []string{log}, MaxSize: cap})
	if err != nil || again.Skipped != len(recs) {
		t.Fatalf("resume: skipped %d, %v", again.Skipped, err)
	}
}

func TestAgeErrors(t *testing.T) {
	ctx := context.Background()
	for _, o := range []AgeOptions{
		{Local: true, Random: true, Files: 1},
		{Dest: t.TempDir(), Local: true},
		{Dest: t.TempDir(), Local: true, Random: true},
		{Dest: t.TempDir(), Local: true, Darshan: []string{"/nonexistent.darshan"}},
		{Dest: t.TempDir(), Local: true, Darshan: []string{"/etc/hostname"}},
	} {
		if _, err := RunAge(ctx, o); err == nil {
			t.Errorf("accepted %+v", o)
		}
	}
}
