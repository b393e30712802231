package itest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/fusefs"
	"nacre/internal/localcluster"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestUpCtrlCStopsEverythingWithItsOutputPipeGone: `bash scripts/up.sh
// 2>&1 | tee up.log`, then Ctrl-C. The terminal's SIGINT ends tee too,
// and `nacre up` died of SIGPIPE writing "stopping..." to the pipe tee
// had read, before it stopped anything: every server, and the mount,
// stayed up. Here up writes into a pipe whose reader the test closes,
// and gets SIGINT as its process group, as a terminal sends it; every
// target process it started and its mount must be gone. SIGHUP (the
// terminal closed) and SIGTERM do the same.
func TestUpCtrlCStopsEverythingWithItsOutputPipeGone(t *testing.T) {
	needFUSE(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGHUP, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { upStopsOnSignalWithPipeGone(t, sig) })
	}
}

// upStopsOnSignalWithPipeGone runs `nacre up --mount` with its output
// into a pipe, closes the pipe's reader, sends sig to up's process group
// and checks that every target process and the mount are gone.
func upStopsOnSignalWithPipeGone(t *testing.T, sig syscall.Signal) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	mnt := filepath.Join(t.TempDir(), "m")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	up := exec.Command(bin, "up", "--dir", dir, "--osts", "1", "--mount", mnt)
	up.Stdout, up.Stderr = w, w
	// A process group of its own, as a shell gives a job: the group's
	// SIGINT below must not reach the test.
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan struct{})
	var upErr error
	go func() { upErr = up.Wait(); close(exited) }()
	var pids map[string]int
	mountPid := 0
	t.Cleanup(func() {
		// Whatever the test found, stop what is left by pid and unmount.
		select {
		case <-exited:
		default:
			up.Process.Kill()
			<-exited
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if mountPid > 0 {
			syscall.Kill(mountPid, syscall.SIGKILL)
		}
		localcluster.Down(dir, io.Discard)
		exec.Command("fusermount3", "-u", "-z", mnt).Run()
		r.Close()
	})

	ready := make(chan []string, 1)
	go func() {
		var lines []string
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), "Press Ctrl-C") {
				break
			}
		}
		ready <- lines
	}()
	var lines []string
	select {
	case lines = <-ready:
	case <-time.After(90 * time.Second):
		t.Fatal("nacre up --mount was not ready within 90 s")
	}
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "Press Ctrl-C") {
		t.Fatalf("nacre up --mount did not get ready; it printed:\n%s", strings.Join(lines, "\n"))
	}
	pids = servingPids(t, dir)
	if len(pids) != 3 {
		t.Fatalf("want 3 target processes (MGS, MDT, OST), got %v", pids)
	}
	if !inProcMounts(t, mnt) {
		t.Fatalf("%s is not in /proc/mounts after up --mount", mnt)
	}
	if rec, err := fusefs.ReadRecord(mountState(), mnt); err == nil {
		mountPid = rec.Pid
	}

	// tee is gone: nothing reads up's output any more.
	r.Close()
	if err := syscall.Kill(-up.Process.Pid, sig); err != nil {
		t.Fatalf("%v to the process group of nacre up: %v", sig, err)
	}
	select {
	case <-exited:
	case <-time.After(40 * time.Second):
		t.Fatalf("nacre up did not end within 40 s of %v", sig)
	}
	if ws, ok := up.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Errorf("nacre up was killed by %v after %v (%v), not ended by itself", ws.Signal(), sig, upErr)
	}
	for name, pid := range pids {
		if !wait.Poll(5*time.Second, func() bool { return processGone(pid) }) {
			t.Errorf("%s (pid %d), started by nacre up, still runs after its %v", name, pid, sig)
		}
	}
	if !wait.Poll(5*time.Second, func() bool { return !inProcMounts(t, mnt) }) {
		t.Errorf("%s, mounted by nacre up, is still in /proc/mounts after its %v", mnt, sig)
	}
	if mountPid > 0 && !wait.Poll(5*time.Second, func() bool { return !fusefs.Alive(mountPid) }) {
		t.Errorf("the mount daemon (pid %d) still runs after nacre up's %v", mountPid, sig)
	}
}

// inProcMounts says whether dir is a mount point in /proc/mounts.
func inProcMounts(t *testing.T, dir string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/mounts")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == dir {
			return true
		}
	}
	return false
}

// TestUpRefusesAClusterAnotherUpSupervises: a second `nacre up` on the
// directory of a cluster that a first one supervises took the cluster
// over, and its Ctrl-C stopped every target (and removed the mount the
// first one's terminal used). It is refused now, naming the first one's
// pid. Once the first is killed (SIGKILL: no cleanup of its own), a new
// up starts the targets that are not running, supervises the cluster,
// and stops all of it on Ctrl-C.
func TestUpRefusesAClusterAnotherUpSupervises(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	first, stdout, lines := upForeground(t, bin, dir)
	firstExited := make(chan struct{})
	go func() { first.Wait(); close(firstExited) }()
	t.Cleanup(func() {
		select {
		case <-firstExited:
		default:
			first.Process.Kill()
			<-firstExited
		}
	})
	go io.Copy(io.Discard, stdout)
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "Press Ctrl-C") {
		t.Fatalf("the first nacre up did not get ready; it printed:\n%s", strings.Join(lines, "\n"))
	}
	before := servingPids(t, dir)
	if len(before) != 3 {
		t.Fatalf("want 3 target processes (MGS, MDT, OST), got %v", before)
	}

	for _, args := range [][]string{{"--detach"}, {}} {
		second := exec.Command(bin, append([]string{"up", "--dir", dir}, args...)...)
		done := make(chan struct{})
		var out []byte
		var err error
		go func() { out, err = second.CombinedOutput(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			second.Process.Kill()
			<-done
			t.Fatalf("nacre up %v on a supervised cluster was still running after 30 s:\n%s", args, out)
		}
		want := fmt.Sprintf("another `nacre up` (pid %d) supervises the cluster in %s", first.Process.Pid, dir)
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("nacre up %v on a supervised cluster: %v\n%s\nwant a refusal containing %q", args, err, out, want)
		}
	}
	stillServing(t, dir, before, "after the refused ups")
	select {
	case <-firstExited:
		t.Fatal("the first nacre up ended when the second was refused")
	default:
	}

	syscall.Kill(first.Process.Pid, syscall.SIGKILL)
	<-firstExited
	stillServing(t, dir, before, "after the supervising up was killed")
	// A dead target too, for the new up to start again.
	killTarget(t, filepath.Join(dir, "ost0"), syscall.SIGKILL)

	next, stdout, lines := upForeground(t, bin, dir)
	nextExited := make(chan error, 1)
	go func() { nextExited <- next.Wait() }()
	t.Cleanup(func() { next.Process.Kill() })
	go io.Copy(io.Discard, stdout)
	if len(lines) == 0 || !strings.Contains(lines[len(lines)-1], "Press Ctrl-C") {
		t.Fatalf("nacre up after the supervising one was killed did not get ready; it printed:\n%s", strings.Join(lines, "\n"))
	}
	now := servingPids(t, dir)
	if now["ost0"] == 0 || now["ost0"] == before["ost0"] {
		t.Errorf("ost0 was not started again: pid %d before, %d now", before["ost0"], now["ost0"])
	}
	delete(before, "ost0")
	stillServing(t, dir, before, "after the new up adopted the cluster")

	next.Process.Signal(syscall.SIGINT)
	select {
	case err := <-nextExited:
		if err != nil {
			t.Errorf("the new nacre up exited with %v after Ctrl-C", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the new nacre up did not end within 40 s of Ctrl-C")
	}
	for name, pid := range now {
		if !wait.Poll(5*time.Second, func() bool { return processGone(pid) }) {
			t.Errorf("%s (pid %d) still runs after the new up's Ctrl-C", name, pid)
		}
	}
}
