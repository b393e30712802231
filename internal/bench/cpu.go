package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"nacre/internal/cgroup"
	"nacre/internal/cli"
	"nacre/internal/fusefs"
	"nacre/internal/pki"
)

// Proc is a process whose CPU a benchmark counts: a target, a mount
// daemon, or the benchmark itself.
type Proc struct {
	Name string `json:"name"`
	Pid  int    `json:"pid"`
}

// CPUProbe reads the CPU time (user and system) that the processes of a
// run spend, from /proc, so that a phase reports its cost per operation in
// each (where a create's time goes: the mount daemon, the MDT, the OSTs).
// It sees the processes of this machine only.
type CPUProbe struct {
	Procs []Proc
}

// NewCPUProbe counts procs and this process (named "bench").
func NewCPUProbe(procs []Proc) *CPUProbe {
	all := append([]Proc(nil), procs...)
	all = append(all, Proc{Name: "bench", Pid: os.Getpid()})
	return &CPUProbe{Procs: all}
}

// sample returns each process's CPU seconds so far (a process that is
// gone or unreadable counts 0, and a phase then shows nothing for it).
func (p *CPUProbe) sample() []float64 {
	out := make([]float64, len(p.Procs))
	for i, pr := range p.Procs {
		if t, err := cgroup.ProcessCPU(pr.Pid); err == nil {
			out[i] = t.Seconds()
		}
	}
	return out
}

// perOp is the CPU µs per operation of each process between two samples,
// by name; processes that spent nothing are left out.
func (p *CPUProbe) perOp(before, after []float64, ops int) map[string]float64 {
	if ops == 0 {
		return nil
	}
	m := map[string]float64{}
	for i, pr := range p.Procs {
		if d := after[i] - before[i]; d > 0 {
			m[pr.Name] += d * 1e6 / float64(ops)
		}
	}
	return m
}

// FindProcs lists the processes of this machine that serve the cluster
// of mgs (its targets, as the MGS reports their pids) and, if path is on
// a Nacre mount, that mount's daemon and, when mgs is empty, the targets
// of the cluster it mounts (stateDir: where mount daemons record
// themselves).
func FindProcs(ctx context.Context, mgs, path, stateDir string, creds *pki.Creds) ([]Proc, error) {
	var procs []Proc
	if path != "" {
		if fp, err := cli.LocalPathEnv(stateDir).Resolve(path); err == nil && fp.Mount != "" {
			if r, err := fusefs.ReadRecord(stateDir, fp.Mount); err == nil && r.Pid > 0 && isNacre(r.Pid) {
				procs = append(procs, Proc{Name: "mount", Pid: r.Pid})
				if mgs == "" {
					mgs = r.MGS
				}
			}
		}
	}
	if mgs != "" {
		st, err := cli.GetStatus(ctx, mgs, creds)
		if err != nil {
			return nil, fmt.Errorf("find the cluster's processes: %w", err)
		}
		host, _ := os.Hostname()
		for _, t := range st.Targets {
			if t.Pid <= 0 || (t.Host != "" && t.Host != host) || !isNacre(int(t.Pid)) {
				continue
			}
			procs = append(procs, Proc{Name: strings.TrimPrefix(t.Name, st.Fsname+"-"), Pid: int(t.Pid)})
		}
	}
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].Name < procs[j].Name })
	return procs, nil
}

// isNacre reports whether pid runs the nacre binary (a pid from a stale
// report may belong to another program by now).
func isNacre(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	return len(args) > 0 && strings.HasPrefix(filepath.Base(args[0]), "nacre")
}
