package itest

import (
	"io"
	"net/url"
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

// TestUpMountsAgainRightAfterItsMountDaemonDied: TestUpMountsAgainOver-
// ItsDeadMount without the wait. For a second after the mount daemon was
// killed, `nacre up --mount M` said "M is already a mount point" while
// `ls M` said "transport endpoint is not connected": it judged the mount
// by stat(2), which the kernel answers from its attribute cache. Here the
// mount point's attributes are fresh when the daemon is killed, and up
// runs at once; the servers keep running, so it gets to the mount in
// well under that second. Running up again on the working mount is no
// error.
func TestUpMountsAgainRightAfterItsMountDaemonDied(t *testing.T) {
	bin, dir, mnt := upMounted(t, "before the kill\n")
	before := servingPids(t, dir)
	rec, err := fusefs.ReadRecord(mountState(), mnt)
	if err != nil {
		t.Fatalf("the mount daemon's record: %v", err)
	}

	// Fill the kernel's attribute cache of the mount point, then kill.
	if _, err := os.Stat(mnt); err != nil {
		t.Fatal(err)
	}
	syscall.Kill(rec.Pid, syscall.SIGKILL)
	wait.Poll(10*time.Second, func() bool { return !fusefs.Alive(rec.Pid) })
	if _, err := os.Stat(mnt); err == nil {
		t.Logf("right after the kill, stat(2) of the dead mount point still succeeds (attribute cache)")
	}
	start := time.Now()
	out, err := exec.Command(bin, "up", "--dir", dir, "--detach", "--mount", mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("up --mount right after the mount daemon died (%.2fs): %v\n%s", time.Since(start).Seconds(), err, out)
	}
	if !strings.Contains(string(out), "unmounted "+mnt+" (its daemon was gone)") {
		t.Errorf("up did not say it replaced the dead mount:\n%s", out)
	}
	b, err := os.ReadFile(filepath.Join(mnt, "kept"))
	if err != nil || string(b) != "before the kill\n" {
		t.Fatalf("after the new mount, kept reads %q, %v", b, err)
	}
	stillServing(t, dir, before, "after up replaced the dead mount")

	out, err = exec.Command(bin, "up", "--dir", dir, "--detach", "--mount", mnt).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mounted at "+mnt+" already") {
		t.Errorf("up --mount on the cluster's working mount: %v\n%s", err, out)
	}
	stillServing(t, dir, before, "after up on the working mount")
}

// upMounted starts a local cluster with `nacre up --detach --mount` and
// writes kept into its file "kept"; the cluster is stopped and the mount
// removed at the end of the test.
func upMounted(t *testing.T, kept string) (bin, dir, mnt string) {
	t.Helper()
	needFUSE(t)
	bin = testcluster.Binary(t)
	dir = t.TempDir()
	mnt = filepath.Join(t.TempDir(), "m")
	t.Cleanup(func() {
		localcluster.Down(dir, io.Discard)
		exec.Command("fusermount3", "-u", "-z", mnt).Run()
	})
	if out, err := exec.Command(bin, "up", "--dir", dir, "--detach", "--mount", mnt).CombinedOutput(); err != nil {
		t.Fatalf("up --mount: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(mnt, "kept"), []byte(kept), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin, dir, mnt
}

// TestUpMountReplacesADeadMountMadeByNacreMount: after a power cut, the
// mount an admin made with `nacre mount` of this cluster is as dead as one
// up made, and `nacre up --mount` there replaced only the latter ("is a
// dead mount: unmount it first"). A live one of this cluster is kept.
func TestUpMountReplacesADeadMountMadeByNacreMount(t *testing.T) {
	needFUSE(t)
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	mnt := filepath.Join(t.TempDir(), "m")
	t.Cleanup(func() {
		localcluster.Down(dir, io.Discard)
		exec.Command("fusermount3", "-u", "-z", mnt).Run()
		// The daemons' logs in the state directory (each run's
		// mount point is new: they were left there, one per run).
		os.Remove(filepath.Join(mountState(), url.PathEscape(mnt)+".log"))
	})
	if out, err := exec.Command(bin, "up", "--dir", dir, "--detach").CombinedOutput(); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	mgs, err := localcluster.MGSAddr(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "mount", "--mgs", mgs, mnt).CombinedOutput(); err != nil {
		t.Fatalf("nacre mount: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(mnt, "kept"), []byte("kept\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "up", "--dir", dir, "--detach", "--mount", mnt).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "mounted at "+mnt+" already") {
		t.Errorf("up --mount on the live mount nacre mount made: %v\n%s", err, out)
	}
	rec, err := fusefs.ReadRecord(mountState(), mnt)
	if err != nil {
		t.Fatalf("the mount daemon's record: %v", err)
	}
	syscall.Kill(rec.Pid, syscall.SIGKILL)
	wait.Poll(10*time.Second, func() bool { return !fusefs.Alive(rec.Pid) })
	out, err = exec.Command(bin, "up", "--dir", dir, "--detach", "--mount", mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("up --mount over the dead mount nacre mount made: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "unmounted "+mnt+" (its daemon was gone)") {
		t.Errorf("up did not say it replaced the dead mount:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "kept")); err != nil || string(b) != "kept\n" {
		t.Fatalf("after the new mount, kept reads %q, %v", b, err)
	}
	// Now up's own: down unmounts it.
	if err := localcluster.Down(dir, io.Discard); err != nil {
		t.Fatal(err)
	}
	if _, ok := fusefs.FindMount(mnt); ok {
		t.Errorf("down left the mount up replaced at %s", mnt)
	}
}
