// Package testcluster starts real Nacre clusters for tests: the nacre
// binary is built once per test process, every target runs as its own
// process on loopback (internal/localcluster), and the cluster is stopped
// by pid when the test ends, pass or fail.
package testcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacre/internal/client"
	"nacre/internal/localcluster"
	"nacre/internal/pki"
	"nacre/internal/target/proc"
	"nacre/test/wait"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Binary builds cmd/nacre once and returns its path.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "nacre-testbin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "nacre")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/nacre")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/nacre: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("tests must run inside the nacre module")
	}
	return filepath.Dir(mod), nil
}

// Options configure Start.
type Options struct {
	OSTs int // default 2
	// MDTs is the number of MDTs (default 1): "mdt0", "mdt1"...
	MDTs int
	// Replicas of the MGS and of each MDT (default 1): the targets are
	// then "mgs-r1".. and "mdt0-r1".., "mdt1-r1"...
	Replicas int
	// Env is added to the environment of every target process.
	Env []string
	// Dir is an empty directory for the cluster (default: a new
	// temporary one).
	Dir string
	// TLS makes every link TLS (nacre up --tls): Client and Run use the
	// cluster's admin credentials.
	TLS bool
}

// Cluster is a running test cluster.
type Cluster struct {
	t   testing.TB
	Dir string
	MGS string
	Bin string
	// TLSDir and TLS are the admin credentials of a cluster with TLS
	// (Options.TLS).
	TLSDir string
	TLS    *pki.Creds
}

// Start brings up a cluster in a fresh directory; it is stopped (by pid)
// when the test ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.OSTs == 0 {
		o.OSTs = 2
	}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	c := &Cluster{t: t, Dir: o.Dir, Bin: Binary(t)}
	t.Cleanup(c.Stop)
	for _, kv := range o.Env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v) // inherited by the target processes
	}
	lc, err := localcluster.Up(context.Background(), localcluster.Options{Dir: c.Dir, OSTs: o.OSTs, MDTs: o.MDTs, Binary: c.Bin, Out: io.Discard, ReadyTimeout: 60 * time.Second, Replicas: o.Replicas, ExitWithParent: true, TLS: o.TLS})
	if err != nil {
		c.dumpLogs()
		t.Fatalf("start cluster: %v", err)
	}
	c.MGS, c.TLSDir, c.TLS = lc.MGS, lc.TLSDir, lc.TLS
	return c
}

// Adopt takes over the cluster that another binary runs in dir with its
// MGS at mgs (an earlier release's `nacre up --detach`, in the upgrade
// tests): it is stopped (by pid) when the test ends, and Restart starts
// what is not running with Bin, this tree's build unless the test sets
// another.
func Adopt(t testing.TB, dir, mgs string) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Dir: dir, MGS: mgs, Bin: Binary(t)}
	t.Cleanup(c.Stop)
	return c
}

// Stop stops every target process.
func (c *Cluster) Stop() {
	if c.t.Failed() {
		c.dumpLogs()
	}
	localcluster.Down(c.Dir, io.Discard)
}

func (c *Cluster) dumpLogs() {
	dirs, _ := localcluster.Dirs(c.Dir)
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, proc.LogFile))
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		c.t.Logf("--- %s (last lines)\n%s", filepath.Base(d), strings.Join(lines, "\n"))
	}
}

// Client connects a new client; it is closed when the test ends.
func (c *Cluster) Client(t testing.TB) *client.Client {
	t.Helper()
	cl, err := client.New(context.Background(), client.Config{MGS: c.MGS, Timeout: 60 * time.Second, TLS: c.TLS})
	if err != nil {
		t.Fatalf("connect client: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// TargetDir is the directory of a target: "mgs", "mdt0", "ost1", ...
func (c *Cluster) TargetDir(name string) string { return filepath.Join(c.Dir, name) }

// Pid is the pid serving a target. A target process rewrites the pid
// file its starter wrote (the same pid) as it starts, and Restart does not
// wait for MGS replicas to get that far: a read between the two writes
// finds the file empty, and is made again.
func (c *Cluster) Pid(name string) int {
	var pid int
	var err error
	if !wait.Poll(5*time.Second, func() bool { pid, err = proc.ReadPid(c.TargetDir(name)); return err == nil }) {
		c.t.Fatalf("pid of %s: %v", name, err)
	}
	return pid
}

// Kill sends sig to a target's process and waits until it is gone.
func (c *Cluster) Kill(name string, sig syscall.Signal) {
	pid := c.Pid(name)
	if err := syscall.Kill(pid, sig); err != nil {
		c.t.Fatalf("kill %s (pid %d): %v", name, pid, err)
	}
	if !wait.Poll(15*time.Second, func() bool { return !proc.Running(pid) }) {
		c.t.Fatalf("%s (pid %d) still alive after signal %v", name, pid, sig)
	}
}

// Restart starts every target that is not running and waits until the
// cluster is ready again.
func (c *Cluster) Restart() {
	c.t.Helper()
	if _, err := localcluster.Up(context.Background(), localcluster.Options{Dir: c.Dir, Binary: c.Bin, Out: io.Discard, ReadyTimeout: 60 * time.Second, ExitWithParent: true}); err != nil {
		c.dumpLogs()
		c.t.Fatalf("restart cluster: %v", err)
	}
}

// Run runs the nacre binary with NACRE_MGS set and returns its output.
func (c *Cluster) Run(args ...string) (string, error) {
	cmd := exec.Command(c.Bin, args...)
	cmd.Env = append(os.Environ(), "NACRE_MGS="+c.MGS)
	if c.TLSDir != "" {
		cmd.Env = append(cmd.Env, "NACRE_TLS_DIR="+c.TLSDir)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
