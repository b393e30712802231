package localcluster

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/cgroup"
	"nacre/internal/target"
	"nacre/internal/target/proc"
	"nacre/test/wait"
)

// TestParseNodeCPUReadsCoresAndRoles: --node-cpu takes one budget for
// every role, one per role, or both (the named roles win), and refuses,
// naming the item and the form it takes, what is no budget.
func TestParseNodeCPUReadsCoresAndRoles(t *testing.T) {
	good := []struct {
		in   string
		want NodeCPU
		str  string
	}{
		{"0.5", NodeCPU{0.5, 0.5, 0.5}, "0.5"},
		{"mds=0.6,ost=0.15,mgs=0.1", NodeCPU{MGS: 0.1, MDS: 0.6, OST: 0.15}, "mgs=0.1,mds=0.6,ost=0.15"},
		{" mds = 0.6 , ost=0.15 ", NodeCPU{MDS: 0.6, OST: 0.15}, "mds=0.6,ost=0.15"},
		{"0.5,ost=0.15", NodeCPU{MGS: 0.5, MDS: 0.5, OST: 0.15}, "mgs=0.5,mds=0.5,ost=0.15"},
		{"ost=0.15,1", NodeCPU{MGS: 1, MDS: 1, OST: 0.15}, "mgs=1,mds=1,ost=0.15"},
		{"mds=2", NodeCPU{MDS: 2}, "mds=2"},
		{"0.01", NodeCPU{0.01, 0.01, 0.01}, "0.01"},
	}
	for _, c := range good {
		got, err := ParseNodeCPU(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseNodeCPU(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
			continue
		}
		if got.String() != c.str {
			t.Errorf("ParseNodeCPU(%q).String() = %q, want %q", c.in, got.String(), c.str)
		}
		if back, err := ParseNodeCPU(got.String()); err != nil || back != got {
			t.Errorf("%q does not read back: %+v, %v", got.String(), back, err)
		}
	}
	bad := []struct{ in, want string }{
		{"mds=x", `--node-cpu mds=x: "x" is not a number of cores`},
		{"", `--node-cpu "": no budget given`},
		{"mdt=0.5", `--node-cpu mdt=0.5: "mdt" is no role`},
		{"ost=0.1,ost=0.2", "ost given twice"},
		{"0.5,1", "two budgets for every role"},
		{"0", "--node-cpu 0: a budget is 0.01 core or more"},
		{"mgs=-1", "--node-cpu mgs=-1: a budget is 0.01 core or more"},
		{"ost=0.001", "--node-cpu ost=0.001: a budget is 0.01 core or more"},
		{"ost=NaN", `"NaN" is not a number of cores`},
		{"ost=Inf", `"Inf" is not a number of cores`},
		{"mds=0.5,", "an empty item"},
	}
	for _, c := range bad {
		_, err := ParseNodeCPU(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "mds=0.6,ost=0.15,mgs=0.1") {
			t.Errorf("ParseNodeCPU(%q): want an error with %q and the form it takes, got %v", c.in, c.want, err)
		}
	}
}

// TestClusterCgroupNamesDifferByDirectory: two clusters of one name in two
// directories get cgroups of their own, and one directory, however it is
// named (relative, through a symbolic link), always the same.
func TestClusterCgroupNamesDifferByDirectory(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(a, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	if dirHash(a) == dirHash(b) {
		t.Fatalf("two directories share the hash %s", dirHash(a))
	}
	if dirHash(filepath.Join(base, "link")) != dirHash(a) || dirHash(a+"/.") != dirHash(a) {
		t.Errorf("one directory by other names: %s, %s, %s", dirHash(filepath.Join(base, "link")), dirHash(a+"/."), dirHash(a))
	}
	if len(dirHash(a)) != 8 {
		t.Errorf("hash %q: want 8 hex digits", dirHash(a))
	}
}

// realHierarchy is this machine's cpu hierarchy, or a skip where none is
// usable.
func realHierarchy(t *testing.T) *cgroup.Hierarchy {
	t.Helper()
	h, err := cgroup.Usable(cgroup.Options{})
	if err != nil {
		t.Skipf("no usable cgroup cpu controller here: %v", err)
	}
	return h
}

// TestPlanBudgetsGivesRolesTheirBudgetsAndKeepsThemForRestarts: the
// targets about to start get a cgroup each, named after the cluster and
// the target, with their role's budget; a target started again without
// --node-cpu gets its own cgroup's budget back, and a new one that of
// another target of its role; a cluster without cgroups starts without
// budgets; removeCgroups removes them all.
func TestPlanBudgetsGivesRolesTheirBudgetsAndKeepsThemForRestarts(t *testing.T) {
	h := realHierarchy(t)
	dir := filepath.Join(t.TempDir(), "c")
	t.Cleanup(func() { removeCgroups(dir, io.Discard) })
	ids := map[string]target.Identity{}
	var dirs []string
	for _, n := range []struct {
		name string
		kind target.Kind
	}{{"mgs", target.MGS}, {"mdt0", target.MDT}, {"ost0", target.OST}, {"ost1", target.OST}, {"ost2", target.OST}, {"mdt1", target.MDT}} {
		d := filepath.Join(dir, n.name)
		ids[d] = target.Identity{Fsname: "tst", Kind: n.kind}
		dirs = append(dirs, d)
	}
	if b, err := planBudgets(dir, NodeCPU{}, dirs, ids); err != nil || b != nil {
		t.Fatalf("a cluster without cgroups, no --node-cpu: %+v, %v; want no budgets", b, err)
	}
	b, err := planBudgets(dir, NodeCPU{MGS: 0.1, MDS: 0.5, OST: 0.25}, dirs[:4], ids)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"mgs": 0.1, "mdt0": 0.5, "ost0": 0.25, "ost1": 0.25}
	for _, d := range dirs[:4] {
		g := b.group(d)
		if g == nil || g.Name != "nacre/tst-"+dirHash(dir)+"/"+filepath.Base(d) {
			t.Fatalf("%s: cgroup %+v, want nacre/tst-%s/%s", d, g, dirHash(dir), filepath.Base(d))
		}
		if c, err := g.Budget(); err != nil || c != want[filepath.Base(d)] {
			t.Errorf("%s: budget %v (%v), want %v", d, c, err, want[filepath.Base(d)])
		}
	}
	// ost1 started again, ost2 new: no --node-cpu.
	again, err := planBudgets(dir, NodeCPU{}, []string{dirs[3], dirs[4]}, ids)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs[3:5] {
		if c, err := again.group(d).Budget(); err != nil || c != 0.25 {
			t.Errorf("%s started without --node-cpu: budget %v (%v), want the OSTs' 0.25", filepath.Base(d), c, err)
		}
	}
	// mdt1 new (a cluster grown by --mdts): the mds role is every MDT's.
	grown, err := planBudgets(dir, NodeCPU{}, dirs[5:], ids)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := grown.group(dirs[5]).Budget(); err != nil || c != 0.5 {
		t.Errorf("mdt1 started without --node-cpu: budget %v (%v), want MDT0's 0.5", c, err)
	}
	// Only the named roles get budgets.
	only, err := planBudgets(dir, NodeCPU{MDS: 0.3}, dirs[:3], ids)
	if err != nil {
		t.Fatal(err)
	}
	if only.group(dirs[0]) != nil || only.group(dirs[2]) != nil {
		t.Errorf("mds=0.3 gave the MGS or an OST a cgroup: %+v", only.groups)
	}
	if c, _ := only.group(dirs[1]).Budget(); c != 0.3 {
		t.Errorf("mds=0.3: the MDT's budget is %v", c)
	}
	cluster := h.Group("nacre/tst-" + dirHash(dir))
	removeCgroups(dir, io.Discard)
	if cluster.Exists() {
		t.Fatalf("%s is left after removeCgroups", cluster.Dir)
	}
}

// fakeNacre is an executable that stands for nacre: its first
// instruction copies /proc/self/cgroup to d/first, then it sleeps.
func fakeNacre(t *testing.T, d string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fake-nacre")
	script := fmt.Sprintf("#!/bin/sh\ncat /proc/self/cgroup > %s/first\nexec sleep 30\n", d)
	if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestStartRunsATargetInItsCgroupFromItsFirstInstruction: a target
// started with a cgroup is in it before it runs anything (not moved once
// running: the Go runtime reads its cgroup's quota once, as it starts).
func TestStartRunsATargetInItsCgroupFromItsFirstInstruction(t *testing.T) {
	h := realHierarchy(t)
	top := fmt.Sprintf("nacre-test-%d", os.Getpid())
	g, err := h.Create(top+"/ost0", 0.5)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Group(top).RemoveTree() })
	d := t.TempDir()
	pid, err := start(fakeNacre(t, d), d, false, g)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		syscall.Kill(pid, syscall.SIGKILL)
		wait.For(t, 5*time.Second, "the fake target to exit", func() bool { return !proc.Running(pid) })
	}()
	wait.For(t, 5*time.Second, "the fake target to note its cgroup", func() bool {
		b, err := os.ReadFile(filepath.Join(d, "first"))
		return err == nil && len(b) > 0
	})
	if b, _ := os.ReadFile(filepath.Join(d, "first")); !strings.Contains(string(b), ":/"+g.Name+"\n") {
		t.Errorf("the target's first instruction ran outside %s: /proc/self/cgroup said\n%s", g.Name, b)
	}
	if in, err := h.GroupOf(pid); err != nil || in.Name != g.Name {
		t.Errorf("pid %d (the pid file's) is in %+v (%v), want %s", pid, in, err, g.Name)
	}
}

// TestStartNeverRunsATargetOutsideItsCgroup: a target that cannot join
// its cgroup exits at once, saying why in its log, without running.
func TestStartNeverRunsATargetOutsideItsCgroup(t *testing.T) {
	// A fake cgroup v1 tree whose cgroup does not exist.
	fake := t.TempDir()
	os.MkdirAll(filepath.Join(fake, "proc", "self"), 0o755)
	os.MkdirAll(filepath.Join(fake, "cpu"), 0o755)
	mi := fmt.Sprintf("32 31 0:29 / %s rw - cgroup cgroup rw,cpu\n", filepath.Join(fake, "cpu"))
	if err := os.WriteFile(filepath.Join(fake, "proc", "self", "mountinfo"), []byte(mi), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := cgroup.Find(cgroup.Options{Proc: filepath.Join(fake, "proc")})
	if err != nil {
		t.Fatal(err)
	}
	d := t.TempDir()
	pid, err := start(fakeNacre(t, d), d, false, h.Group("nacre/gone/ost0"))
	if err != nil {
		t.Fatal(err)
	}
	wait.For(t, 5*time.Second, "the target that cannot join its cgroup to exit", func() bool { return !proc.Running(pid) })
	if _, err := os.Stat(filepath.Join(d, "first")); !os.IsNotExist(err) {
		t.Errorf("the target ran outside its cgroup (%v)", err)
	}
	log, _ := os.ReadFile(filepath.Join(d, proc.LogFile))
	if !strings.Contains(string(log), "cannot join cgroup "+filepath.Join(fake, "cpu", "nacre", "gone", "ost0")+" for its CPU budget") {
		t.Errorf("its log does not say why it did not start:\n%s", log)
	}
}
