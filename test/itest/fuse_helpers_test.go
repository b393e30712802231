package itest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/fusefs"
	"nacre/test/testcluster"
)

// mountState is where the mount daemons the tests start record
// themselves, as the nacre binary finds it.
func mountState() string { return fusefs.StateDir(os.Getenv("XDG_RUNTIME_DIR")) }

// fuseMount is a Nacre mount served by a `nacre mount -f` child process:
// a test process never serves a FUSE mount it uses itself (go-fuse's
// same-process deadlock). It is unmounted, and its process stopped by
// pid, when the test ends, pass or fail.
type fuseMount struct {
	t   testing.TB
	Dir string
	Log string
	bin string
	cmd *exec.Cmd
	// exited is closed when the daemon process has been reaped.
	exited chan struct{}
}

// needFUSE skips tests on machines where FUSE mounts are impossible.
func needFUSE(t testing.TB) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("no /dev/fuse")
	}
	if os.Geteuid() != 0 {
		t.Skip("FUSE tests mount with mount(2) and need root")
	}
}

// mountFuse mounts cl at a new directory with extra mount options.
func mountFuse(t testing.TB, cl *testcluster.Cluster, opts ...string) *fuseMount {
	t.Helper()
	needFUSE(t)
	base := t.TempDir()
	// Let other users (the unprivileged-user tests) reach the mount.
	os.Chmod(base, 0o755)
	os.Chmod(filepath.Dir(base), 0o755)
	m := &fuseMount{t: t, Dir: filepath.Join(base, "mnt"), Log: filepath.Join(base, "mount.log"), bin: cl.Bin, exited: make(chan struct{})}
	if err := os.Mkdir(m.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{"mount", "--mgs", cl.MGS, m.Dir, "-f", "--log", m.Log}
	for _, o := range opts {
		args = append(args, "-o", o)
	}
	// O_APPEND like the daemon's own --log: with two offsets into one
	// file, stdout overwrote the log's first lines.
	logf, err := os.OpenFile(m.Log, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	m.cmd = exec.Command(cl.Bin, args...)
	m.cmd.Stdout, m.cmd.Stderr = logf, logf
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.cmd.Wait(); close(m.exited) }()
	t.Cleanup(m.cleanup)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := fusefs.FindMount(m.Dir); ok {
			return m
		}
		select {
		case <-m.exited:
			t.Fatalf("nacre mount exited before mounting:\n%s", m.tail())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("not mounted after 30 s:\n%s", m.tail())
		}
	}
}

// Pid is the mount daemon's pid.
func (m *fuseMount) Pid() int { return m.cmd.Process.Pid }

// Path joins a path inside the mount.
func (m *fuseMount) Path(elem ...string) string {
	return filepath.Join(append([]string{m.Dir}, elem...)...)
}

func (m *fuseMount) tail() string {
	b, _ := os.ReadFile(m.Log)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3000 {
		lines = lines[len(lines)-3000:]
	}
	return strings.Join(lines, "\n")
}

// Umount runs `nacre umount` with extra flags and waits for the daemon.
func (m *fuseMount) Umount(flags ...string) error {
	out, err := exec.Command(m.bin, append(append([]string{"umount"}, flags...), m.Dir)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("nacre umount: %v: %s", err, out)
	}
	select {
	case <-m.exited:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("mount daemon (pid %d) still running 30 s after umount", m.Pid())
	}
}

// Kill kills the mount daemon with SIGKILL and waits until it is gone.
func (m *fuseMount) Kill() {
	syscall.Kill(m.Pid(), syscall.SIGKILL)
	select {
	case <-m.exited:
	case <-time.After(30 * time.Second):
		m.t.Errorf("mount daemon (pid %d) survived SIGKILL", m.Pid())
	}
}

func (m *fuseMount) cleanup() {
	if m.t.Failed() {
		m.t.Logf("--- mount log %s (last lines)\n%s", m.Dir, m.tail())
	}
	select {
	case <-m.exited:
	default:
		if err := m.Umount(); err != nil {
			m.t.Logf("umount: %v; forcing", err)
			exec.Command(m.bin, "umount", "--force", m.Dir).Run()
			select {
			case <-m.exited:
			case <-time.After(10 * time.Second):
				syscall.Kill(m.Pid(), syscall.SIGKILL)
				<-m.exited
			}
		}
	}
	// A daemon that died (or was killed) may leave the mount point.
	if _, ok := fusefs.FindMount(m.Dir); ok {
		if err := fusefs.Umount(m.Dir, fusefs.UmountOptions{Force: true, Wait: 10 * time.Second, StateDir: mountState()}); err != nil {
			m.t.Errorf("free mount point %s: %v", m.Dir, err)
		}
	}
}

// mustOf is a test's "fail now on this error", for the many steps of a
// scenario through the mount.
func mustOf(t testing.TB) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// oneOSTMount starts a cluster of one OST, whose outages the mount
// reports after 2 s (NACRE_OST_DOWN_AFTER), and mounts it.
func oneOSTMount(t *testing.T) (*testcluster.Cluster, *fuseMount) {
	t.Helper()
	needFUSE(t)
	t.Setenv("NACRE_OST_DOWN_AFTER", "2s")
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	return cl, mountFuse(t, cl)
}
