// Package localcluster brings up and down a whole Nacre file system on one
// machine: an MGS, one MDT and N OSTs, each a separate `nacre serve`
// process on loopback, with their directories under one cluster directory:
//
//	D/mgs   D/mdt0   D/ost0 ... D/ostN-1
//
// Up formats what is new, starts every target, waits until the MGS reports
// all of them up and the MDT leads, and then either returns (detached) or
// waits for a signal and stops the processes. Down stops the processes of a
// cluster directory by the pids in their pid files.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/rpc"
	"nacre/internal/serve"
	"nacre/internal/target"
	"nacre/internal/version"
)

// Options configure Up.
type Options struct {
	Dir    string
	Fsname string // for a new cluster (default "nacre")
	// OSTs is the number of OSTs: a new cluster gets this many (default 2);
	// an existing one grows to it (never shrinks).
	OSTs int
	// Binary is the nacre executable to run the targets (default: this one).
	Binary string
	// Out receives progress lines for people.
	Out io.Writer
	// ReadyTimeout bounds the wait for every target (default 60 s).
	ReadyTimeout time.Duration
}

// Cluster describes a running local cluster.
type Cluster struct {
	Dir     string
	MGS     string
	Targets []Proc
}

// Proc is one target process.
type Proc struct {
	Name string
	Dir  string
	Pid  int
}

// Dirs lists the target directories of a cluster directory: mgs first,
// then mdts, then osts in index order.
func Dirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var mdts, osts []string
	hasMGS := false
	for _, e := range entries {
		n := e.Name()
		switch {
		case n == "mgs":
			hasMGS = true
		case strings.HasPrefix(n, "mdt"):
			mdts = append(mdts, n)
		case strings.HasPrefix(n, "ost"):
			osts = append(osts, n)
		}
	}
	if !hasMGS {
		return nil, fmt.Errorf("%s is not a local Nacre cluster (no mgs directory); create one with `nacre up --dir %s`", dir, dir)
	}
	byIndex := func(list []string, pfx string) {
		sort.Slice(list, func(i, j int) bool {
			var a, b int
			fmt.Sscanf(list[i], pfx+"%d", &a)
			fmt.Sscanf(list[j], pfx+"%d", &b)
			return a < b
		})
	}
	byIndex(mdts, "mdt")
	byIndex(osts, "ost")
	out := []string{filepath.Join(dir, "mgs")}
	for _, m := range append(mdts, osts...) {
		out = append(out, filepath.Join(dir, m))
	}
	return out, nil
}

// MGSAddr reads the MGS address of a cluster directory.
func MGSAddr(dir string) (string, error) {
	id, err := target.Load(filepath.Join(dir, "mgs"))
	if err != nil {
		return "", err
	}
	return id.Listen, nil
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// format creates the directories of a new cluster, or the OSTs an
// existing one lacks.
func format(o Options) error {
	mgsDir := filepath.Join(o.Dir, "mgs")
	var mgsID target.Identity
	if _, err := os.Stat(mgsDir); errors.Is(err, os.ErrNotExist) {
		if entries, err := os.ReadDir(o.Dir); err == nil && len(entries) > 0 {
			return fmt.Errorf("%s is not empty and holds no Nacre cluster; use an empty or new directory", o.Dir)
		}
		addr, err := freePort()
		if err != nil {
			return err
		}
		mgsID = target.Identity{Fsname: o.Fsname, Kind: target.MGS, Listen: addr}
		if err := target.Format(mgsDir, mgsID); err != nil {
			return err
		}
		if err := target.Format(filepath.Join(o.Dir, "mdt0"), target.Identity{Fsname: o.Fsname, Kind: target.MDT, Index: 0, MGSNode: addr, Listen: "127.0.0.1:0", DataListen: "127.0.0.1:0"}); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "formatted new file system %q in %s\n", o.Fsname, o.Dir)
	}
	mgsID, err := target.Load(mgsDir)
	if err != nil {
		return err
	}
	for i := 0; i < o.OSTs; i++ {
		d := filepath.Join(o.Dir, fmt.Sprintf("ost%d", i))
		if _, err := os.Stat(d); err == nil {
			continue
		}
		if err := target.Format(d, target.Identity{Fsname: mgsID.Fsname, Kind: target.OST, Index: uint32(i), MGSNode: mgsID.Listen, Listen: "127.0.0.1:0", DataListen: "127.0.0.1:0"}); err != nil {
			return err
		}
	}
	return nil
}

// Up formats (when new) and starts a cluster and waits until it is ready.
// The processes keep running after Up returns; stop them with Down.
func Up(ctx context.Context, o Options) (*Cluster, error) {
	if o.Fsname == "" {
		o.Fsname = "nacre"
	}
	if o.OSTs < 0 {
		return nil, fmt.Errorf("--osts %d: the number of OSTs must be at least 1", o.OSTs)
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Binary = exe
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := format(o); err != nil {
		return nil, err
	}
	dirs, err := Dirs(o.Dir)
	if err != nil {
		return nil, err
	}
	mgsAddr, err := MGSAddr(o.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: o.Dir, MGS: mgsAddr}
	for _, d := range dirs {
		id, err := target.Load(d)
		if err != nil {
			return nil, err
		}
		if pid, err := serve.ReadPid(d); err == nil && serve.Alive(pid) {
			c.Targets = append(c.Targets, Proc{Name: id.Label(), Dir: d, Pid: pid})
			continue
		}
		pid, err := start(o.Binary, d)
		if err != nil {
			Down(o.Dir, io.Discard)
			return nil, fmt.Errorf("start %s: %w", id.Label(), err)
		}
		c.Targets = append(c.Targets, Proc{Name: id.Label(), Dir: d, Pid: pid})
	}
	if err := waitReady(ctx, c, len(dirs)-1, o.ReadyTimeout); err != nil {
		return c, err
	}
	return c, nil
}

// start runs `nacre serve --dir d` in its own session, logging to d/serve.log.
func start(bin, d string) (int, error) {
	logf, err := os.OpenFile(filepath.Join(d, serve.LogFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--dir", d)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	// Reap the child if it exits while we run; its pid file tells Down.
	go cmd.Wait()
	return pid, nil
}

// waitReady waits until every target is up in the MGS and the MDT leads.
func waitReady(ctx context.Context, c *Cluster, want int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	cc, err := rpc.Dial(c.MGS)
	if err != nil {
		return err
	}
	defer cc.Close()
	m := pb.NewMGSClient(cc)
	var last string
	for time.Now().Before(deadline) {
		for _, p := range c.Targets {
			if !serve.Alive(p.Pid) || isZombie(p.Pid) {
				return fmt.Errorf("%s (pid %d) exited while starting; its log %s says:\n%s", p.Name, p.Pid,
					filepath.Join(p.Dir, serve.LogFile), tail(filepath.Join(p.Dir, serve.LogFile), 5))
			}
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		cfg, err := m.GetConfig(cctx, &pb.GetConfigRequest{})
		cancel()
		if err == nil {
			up, leader := 0, false
			for _, t := range cfg.Targets {
				if t.Kind != pb.TargetKind_TARGET_MGS && t.State == "up" {
					up++
					if t.Kind == pb.TargetKind_TARGET_MDT && t.Leader {
						leader = true
					}
				}
			}
			if up >= want && leader {
				return nil
			}
			last = fmt.Sprintf("%d of %d targets up, MDT leader: %v", up, want, leader)
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("cluster in %s not ready after %s (%s); see the serve.log files", c.Dir, timeout, last)
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && f[0] == "Z"
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// Down stops every target process of a cluster directory: OSTs and MDTs
// first, the MGS last; SIGTERM, then SIGKILL after 10 s.
func Down(dir string, out io.Writer) error {
	dirs, err := Dirs(dir)
	if err != nil {
		return err
	}
	order := append(dirs[1:], dirs[0])
	var pids []int
	var names []string
	for _, d := range order {
		pid, err := serve.ReadPid(d)
		if err != nil || !serve.Alive(pid) || isZombie(pid) {
			continue
		}
		syscall.Kill(pid, syscall.SIGTERM)
		pids = append(pids, pid)
		names = append(names, filepath.Base(d))
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, pid := range pids {
		for serve.Alive(pid) && !isZombie(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if serve.Alive(pid) && !isZombie(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			fmt.Fprintf(out, "%s (pid %d) did not stop in time; killed\n", names[i], pid)
		}
	}
	if len(pids) == 0 {
		fmt.Fprintf(out, "no target of %s was running\n", dir)
	} else {
		fmt.Fprintf(out, "stopped %d target processes of %s\n", len(pids), dir)
	}
	return nil
}

// Version is reported by `nacre up` for logs.
func Version() string { return version.Software }
