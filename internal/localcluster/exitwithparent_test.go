package localcluster

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/target/proc"
	"nacre/test/wait"
)

// TestMain runs this test binary as the starter of
// TestTargetsDieWithTheirStarter when that test asks it to: it starts a
// target the way Up does and waits to be killed.
func TestMain(m *testing.M) {
	if dir := os.Getenv("NACRE_TEST_STARTER_DIR"); dir != "" {
		pid, err := start(os.Getenv("NACRE_TEST_STARTER_BIN"), dir, os.Getenv("NACRE_TEST_STARTER_EXIT") == "1", nil)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("pid", pid)
		select {}
	}
	os.Exit(m.Run())
}

// TestTargetsDieWithTheirStarter: with ExitWithParent the targets an Up
// started are killed when the process that started them dies (a test
// binary killed by its timeout leaves no servers behind); without it they
// outlive it, as `nacre up --detach` needs.
func TestTargetsDieWithTheirStarter(t *testing.T) {
	for _, exit := range []bool{true, false} {
		t.Run(fmt.Sprintf("ExitWithParent=%v", exit), func(t *testing.T) {
			dir := t.TempDir()
			// A stand-in for `nacre serve`: it ignores its arguments and waits.
			bin := filepath.Join(dir, "serve")
			if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			starter := exec.Command(os.Args[0])
			flag := "0"
			if exit {
				flag = "1"
			}
			starter.Env = append(os.Environ(), "NACRE_TEST_STARTER_DIR="+dir, "NACRE_TEST_STARTER_BIN="+bin, "NACRE_TEST_STARTER_EXIT="+flag)
			out, err := starter.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := starter.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil || !strings.HasPrefix(line, "pid ") {
				starter.Process.Kill()
				starter.Wait()
				t.Fatalf("starter said %q, %v", line, err)
			}
			pid, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "pid ")))
			defer syscall.Kill(pid, syscall.SIGKILL)
			if !proc.Running(pid) {
				t.Fatalf("the target (pid %d) does not run", pid)
			}
			starter.Process.Kill()
			starter.Wait()
			// Killed, it is gone within milliseconds; a second says it was not.
			gone := wait.Poll(time.Second, func() bool { return !proc.Running(pid) })
			if gone != exit {
				t.Errorf("after its starter died, the target is gone: %v, want %v", gone, exit)
			}
		})
	}
}
