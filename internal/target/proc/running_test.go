package proc

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"nacre/test/wait"
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
	wait.For(t, 5*time.Second, "a killed child to stop counting as running", func() bool { return !Running(pid) })
	if !Alive(pid) {
		t.Fatal("the zombie is gone before it was reaped")
	}
}
