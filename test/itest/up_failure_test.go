package itest

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/localcluster"
	"nacre/internal/target"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// upDetached runs `nacre up --dir dir --detach ARGS...`; the cluster is
// stopped when the test ends.
func upDetached(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	t.Cleanup(func() { localcluster.Down(dir, io.Discard) })
	out, err := exec.Command(bin, append([]string{"up", "--dir", dir, "--detach"}, args...)...).CombinedOutput()
	return string(out), err
}

// servingPids maps each target directory of the cluster in dir whose
// process runs to its pid.
func servingPids(t *testing.T, dir string) map[string]int {
	t.Helper()
	dirs, err := localcluster.Dirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, d := range dirs {
		if pid, ok := proc.Serving(d); ok {
			pids[filepath.Base(d)] = pid
		}
	}
	return pids
}

// stillServing fails the test unless every target of before still runs
// in the process it ran in.
func stillServing(t *testing.T, dir string, before map[string]int, what string) {
	t.Helper()
	now := servingPids(t, dir)
	for d, pid := range before {
		if now[d] != pid {
			t.Errorf("%s: %s (pid %d) was running before and is not now (pid %d)", what, d, pid, now[d])
		}
	}
}

// killTarget sends sig to the process of a target directory and waits
// until it is gone, with every thread: the main thread of a Go process is
// a zombie (not proc.Running) while its other threads still exit, and
// until the last one has, the process's sockets are open.
func killTarget(t *testing.T, d string, sig syscall.Signal) {
	t.Helper()
	pid, ok := proc.Serving(d)
	if !ok {
		t.Fatalf("%s is not running", d)
	}
	syscall.Kill(pid, sig)
	wait.For(t, 15*time.Second, fmt.Sprintf("%s (pid %d) to be gone after signal %v", d, pid, sig), func() bool { return processGone(pid) })
}

// processGone says whether pid has exited and no thread of it is left (it
// may wait to be reaped).
func processGone(pid int) bool {
	if proc.Running(pid) {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err != nil || len(tasks) <= 1
}

// TestUpThatFailsStopsOnlyWhatItStarted: `nacre up` on a cluster that is
// already (partly) running stopped the whole cluster when it failed, the
// targets it had not started too: with --mount naming a regular file
// ("stopped 4 target processes", then "mkdir ...: not a directory"), and
// when a restarted OST could not listen on its port (the healthy MGS, MDT
// and other OST were stopped). Now it stops only what it started; a
// --mount that cannot be used is refused before anything starts; and a
// failed first start leaves nothing running.
func TestUpThatFailsStopsOnlyWhatItStarted(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	if out, err := upDetached(t, bin, dir, "--osts", "2"); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	before := servingPids(t, dir)
	if len(before) != 4 {
		t.Fatalf("want 4 target processes, got %v", before)
	}

	// Case A: --mount at a regular file.
	file := filepath.Join(t.TempDir(), "regular")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := upDetached(t, bin, dir, "--mount", file)
	if err == nil || !strings.Contains(out, file+" is not a directory") {
		t.Errorf("up --mount at a regular file: want a refusal naming it, got %v\n%s", err, out)
	}
	if strings.Contains(out, "stopped") {
		t.Errorf("up --mount at a regular file stopped something:\n%s", out)
	}
	stillServing(t, dir, before, "after up --mount at a regular file")

	// Case B: OST0001 killed with SIGKILL, and its port taken by another
	// program before it is started again.
	ost1 := filepath.Join(dir, "ost1")
	id, err := target.Load(ost1)
	if err != nil {
		t.Fatal(err)
	}
	killTarget(t, ost1, syscall.SIGKILL)
	delete(before, "ost1")
	ln, err := net.Listen("tcp", id.Listen)
	if err != nil {
		t.Fatalf("take OST0001's port %s: %v", id.Listen, err)
	}
	defer ln.Close()
	out, err = upDetached(t, bin, dir)
	if err == nil || !strings.Contains(out, "OST0001") {
		t.Errorf("up with OST0001's port taken: want an error naming OST0001, got %v\n%s", err, out)
	}
	if !strings.Contains(out, "left running the 3 that were running before (MGS, MDT0000, OST0000)") {
		t.Errorf("up with OST0001's port taken does not say what it left running:\n%s", out)
	}
	stillServing(t, dir, before, "after up failed to start OST0001")

	// Case C: the MGS down too. The MGS this run starts stays although
	// OST0001 fails again: with targets running, what it restarts may be
	// what keeps a group in quorum (two MGS replicas of three).
	killTarget(t, filepath.Join(dir, "mgs"), syscall.SIGKILL)
	out, err = upDetached(t, bin, dir)
	if err == nil || !strings.Contains(out, "left running the 1 target processes this run started (MGS)") {
		t.Errorf("up with the MGS down and OST0001's port taken: want an error saying it left the MGS running, got %v\n%s", err, out)
	}
	if _, ok := servingPids(t, dir)["mgs"]; !ok {
		t.Errorf("up stopped the MGS it restarted in a running cluster:\n%s", out)
	}

	// A first start that fails stops what it started: everything.
	if out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	out, err = upDetached(t, bin, dir)
	if err == nil || !strings.Contains(out, "stopped the target processes this run started") {
		t.Errorf("up of a stopped cluster with OST0001's port taken: want an error saying what it stopped, got %v\n%s", err, out)
	}
	if n := localcluster.Running(dir); n != 0 {
		t.Errorf("%d target processes still run after a failed start of a stopped cluster", n)
	}
	ln.Close()
	if out, err := upDetached(t, bin, dir); err != nil {
		t.Fatalf("up once the port is free: %v\n%s", err, out)
	}
}

// TestTwoUpsOnOneDirectoryDoNotBreakTheCluster: two `nacre up` started at
// once on a new directory raced: both formatted and started targets, one
// stopped the other's, and a run that said "Nacre is up" left a cluster
// without its MGS. Now the second waits its turn or is refused with a
// message naming the other, and the cluster ends complete.
func TestTwoUpsOnOneDirectoryDoNotBreakTheCluster(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	t.Cleanup(func() { localcluster.Down(dir, io.Discard) })
	type result struct {
		out string
		err error
	}
	res := make(chan result, 2)
	for range 2 {
		go func() {
			out, err := exec.Command(bin, "up", "--dir", dir, "--detach").CombinedOutput()
			res <- result{string(out), err}
		}()
	}
	ok := 0
	for range 2 {
		r := <-res
		switch {
		case r.err == nil:
			ok++
		case strings.Contains(r.out, "another `nacre up`") && strings.Contains(r.out, dir):
		default:
			t.Errorf("a concurrent up failed without naming the other: %v\n%s", r.err, r.out)
		}
	}
	if ok == 0 {
		t.Fatal("neither concurrent up started the cluster")
	}
	pids := servingPids(t, dir)
	for _, name := range []string{"mgs", "mdt0", "ost0", "ost1"} {
		if pids[name] == 0 {
			t.Errorf("after two concurrent ups, %s is not running (running: %v)", name, pids)
		}
	}
	if out, err := exec.Command(bin, "status", "--mgs", mgsOf(t, dir)).CombinedOutput(); err != nil {
		t.Fatalf("status after two concurrent ups: %v\n%s", err, out)
	}
}
