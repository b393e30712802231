package bench

import (
	"os"
	"strings"
	"testing"
)

// TestProbeCountsThisProcess: the probe reads this process's CPU from
// /proc, and a phase's cost per operation is what each process spent
// over the phase's operations.
func TestProbeCountsThisProcess(t *testing.T) {
	p := NewCPUProbe([]Proc{{Name: "gone", Pid: 1 << 30}})
	before := p.sample()
	x := 0
	for i := 0; i < 50_000_000; i++ { // about 30 ms of CPU
		x += i ^ x
	}
	after := p.sample()
	if x == 42 {
		t.Log(x)
	}
	m := p.perOp(before, after, 1000)
	if m["bench"] <= 0 {
		t.Errorf("this process spent no CPU: %v", m)
	}
	if _, ok := m["gone"]; ok {
		t.Errorf("a process that does not exist spent CPU: %v", m)
	}
	if p.Procs[len(p.Procs)-1].Pid != os.Getpid() {
		t.Errorf("the probe does not count this process: %v", p.Procs)
	}
	if p.perOp(before, after, 0) != nil {
		t.Error("a phase without operations has a cost per operation")
	}
}

func TestCPUOverRunsWeighsByOperations(t *testing.T) {
	got := cpuOverRuns([]Phase{
		{Ops: 100, CPUUsPerOp: map[string]float64{"MDT0000": 100, "mount": 50}},
		{Ops: 300, CPUUsPerOp: map[string]float64{"MDT0000": 60}},
	})
	if got["MDT0000"] != 70 || got["mount"] != 12.5 {
		t.Errorf("cpuOverRuns = %v, want MDT0000 70, mount 12.5", got)
	}
	if cpuOverRuns([]Phase{{Ops: 5}}) != nil {
		t.Error("runs without CPU figures have some")
	}
}

func TestPrintMDShowsCPUByProcess(t *testing.T) {
	r := &MDResult{Workers: 1, Items: 10, Iterations: 1, Phases: []Phase{
		{Name: "file_create", Ops: 10, CPUUsPerOp: map[string]float64{"MDT0000": 160.25, "mount": 140}},
		{Name: "file_stat", Ops: 10},
	}}
	var b strings.Builder
	PrintMD(&b, r)
	out := b.String()
	for _, want := range []string{"CPU per operation", "MDT0000", "mount", "160.2", "140.0", "300.2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	PrintMD(&b, &MDResult{Workers: 1, Items: 1, Iterations: 1, Phases: []Phase{{Name: "file_stat", Ops: 1}}})
	if strings.Contains(b.String(), "CPU per operation") {
		t.Errorf("a run without CPU figures prints a CPU table:\n%s", b.String())
	}
}
