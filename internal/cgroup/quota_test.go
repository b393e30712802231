package cgroup

import (
	"fmt"
	"nacre/test/wait"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestQuotaHoldsABusyLoopToItsBudget: on this machine's real cgroup
// hierarchy, a shell spinning in a loop, started in a cgroup with a
// budget of 0.2 core (in it from its first instruction), uses about 0.2 s
// of CPU per second (not the whole core it would take), and the cgroup is
// gone once removed. It is skipped
// only where no writable cpu controller exists.
func TestQuotaHoldsABusyLoopToItsBudget(t *testing.T) {
	h, err := Usable(Options{})
	if err != nil {
		t.Skipf("no usable cgroup cpu controller to test on: %v", err)
	}
	top := fmt.Sprintf("nacre-test-%d", os.Getpid())
	g, err := h.Create(top+"/burn", 0.2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Group(top).RemoveTree(); err != nil {
			t.Error(err)
		}
	})
	if b, err := g.Budget(); err != nil || b != 0.2 {
		t.Fatalf("budget reads %v (%v), want 0.2", b, err)
	}

	// The loop notes its cgroup first: it runs in its budget from its
	// first instruction.
	first := filepath.Join(t.TempDir(), "first")
	burn := g.Command("sh", "-c", `cat /proc/self/cgroup > "$0"; while :; do :; done`, first)
	if err := burn.Start(); err != nil {
		t.Fatal(err)
	}
	pid := burn.Process.Pid
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			burn.Process.Kill()
			burn.Wait()
		}
	}
	defer stop()
	wait.For(t, 5*time.Second, "the loop to note its cgroup", func() bool {
		b, err := os.ReadFile(first)
		return err == nil && len(b) > 0
	})
	if b, _ := os.ReadFile(first); !strings.Contains(string(b), ":/"+g.Name+"\n") {
		t.Errorf("the loop's first instruction ran outside %s: /proc/self/cgroup said\n%s", g.Name, b)
	}
	if in, err := h.GroupOf(pid); err != nil || in.Name != g.Name {
		t.Fatalf("the process is in %+v (%v), want %s", in, err, g.Name)
	}

	c0, err := ProcessCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	time.Sleep(1200 * time.Millisecond) // the span the CPU is measured over
	c1, err := ProcessCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	cores := (c1 - c0).Seconds() / time.Since(t0).Seconds()
	t.Logf("a busy loop with a budget of 0.2 core used %.3f core", cores)
	if cores > 0.35 || cores < 0.05 {
		t.Errorf("a busy loop with a budget of 0.2 core used %.3f core: want about 0.2 (at most 0.35, and it must run)", cores)
	}

	stop()
	if err := g.Remove(); err != nil {
		t.Fatal(err)
	}
	if g.Exists() {
		t.Errorf("cgroup %s is still there after Remove", g.Dir)
	}
	if err := g.Remove(); err != nil {
		t.Errorf("removing a cgroup that is gone: %v", err)
	}
}
