package itest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/fusefs"
	"nacre/internal/localcluster"
	"nacre/internal/target"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestUpCtrlCStopsAndRestartKeepsData runs `nacre up` in the foreground
// as a user would, stores a file, stops it with SIGINT (Ctrl-C), checks
// every target process is gone, and brings the same directory up again
// (detached) to read the file back.
func TestUpCtrlCStopsAndRestartKeepsData(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	up, stdout, lines := upForeground(t, bin, dir)
	mgs := ""
	for _, line := range lines {
		if strings.HasPrefix(line, "  export NACRE_MGS=") {
			mgs = strings.TrimPrefix(line, "  export NACRE_MGS=")
		}
	}
	if mgs == "" {
		up.Process.Kill()
		t.Fatal("nacre up did not print the MGS address")
	}
	go io.Copy(io.Discard, stdout)
	run := func(args ...string) string {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "NACRE_MGS="+mgs)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("nacre %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	src := filepath.Join(t.TempDir(), "f")
	os.WriteFile(src, []byte("kept across restarts\n"), 0o644)
	run("put", src, "/f")
	pids := map[string]int{}
	dirs, _ := localcluster.Dirs(dir)
	for _, d := range dirs {
		pid, err := proc.ReadPid(d)
		if err != nil {
			t.Fatal(err)
		}
		pids[d] = pid
	}
	up.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- up.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("nacre up exited with %v after Ctrl-C", err)
		}
	case <-time.After(30 * time.Second):
		up.Process.Kill()
		t.Fatal("nacre up did not stop after Ctrl-C")
	}
	for d, pid := range pids {
		if proc.Running(pid) {
			t.Fatalf("%s (pid %d) still running after Ctrl-C", filepath.Base(d), pid)
		}
	}
	out, err := exec.Command(bin, "up", "--dir", dir, "--detach").CombinedOutput()
	if err != nil {
		t.Fatalf("second up: %v\n%s", err, out)
	}
	lines = strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	if last != "NACRE_MGS="+mgs {
		t.Fatalf("detached up must end with NACRE_MGS=%s (same MGS as before), got %q", mgs, last)
	}
	if got := run("cat", "/f"); got != "kept across restarts\n" {
		t.Fatalf("after restart: %q", got)
	}
	if out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput(); err != nil || !strings.Contains(string(out), "stopped") {
		t.Fatalf("down: %v %s", err, out)
	}
}

// TestStatusShowsDeadTargetDown kills an OST and waits for the MGS to
// report it down, then brings it back.
func TestStatusShowsDeadTargetDown(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	cl.Kill("ost1", syscall.SIGKILL)
	wait.NoErr(t, 15*time.Second, "the MGS to count OST0001 down", func() error {
		// The MGS's own view (nacre status also checks the pid, and says
		// down at once: TestCLIStatusShowsADeadPid).
		cfg, err := c.Config(context.Background())
		if err != nil {
			t.Fatalf("configuration: %v", err)
		}
		state := ""
		for _, ti := range cfg.Targets {
			if ti.Kind == pb.TargetKind_TARGET_OST && ti.Index == 1 {
				state = ti.State
			}
		}
		if state != "down" {
			return fmt.Errorf("OST0001 is %q", state)
		}
		return nil
	})
	// Files can still be created: the MDS skips the dead OST.
	// The MDS follows the MGS's view within a second or two.
	i := 0
	wait.NoErr(t, 10*time.Second, "wide files to leave out OST0001", func() error {
		name := "/wide" + itoa(i)
		i++
		out, err := cl.Run("setstripe", "-c", "-1", name)
		if err != nil {
			t.Fatalf("create with an OST down: %v %s", err, out)
		}
		var gs cli.StripeJSON
		out, _ = cl.Run("getstripe", "--json", name)
		json.Unmarshal([]byte(out), &gs)
		if gs.StripeCount != 1 || gs.Objects[0].OST != 0 {
			return fmt.Errorf("they get %+v", gs)
		}
		return nil
	})
	cl.Restart()
}

// TestUpInTheForegroundEndsWhenDownStopsItsCluster: `nacre up` (as
// scripts/up.sh runs it) used to wait for a Ctrl-C forever after `nacre
// down --dir` from another terminal had stopped every target; it now
// notices and exits with status 0. Down waits for it to end, so that an
// up right after down is not refused as one on a supervised cluster.
func TestUpInTheForegroundEndsWhenDownStopsItsCluster(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	up, stdout, lines := upForeground(t, bin, dir)
	rest := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(stdout)
		rest <- string(b)
	}()
	out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput()
	if err != nil {
		up.Process.Kill()
		t.Fatalf("down: %v %s", err, out)
	}
	if want := fmt.Sprintf("nacre up (pid %d) on %s has ended", up.Process.Pid, dir); !strings.Contains(string(out), want) {
		t.Errorf("down did not wait for the up that supervised the cluster; it said:\n%s\nwant %q", out, want)
	}
	if out, err := exec.Command(bin, "up", "--dir", dir, "--detach").CombinedOutput(); err != nil {
		t.Errorf("up right after down: %v\n%s", err, out)
	}
	done := make(chan error, 1)
	go func() { done <- up.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("nacre up exited with %v after nacre down", err)
		}
	case <-time.After(10 * time.Second):
		up.Process.Kill()
		t.Fatalf("nacre up still waits 10 s after nacre down stopped its cluster; it printed:\n%s", strings.Join(lines, "\n"))
	}
	if out := <-rest; !strings.Contains(out, "every target process of "+dir+" has exited") {
		t.Errorf("nacre up ended saying %q", out)
	}
}

// upForeground starts `nacre up` in the foreground on dir, as a user (or
// scripts/up.sh) would, and returns it with its standard output and the
// lines it printed up to "Press Ctrl-C", once the cluster is ready. The
// cluster is stopped when the test ends.
func upForeground(t *testing.T, bin, dir string) (*exec.Cmd, io.Reader, []string) {
	t.Helper()
	t.Cleanup(func() { localcluster.Down(dir, io.Discard) })
	up := exec.Command(bin, "up", "--dir", dir, "--osts", "1")
	stdout, _ := up.StdoutPipe()
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), "Press Ctrl-C") {
			break
		}
	}
	return up, stdout, lines
}

// TestUpGrowsARunningClusterOntoNewDevices: `nacre up --osts N` on a
// running cluster formats and starts the OSTs it lacks, on the device
// mounted at a new OST's directory (empty, as XFS's is); a bare directory
// with no device on it is refused with the commands that work, and they
// do.
func TestUpGrowsARunningClusterOntoNewDevices(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	if out, err := upDetached(t, bin, dir, "--osts", "1"); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	ost1 := filepath.Join(dir, "ost1")
	if err := os.Mkdir(ost1, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=512m", "tmpfs", ost1).CombinedOutput(); err != nil {
		t.Fatalf("mount a device for ost1: %v %s", err, out)
	}
	t.Cleanup(func() {
		localcluster.Down(dir, io.Discard) // the OST's process first
		if out, err := exec.Command("umount", ost1).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", ost1, err, out)
		}
	})
	if out, err := upDetached(t, bin, dir, "--osts", "2"); err != nil || !strings.Contains(out, "1 MDT, 2 OSTs") {
		t.Fatalf("up --osts 2 with a device mounted at ost1: %v\n%s", err, out)
	}
	if _, ok := servingPids(t, dir)["ost1"]; !ok {
		t.Fatal("the new OST does not run")
	}

	ost2 := filepath.Join(dir, "ost2")
	if err := os.Mkdir(ost2, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := upDetached(t, bin, dir, "--osts", "3")
	format := "nacre format --type ost --index 2 --fsname nacre --mgsnode "
	if err == nil || !strings.Contains(out, "no device is mounted on it") || !strings.Contains(out, format) {
		t.Fatalf("up --osts 3 with a bare ost2: want a refusal naming `%s...`, got %v\n%s", format, err, out)
	}
	// The command it names, as it names it.
	i := strings.Index(out, format)
	cmdline := out[i+len("nacre ") : i+strings.Index(out[i:], "`")]
	if out, err := exec.Command(bin, strings.Fields(cmdline)...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, out)
	}
	if out, err := upDetached(t, bin, dir, "--osts", "3"); err != nil || !strings.Contains(out, "1 MDT, 3 OSTs") {
		t.Fatalf("up --osts 3 after the format it named: %v\n%s", err, out)
	}
}

// TestUpFormatsIntoEmptyTargetDirectories: a new cluster directory may
// hold empty directories named as its targets, the mount points of
// devices an admin made for them (an empty lost+found, as a fresh ext4
// has, included); `nacre up` formats into them, leaves an extra one
// alone, and still refuses a directory with anything else in it.
func TestUpFormatsIntoEmptyTargetDirectories(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	for _, d := range []string{"ost0", "ost1/lost+found", "ost7"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { localcluster.Down(dir, io.Discard) })
	out, err := exec.Command(bin, "up", "--dir", dir, "--osts", "2", "--detach").CombinedOutput()
	if err != nil {
		t.Fatalf("up with empty target directories: %v\n%s", err, out)
	}
	for _, d := range []string{"ost0", "ost1"} {
		id, err := target.Load(filepath.Join(dir, d))
		if err != nil || id.Kind != target.OST {
			t.Errorf("%s was not formatted as an OST: %v %+v", d, err, id)
		}
	}
	if !target.Empty(filepath.Join(dir, "ost7")) {
		t.Errorf("ost7, beyond --osts 2, was touched")
	}
	if n := localcluster.Running(dir); n != 4 {
		t.Errorf("%d target processes run, want 4 (MGS, MDT, 2 OSTs)", n)
	}

	// After a reboot whose mount of ost1's device failed, ost1 is a bare
	// directory: up must say so, not start without it or format a new
	// OST in its place.
	if out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	hidden := filepath.Join(t.TempDir(), "ost1-device")
	if err := os.Rename(filepath.Join(dir, "ost1"), hidden); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "ost1"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "up", "--dir", dir, "--detach").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "ost1 is empty") || !strings.Contains(string(out), "mount the device first") {
		t.Fatalf("up with ost1's device not mounted: want a refusal naming it, got %v\n%s", err, out)
	}
	if !target.Empty(filepath.Join(dir, "ost1")) {
		t.Fatal("up wrote into the bare mount point of ost1")
	}
	// An empty mgs directory (its device's mount point) in a new cluster
	// is fine too.
	fresh := t.TempDir()
	if err := os.Mkdir(filepath.Join(fresh, "mgs"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { localcluster.Down(fresh, io.Discard) })
	if out, err := exec.Command(bin, "up", "--dir", fresh, "--detach").CombinedOutput(); err != nil {
		t.Fatalf("up of a new cluster with an empty mgs directory: %v\n%s", err, out)
	}

	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, "ost0"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "ost0", "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(bin, "up", "--dir", other, "--detach").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "ost0 is in the way") {
		t.Fatalf("up on a directory whose ost0 holds a file: want a refusal naming it, got %v\n%s", err, out)
	}
	if n := localcluster.Running(other); n != 0 {
		t.Errorf("%d processes started for a refused directory", n)
	}
}

// TestUpAndDownIgnoreAPidFileOfAnotherProcess: after a reboot (a power
// cut) a target's serve.pid may name a pid that now belongs to another
// program. `nacre up` took such a target for running and skipped it, and
// `nacre down` sent that program SIGTERM. Now both look at what the
// process runs.
func TestUpAndDownIgnoreAPidFileOfAnotherProcess(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	t.Cleanup(func() { localcluster.Down(dir, io.Discard) })
	if out, err := exec.Command(bin, "up", "--dir", dir, "--detach").CombinedOutput(); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	stranger := exec.Command("sleep", "120")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stranger.Process.Kill(); stranger.Wait() })
	if err := os.WriteFile(filepath.Join(dir, "ost1", proc.PidFile), []byte(strconv.Itoa(stranger.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	if out, err := exec.Command(bin, "up", "--dir", dir, "--detach").CombinedOutput(); err != nil {
		t.Fatalf("up with a stale pid file: %v\n%s", err, out)
	}
	pid, ok := proc.Serving(filepath.Join(dir, "ost1"))
	if !ok || pid == stranger.Process.Pid {
		t.Fatalf("OST0001 was not started: serving %v, pid %d (the stranger is %d)", ok, pid, stranger.Process.Pid)
	}
	// Its pid file is the stranger's again: down must not signal it.
	if err := os.WriteFile(filepath.Join(dir, "ost1", proc.PidFile), []byte(strconv.Itoa(stranger.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exec.Command(bin, "down", "--dir", dir).CombinedOutput()
	if err := stranger.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("down signalled the process its stale pid file named: %v", err)
	}
	// The real OST process is still ours to stop.
	syscall.Kill(pid, syscall.SIGTERM)
}

// TestUpMountsAgainOverItsDeadMount: after a power cut (every server and
// the mount daemon killed at once) the cluster's mount point is a dead
// FUSE mount ("transport endpoint is not connected"). `nacre mount` there
// says what it is and how to free it; `nacre up --mount` at the mount
// point this cluster recorded removes it and mounts again. It failed with
// "mkdir M: file exists" and stopped the cluster it had just started.
func TestUpMountsAgainOverItsDeadMount(t *testing.T) {
	bin, dir, mnt := upMounted(t, "before the cut\n")
	rec, err := fusefs.ReadRecord(mountState(), mnt)
	if err != nil {
		t.Fatalf("the mount daemon's record: %v", err)
	}
	victims := []int{rec.Pid}
	dirs, _ := localcluster.Dirs(dir)
	for _, d := range dirs {
		if pid, ok := proc.Serving(d); ok {
			victims = append(victims, pid)
		}
	}
	for _, pid := range victims {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	wait.Poll(10*time.Second, func() bool {
		return !slices.ContainsFunc(victims, fusefs.Alive)
	})
	// At once, while the kernel still holds the mount point's attributes
	// (stat answers from them for a second after the daemon died).
	out, err := exec.Command(bin, "mount", "--mgs", "127.0.0.1:1", mnt).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "dead mount") || !strings.Contains(string(out), "nacre umount "+mnt) {
		t.Errorf("nacre mount on a dead mount: want it named with the fix, got %v\n%s", err, out)
	}
	wait.NoErr(t, 1500*time.Millisecond, "the mount point to be dead (ENOTCONN) once the kernel's attributes expire", func() error {
		if _, err := os.Stat(mnt); !errors.Is(err, syscall.ENOTCONN) {
			return fmt.Errorf("stat says %v", err)
		}
		return nil
	})

	out, err = exec.Command(bin, "up", "--dir", dir, "--detach", "--mount", mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("up --mount over its dead mount: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(mnt, "kept"))
	if err != nil || string(b) != "before the cut\n" {
		t.Fatalf("after the restart, kept reads %q, %v", b, err)
	}
}

// TestStatusWithTheMGSDownListsTheLocalProcesses: after a power cut the
// MGS may be the one process not running; `nacre status --dir` then says
// which target processes of the directory run and how to start the rest,
// not only that the MGS does not answer.
func TestStatusWithTheMGSDownListsTheLocalProcesses(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	mdtPid := cl.Pid("mdt0")
	cl.Kill("mgs", syscall.SIGKILL)
	out, err := exec.Command(cl.Bin, "status", "--dir", cl.Dir).CombinedOutput()
	if err == nil {
		t.Fatalf("status with the MGS down succeeded:\n%s", out)
	}
	for _, want := range []string{"does not answer", "mgs        not running", fmt.Sprintf("mdt0       running (pid %d)", mdtPid), "up --dir " + cl.Dir} {
		if !strings.Contains(string(out), want) {
			t.Errorf("status output lacks %q:\n%s", want, out)
		}
	}
	// With --json, standard output holds a document with the same.
	cmd := exec.Command(cl.Bin, "status", "--dir", cl.Dir, "--json")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Run(); err == nil {
		t.Fatal("status --json with the MGS down succeeded")
	}
	var doc struct {
		Error     string                      `json:"error"`
		Processes []localcluster.ProcessState `json:"processes"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("status --json with the MGS down: %v\n%s", err, stdout.String())
	}
	running := map[string]int{}
	for _, p := range doc.Processes {
		if p.Running {
			running[p.Target] = p.Pid
		}
	}
	if !strings.Contains(doc.Error, "does not answer") || running["mdt0"] != mdtPid || running["mgs"] != 0 || len(doc.Processes) != 4 {
		t.Errorf("status --json with the MGS down: %+v", doc)
	}
}
