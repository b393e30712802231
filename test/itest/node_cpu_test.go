package itest

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/cgroup"
	"nacre/internal/cli"
	"nacre/internal/target"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// statusCPU reads `nacre status --dir dir --json`: each target's row by
// name.
func statusCPU(t *testing.T, bin, dir string) map[string]cli.TargetStatus {
	t.Helper()
	out, err := exec.Command(bin, "status", "--dir", dir, "--json").Output()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	var st cli.ClusterStatus
	if err := json.Unmarshal(out, &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	rows := map[string]cli.TargetStatus{}
	for _, ts := range st.Targets {
		rows[ts.Name] = ts
	}
	return rows
}

// TestUpNodeCPUPutsEachTargetInItsBudget: `nacre up --node-cpu
// mds=0.5,ost=0.25,mgs=0.1` starts each target process in a cgroup of its
// own with its role's quota and says so; `nacre status --json` shows each
// target's budget, its cgroup and the CPU it has used; an OST that died
// and is started again by a plain `nacre up` goes back to its budget; and
// `nacre down` removes the cluster's cgroups, as does an up that fails
// and stops what it started. It needs a writable cgroup
// cpu controller (root; this machine has cgroup v1's).
func TestUpNodeCPUPutsEachTargetInItsBudget(t *testing.T) {
	if _, err := cgroup.Usable(cgroup.Options{}); err != nil {
		t.Skipf("no usable cgroup cpu controller for --node-cpu here: %v", err)
	}
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	out, err := upDetached(t, bin, dir, "--osts", "2", "--node-cpu", "mds=0.5,ost=0.25,mgs=0.1")
	if err != nil {
		t.Fatalf("up --node-cpu: %v\n%s", err, out)
	}
	if !strings.Contains(out, "CPU budgets: mgs 0.1 core, mds 0.5 core, ost 0.25 core") {
		t.Errorf("up does not print the budgets it set:\n%s", out)
	}
	want := map[string]float64{"MGS": 0.1, "nacre-MDT0000": 0.5, "nacre-OST0000": 0.25, "nacre-OST0001": 0.25}
	rows := statusCPU(t, bin, dir)
	var cgroups []string
	for name, cores := range want {
		ts, ok := rows[name]
		if !ok {
			t.Fatalf("status has no %s: %v", name, rows)
		}
		if ts.CPUBudget != cores || ts.Cgroup == "" || ts.CPUSeconds == nil {
			t.Errorf("%s: budget %v in cgroup %q, CPU used %v; want %v core, a cgroup and the CPU used", name, ts.CPUBudget, ts.Cgroup, ts.CPUSeconds, cores)
			continue
		}
		procs, err := os.ReadFile(filepath.Join(ts.Cgroup, "cgroup.procs"))
		if err != nil || !slices.Contains(strings.Fields(string(procs)), strconv.FormatInt(ts.Pid, 10)) {
			t.Errorf("%s: pid %d is not in %s (%q, %v)", name, ts.Pid, ts.Cgroup, procs, err)
		}
		cgroups = append(cgroups, ts.Cgroup)
	}
	if len(cgroups) == 4 && filepath.Dir(cgroups[0]) != filepath.Dir(cgroups[1]) {
		t.Errorf("the targets' cgroups are not under one cluster cgroup: %v", cgroups)
	}
	table, err := exec.Command(bin, "status", "--dir", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(table), "CPU BUDGET") || !strings.Contains(string(table), "0.25 core") {
		t.Errorf("status's table lacks the budgets (%v):\n%s", err, table)
	}

	// OST0001 dies; a plain up starts it again, in its budget.
	pid, ok := proc.Serving(filepath.Join(dir, "ost1"))
	if !ok {
		t.Fatal("ost1 does not run")
	}
	syscall.Kill(pid, syscall.SIGKILL)
	wait.For(t, 10*time.Second, "ost1 to die", func() bool { _, ok := proc.Serving(filepath.Join(dir, "ost1")); return !ok })
	if out, err := upDetached(t, bin, dir); err != nil {
		t.Fatalf("up after ost1 died: %v\n%s", err, out)
	}
	if ts := statusCPU(t, bin, dir)["nacre-OST0001"]; ts.Pid == int64(pid) || ts.CPUBudget != 0.25 {
		t.Errorf("ost1 started again (pid %d, was %d): budget %v, want 0.25 kept", ts.Pid, pid, ts.CPUBudget)
	}

	down, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("down: %v\n%s", err, down)
	}
	if !strings.Contains(string(down), "removed the cgroups of its CPU budgets") {
		t.Errorf("down does not say it removed the cgroups:\n%s", down)
	}
	for _, cg := range append(cgroups, filepath.Dir(cgroups[0])) {
		if _, err := os.Stat(cg); !os.IsNotExist(err) {
			t.Errorf("cgroup %s is left after down (%v)", cg, err)
		}
	}

	// A start that fails (OST0001's port taken) stops what it started
	// and leaves no cgroup behind.
	id, err := target.Load(filepath.Join(dir, "ost1"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", id.Listen)
	if err != nil {
		t.Fatalf("take OST0001's port %s: %v", id.Listen, err)
	}
	defer ln.Close()
	out, err = upDetached(t, bin, dir, "--node-cpu", "0.5")
	if err == nil || !strings.Contains(out, "stopped the target processes this run started") {
		t.Fatalf("up --node-cpu with OST0001's port taken: want a failure that stops what it started, got %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Dir(cgroups[0])); !os.IsNotExist(err) {
		t.Errorf("the cluster's cgroup %s is left after a failed up (%v)", filepath.Dir(cgroups[0]), err)
	}
}
