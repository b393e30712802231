package cgroup

import (
	"os"
	"testing"
)

func TestParseStatCPUCountsFromTheLastParenthesis(t *testing.T) {
	// A command name with blanks and parentheses, as /proc shows it.
	line := "4242 (nacre (x) y) S 1 4242 4242 0 -1 4194560 1234 0 0 0 350 125 0 0 20 0 9 0 100 0 0\n"
	got, err := parseStatCPU([]byte(line))
	if err != nil || got != 475 {
		t.Fatalf("parseStatCPU = %d, %v; want 350+125", got, err)
	}
	for _, bad := range []string{"no parenthesis", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 u s 13"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
}

// TestProcessCPUGrowsAsThisProcessWorks: the CPU time read from /proc is
// this process's, in seconds, and grows as it computes.
func TestProcessCPUGrowsAsThisProcessWorks(t *testing.T) {
	before, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := 0; i < 100_000_000; i++ { // about 50 ms of CPU
		x += i ^ x
	}
	if x == 42 {
		t.Log(x)
	}
	after, err := ProcessCPU(os.Getpid())
	if err != nil || after <= before {
		t.Fatalf("CPU time before %v, after a busy loop %v (%v)", before, after, err)
	}
	if _, err := ProcessCPU(1 << 30); err == nil {
		t.Error("a process that does not exist has a CPU time")
	}
}
