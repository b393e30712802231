package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeSystem is a fake /proc and cgroup mounts in a temporary directory:
// proc/self/mountinfo lists mounts whose points are under root.
type fakeSystem struct {
	t    *testing.T
	root string
}

func newFakeSystem(t *testing.T) *fakeSystem {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc", "self"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &fakeSystem{t: t, root: root}
}

func (s *fakeSystem) opts() Options { return Options{Proc: filepath.Join(s.root, "proc")} }

// mount adds a mount table line for a cgroup hierarchy at root/dir, as
// this machine's kernel writes them.
func (s *fakeSystem) mount(dir, fstype, mountOpts, superOpts string) string {
	s.t.Helper()
	p := filepath.Join(s.root, dir)
	if err := os.MkdirAll(p, 0o755); err != nil {
		s.t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(s.root, "proc", "self", "mountinfo"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "32 31 0:29 / %s %s shared:9 - %s %s %s\n", p, mountOpts, fstype, fstype, superOpts)
	return p
}

// files writes control files (name -> content) into dir, as the kernel
// makes them in a cgroup.
func (s *fakeSystem) files(dir string, files map[string]string) {
	s.t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			s.t.Fatal(err)
		}
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestFindChoosesTheHierarchyThatHoldsCPU: a v2 hierarchy whose
// cgroup.controllers offers cpu is used; where the cpu controller is
// bound to v1 (this machine: a cgroup2 at /sys/fs/cgroup/unified with
// only hugetlb), the v1 cpu hierarchy is, also when it shares its mount
// with cpuacct.
func TestFindChoosesTheHierarchyThatHoldsCPU(t *testing.T) {
	cases := []struct {
		name        string
		v2ctl       string // "": no v2 mount
		v1opts      string // "": no v1 cpu mount
		wantVersion Version
		wantDir     string
	}{
		{"unified with cpu", "cpuset cpu io memory pids\n", "", V2, "unified"},
		{"v2 offers cpu beside a v1 mount", "cpu io\n", "rw,cpuset", V2, "unified"},
		{"cpu bound to v1", "hugetlb\n", "rw,cpu", V1, "cpu"},
		{"v1 cpu with cpuacct", "", "rw,cpu,cpuacct", V1, "cpu"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newFakeSystem(t)
			s.mount("tmpfs", "tmpfs", "rw", "rw")
			if c.v1opts != "" {
				s.mount("cpu", "cgroup", "rw,relatime", c.v1opts)
			}
			if c.v2ctl != "" {
				d := s.mount("unified", "cgroup2", "rw,relatime", "rw")
				s.files(d, map[string]string{"cgroup.controllers": c.v2ctl})
			}
			h, err := Find(s.opts())
			if err != nil {
				t.Fatal(err)
			}
			if h.Version != c.wantVersion || h.Dir != filepath.Join(s.root, c.wantDir) {
				t.Fatalf("found %s, want %s at %s", h, c.wantVersion, c.wantDir)
			}
		})
	}
}

// TestFindSaysWhyNoHierarchyServes: without a writable cpu controller
// the error names each hierarchy it found and what is wrong with it.
func TestFindSaysWhyNoHierarchyServes(t *testing.T) {
	s := newFakeSystem(t)
	d := s.mount("unified", "cgroup2", "rw,relatime", "rw")
	s.files(d, map[string]string{"cgroup.controllers": "hugetlb\n"})
	s.mount("cpu,cpuacct", "cgroup", "ro,nosuid", "rw,cpu,cpuacct")
	_, err := Find(s.opts())
	if err == nil {
		t.Fatal("found a hierarchy: a v2 one without cpu and a read-only v1 one")
	}
	for _, want := range []string{"no writable cgroup cpu controller", "does not offer the cpu controller", `"hugetlb"`, "cpu,cpuacct is mounted read-only", "--privileged"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}

	none := newFakeSystem(t)
	none.mount("tmpfs", "tmpfs", "rw", "rw")
	if _, err := Find(none.opts()); err == nil || !strings.Contains(err.Error(), "no cgroup hierarchy is mounted") {
		t.Errorf("no cgroup mount: %v", err)
	}
}

// v2Files are the control files of a cgroup v2 cgroup with cpu enabled.
func v2Files() map[string]string {
	return map[string]string{"cgroup.subtree_control": "", "cpu.max": "max 100000\n", "cgroup.procs": ""}
}

// TestCreateV2GivesEveryLevelCPUAndWritesCPUMax: under cgroup v2 each
// cgroup above the new one lists cpu in its subtree_control (written
// where missing, left alone where there), the budget is cpu.max's "QUOTA
// PERIOD", 0 is "max", a pid joins through cgroup.procs, and the budget
// reads back in cores.
func TestCreateV2GivesEveryLevelCPUAndWritesCPUMax(t *testing.T) {
	s := newFakeSystem(t)
	root := s.mount("cg", "cgroup2", "rw,nosuid", "rw,nsdelegate")
	s.files(root, map[string]string{"cgroup.controllers": "cpu io memory\n", "cgroup.subtree_control": "cpu io\n"})
	// The kernel makes a cgroup's files at mkdir; here they are made
	// first, as for a cgroup that exists (a target started again).
	for _, d := range []string{"nacre", "nacre/c1", "nacre/c1/ost0"} {
		s.files(filepath.Join(root, d), v2Files())
	}
	h, err := Find(s.opts())
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Create("nacre/c1/ost0", 0.25)
	if err != nil {
		t.Fatal(err)
	}
	if g.Dir != filepath.Join(root, "nacre", "c1", "ost0") || g.Name != "nacre/c1/ost0" {
		t.Fatalf("group %q at %s", g.Name, g.Dir)
	}
	if got := read(t, filepath.Join(root, "cgroup.subtree_control")); got != "cpu io\n" {
		t.Errorf("the root, which gives cpu already, got subtree_control %q", got)
	}
	for _, d := range []string{"nacre", "nacre/c1"} {
		if got := read(t, filepath.Join(root, d, "cgroup.subtree_control")); got != "+cpu" {
			t.Errorf("%s: subtree_control %q, want +cpu written", d, got)
		}
	}
	if got := read(t, filepath.Join(g.Dir, "cpu.max")); got != "25000 100000" {
		t.Errorf("cpu.max %q, want 25000 100000", got)
	}
	if b, err := g.Budget(); err != nil || b != 0.25 {
		t.Errorf("budget %v (%v), want 0.25", b, err)
	}
	if err := g.SetBudget(0); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(g.Dir, "cpu.max")); got != "max 100000" {
		t.Errorf("no budget: cpu.max %q, want max 100000", got)
	}
	if b, err := g.Budget(); err != nil || b != 0 {
		t.Errorf("no budget reads as %v (%v)", b, err)
	}
	if b, err := h.Group("").Budget(); err != nil || b != 0 {
		t.Errorf("the root, without cpu.max, has budget %v (%v); want none", b, err)
	}
}

// TestCreateV1WritesPeriodAndQuota: under cgroup v1 the budget is
// cpu.cfs_quota_us per cpu.cfs_period_us, and no budget is a quota of -1.
func TestCreateV1WritesPeriodAndQuota(t *testing.T) {
	s := newFakeSystem(t)
	root := s.mount("cpu", "cgroup", "rw,relatime", "rw,cpu")
	for _, d := range []string{"nacre", "nacre/c1", "nacre/c1/mdt0"} {
		s.files(filepath.Join(root, d), map[string]string{"cpu.cfs_quota_us": "-1\n", "cpu.cfs_period_us": "50000\n", "cgroup.procs": ""})
	}
	h, err := Find(s.opts())
	if err != nil {
		t.Fatal(err)
	}
	g, err := h.Create("nacre/c1/mdt0", 0.6)
	if err != nil {
		t.Fatal(err)
	}
	if q, p := read(t, filepath.Join(g.Dir, "cpu.cfs_quota_us")), read(t, filepath.Join(g.Dir, "cpu.cfs_period_us")); q != "60000" || p != "100000" {
		t.Errorf("quota %q per period %q, want 60000 per 100000", q, p)
	}
	if b, err := g.Budget(); err != nil || b != 0.6 {
		t.Errorf("budget %v (%v), want 0.6", b, err)
	}
	if got := read(t, filepath.Join(root, "nacre", "c1", "cpu.cfs_quota_us")); got != "-1\n" {
		t.Errorf("the cgroup above got quota %q; only the new one has a budget", got)
	}
	if err := g.SetBudget(0); err != nil {
		t.Fatal(err)
	}
	if b, err := g.Budget(); err != nil || b != 0 || read(t, filepath.Join(g.Dir, "cpu.cfs_quota_us")) != "-1" {
		t.Errorf("no budget: %v (%v), quota file %q", b, err, read(t, filepath.Join(g.Dir, "cpu.cfs_quota_us")))
	}
}

// TestCreateRemovesWhatItMadeWhenTheBudgetFails: a cgroup without the
// cpu controller's files (cpu not enabled for it) is refused, saying so,
// and the cgroups Create made are removed; those that were there stay.
func TestCreateRemovesWhatItMadeWhenTheBudgetFails(t *testing.T) {
	for _, v := range []Version{V1, V2} {
		t.Run(v.String(), func(t *testing.T) {
			s := newFakeSystem(t)
			var root string
			if v == V2 {
				root = s.mount("cg", "cgroup2", "rw", "rw")
				s.files(root, map[string]string{"cgroup.controllers": "cpu\n", "cgroup.subtree_control": "cpu\n"})
				s.files(filepath.Join(root, "nacre"), v2Files())
			} else {
				root = s.mount("cpu", "cgroup", "rw", "rw,cpu")
				s.files(filepath.Join(root, "nacre"), map[string]string{"cgroup.procs": ""})
			}
			h, err := Find(s.opts())
			if err != nil {
				t.Fatal(err)
			}
			// A fake tree's mkdir makes no files: the new cgroup lacks
			// cpu.max (cpu.cfs_period_us).
			_, err = h.Create("nacre/c2", 0.5)
			if err == nil || !strings.Contains(err.Error(), "the cpu controller is not enabled for this cgroup") {
				t.Fatalf("want the missing controller named, got %v", err)
			}
			if _, serr := os.Stat(filepath.Join(root, "nacre", "c2")); !os.IsNotExist(serr) {
				t.Errorf("the cgroup Create made is still there (%v)", serr)
			}
			if _, serr := os.Stat(filepath.Join(root, "nacre")); serr != nil {
				t.Errorf("the cgroup that was there is gone: %v", serr)
			}
		})
	}
}

// TestCreateRefusesBadNamesAndBudgets: a name must be a relative path of
// plain names, and a budget MinCores or more (0: none).
func TestCreateRefusesBadNamesAndBudgets(t *testing.T) {
	s := newFakeSystem(t)
	root := s.mount("cpu", "cgroup", "rw", "rw,cpu")
	h, err := Find(s.opts())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "/abs", "a//b", "a/../b", "./a", "a/"} {
		if _, err := h.Create(name, 0.5); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 0 {
		t.Errorf("refused names made %v", entries)
	}
	for _, c := range []struct {
		cores float64
		ok    bool
	}{{0, true}, {0.01, true}, {2.5, true}, {0.005, false}, {-1, false}} {
		if err := CheckCores(c.cores); (err == nil) != c.ok {
			t.Errorf("CheckCores(%g) = %v, want ok %v", c.cores, err, c.ok)
		}
	}
}

// TestBudgetRefusesWhatIsNoQuota: control files that do not hold a quota
// are an error, not a budget.
func TestBudgetRefusesWhatIsNoQuota(t *testing.T) {
	s := newFakeSystem(t)
	root := s.mount("cg", "cgroup2", "rw", "rw")
	s.files(root, map[string]string{"cgroup.controllers": "cpu\n"})
	h, err := Find(s.opts())
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"50000", "x 100000", "50000 0", ""} {
		s.files(filepath.Join(root, "g"), map[string]string{"cpu.max": bad})
		if b, err := h.Group("g").Budget(); err == nil {
			t.Errorf("cpu.max %q read as %v", bad, b)
		}
	}
}

// TestGroupOfReadsTheProcessCgroupLine: a process's cgroup is the line
// of /proc/PID/cgroup for the hierarchy (v2: 0::PATH; v1: the one that
// lists cpu among its controllers), taken relative to the part of the
// hierarchy the mount shows.
func TestGroupOfReadsTheProcessCgroupLine(t *testing.T) {
	cases := []struct {
		name      string
		v         Version
		mountRoot string
		lines     string
		want      string // "" with wantErr
		wantErr   bool
	}{
		{"v1 as on this machine", V1, "/", "9:name=systemd:/\n2:cpuacct:/\n1:cpu:/nacre/c1/ost0\n0::/\n", "nacre/c1/ost0", false},
		{"v1 cpu with cpuacct", V1, "/", "4:cpu,cpuacct:/nacre/c1/mgs\n", "nacre/c1/mgs", false},
		{"v1 root", V1, "/", "1:cpu:/\n", "", false},
		{"v2", V2, "/", "0::/nacre/c1/mdt0\n", "nacre/c1/mdt0", false},
		{"v2 mount of a subtree", V2, "/sub", "0::/sub/nacre/c1/ost3\n", "nacre/c1/ost3", false},
		{"v2 outside the mounted subtree", V2, "/sub", "0::/other/x\n", "", true},
		{"v2 with no v2 line", V2, "/", "1:cpu:/x\n", "", true},
		{"v1 with no cpu line", V1, "/", "2:cpuacct:/x\n0::/y\n", "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newFakeSystem(t)
			dir := filepath.Join(s.root, "cg")
			s.files(dir, map[string]string{"cgroup.controllers": "cpu\n"})
			s.files(filepath.Join(s.root, "proc", "42"), map[string]string{"cgroup": c.lines})
			fstype, super := "cgroup2", "rw"
			if c.v == V1 {
				fstype, super = "cgroup", "rw,cpu"
			}
			mi := fmt.Sprintf("32 31 0:29 %s %s rw - %s %s %s\n", c.mountRoot, dir, fstype, fstype, super)
			if err := os.WriteFile(filepath.Join(s.root, "proc", "self", "mountinfo"), []byte(mi), 0o644); err != nil {
				t.Fatal(err)
			}
			h, err := Find(s.opts())
			if err != nil {
				t.Fatal(err)
			}
			g, err := h.GroupOf(42)
			if c.wantErr {
				if err == nil {
					t.Fatalf("got cgroup %q, want an error", g.Name)
				}
				return
			}
			if err != nil || g.Name != c.want || g.Dir != filepath.Join(dir, filepath.FromSlash(c.want)) {
				t.Fatalf("got %+v (%v), want %q", g, err, c.want)
			}
		})
	}
}

// TestCommandJoinsTheCgroupBeforeItRunsTheProgram: the command writes its
// own pid to the cgroup's cgroup.procs and then runs the program in that
// process; where it cannot join, it says so and never runs the program.
func TestCommandJoinsTheCgroupBeforeItRunsTheProgram(t *testing.T) {
	s := newFakeSystem(t)
	root := s.mount("cpu", "cgroup", "rw", "rw,cpu")
	s.files(filepath.Join(root, "nacre", "c1", "ost0"), map[string]string{"cgroup.procs": ""})
	h, err := Find(s.opts())
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "ran")
	g := h.Group("nacre/c1/ost0")
	// The program prints its pid: the one that joined.
	cmd := g.Command("sh", "-c", `echo $$ > "$0"`, out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	joined, ran := strings.TrimSpace(read(t, filepath.Join(g.Dir, "cgroup.procs"))), strings.TrimSpace(read(t, out))
	if joined == "" || joined != ran {
		t.Errorf("the pid that joined is %q, the program ran as %q: want one process", joined, ran)
	}

	gone := h.Group("nacre/c1/gone")
	out2 := filepath.Join(t.TempDir(), "ran")
	b, err := gone.Command("sh", "-c", `echo $$ > "$0"`, out2).CombinedOutput()
	if err == nil || !strings.Contains(string(b), "cannot join cgroup "+gone.Dir+" for its CPU budget: not starting sh") {
		t.Errorf("joining a cgroup that does not exist: %v, %q; want a failure that names the cgroup", err, b)
	}
	if _, err := os.Stat(out2); !os.IsNotExist(err) {
		t.Errorf("the program ran though it could not join its cgroup (%v)", err)
	}
}
