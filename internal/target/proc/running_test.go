package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestRunningEndsAtAnUnreapedExit: a child that was killed and not yet
// reaped (a zombie with no thread left) is not running; a live one is.
func TestRunningEndsAtAnUnreapedExit(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Wait()
	if !Running(pid) {
		t.Fatal("a live child is not running")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for Running(pid) {
		if time.Now().After(deadline) {
			t.Fatal("a killed child still counts as running after 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !Alive(pid) {
		t.Fatal("the zombie is gone before it was reaped")
	}
}
