package cgroup

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Period is the length of the periods a budget is counted in (the
// kernel's default): a budget of c cores is c*Period of CPU time in each.
const Period = 100 * time.Millisecond

// MinCores is the smallest budget: the kernel's smallest quota is 1 ms
// per period.
const MinCores = 0.01

// CheckCores accepts a budget in cores: MinCores or more (0 is no
// budget).
func CheckCores(cores float64) error {
	if math.IsNaN(cores) || math.IsInf(cores, 0) || cores < 0 || (cores > 0 && cores < MinCores) {
		return fmt.Errorf("a CPU budget of %g cores: give %g cores or more (the kernel's smallest quota is 1 ms in each period of %s)", cores, MinCores, Period)
	}
	return nil
}

// SetBudget sets the cgroup's CPU quota to cores (0: none).
func (g *Group) SetBudget(cores float64) error {
	if err := CheckCores(cores); err != nil {
		return err
	}
	period := Period.Microseconds()
	quota := int64(math.Round(cores * float64(period)))
	var err error
	var file string
	switch g.h.Version {
	case V2:
		file = filepath.Join(g.Dir, "cpu.max")
		v := fmt.Sprintf("%d %d", quota, period)
		if cores == 0 {
			v = fmt.Sprintf("max %d", period)
		}
		err = writeFile(file, v)
	default:
		file = filepath.Join(g.Dir, "cpu.cfs_period_us")
		if err = writeFile(file, strconv.FormatInt(period, 10)); err == nil {
			file = filepath.Join(g.Dir, "cpu.cfs_quota_us")
			if cores == 0 {
				quota = -1
			}
			err = writeFile(file, strconv.FormatInt(quota, 10))
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("set the CPU budget of cgroup %s: %s is missing: the cpu controller is not enabled for this cgroup", g.Dir, filepath.Base(file))
	}
	if err != nil {
		return fmt.Errorf("set the CPU budget of cgroup %s to %g cores (write %s): %w", g.Dir, cores, file, err)
	}
	return nil
}

// Budget reads the cgroup's CPU quota in cores: 0 when it has none.
func (g *Group) Budget() (float64, error) {
	switch g.h.Version {
	case V2:
		b, err := os.ReadFile(filepath.Join(g.Dir, "cpu.max"))
		if errors.Is(err, fs.ErrNotExist) {
			return 0, nil // the root, or cpu not enabled here: no quota
		}
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) != 2 {
			return 0, fmt.Errorf("%s: %q is not QUOTA PERIOD", filepath.Join(g.Dir, "cpu.max"), b)
		}
		if f[0] == "max" {
			return 0, nil
		}
		return ratio(filepath.Join(g.Dir, "cpu.max"), f[0], f[1])
	default:
		q, err := os.ReadFile(filepath.Join(g.Dir, "cpu.cfs_quota_us"))
		if err != nil {
			return 0, err
		}
		p, err := os.ReadFile(filepath.Join(g.Dir, "cpu.cfs_period_us"))
		if err != nil {
			return 0, err
		}
		if strings.TrimSpace(string(q)) == "-1" {
			return 0, nil
		}
		return ratio(filepath.Join(g.Dir, "cpu.cfs_quota_us"), string(q), string(p))
	}
}

// ratio is quota/period in cores, both in µs.
func ratio(file, quota, period string) (float64, error) {
	q, err1 := strconv.ParseInt(strings.TrimSpace(quota), 10, 64)
	p, err2 := strconv.ParseInt(strings.TrimSpace(period), 10, 64)
	if err1 != nil || err2 != nil || p <= 0 {
		return 0, fmt.Errorf("%s: quota %q per period %q are not numbers of µs", file, strings.TrimSpace(quota), strings.TrimSpace(period))
	}
	return float64(q) / float64(p), nil
}

// Command is exec.Command(name, args...) run in the cgroup from its
// first instruction: a shell joins the cgroup (writes its own pid to
// cgroup.procs) and then execs the program, which keeps that pid. A
// process moved in after it started would have run outside its budget
// for a moment, and its runtime would not know the budget: Go's reads
// the cgroup it is in once, as it starts, to set GOMAXPROCS. If the join
// fails, the shell says so on its standard error and exits with status 1
// without running the program.
func (g *Group) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("/bin/sh", append([]string{"-c", joinScript, "nacre-cgroup-join", filepath.Join(g.Dir, "cgroup.procs"), name}, args...)...)
}

// joinScript is the shell of Command: $1 is the cgroup.procs file, the
// rest the program and its arguments.
const joinScript = `echo $$ > "$1" || { echo "cannot join cgroup ${1%/cgroup.procs} for its CPU budget: not starting $2" >&2; exit 1; }; shift; exec "$@"`

// Pids lists the processes in the cgroup.
func (g *Group) Pids() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(g.Dir, "cgroup.procs"))
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// removeWait bounds how long Remove waits for the processes of a cgroup
// to leave it: one that has just exited leaves a moment later.
const removeWait = 2 * time.Second

// Remove removes the cgroup, which must hold no process and no other
// cgroup; one that does not exist is not an error.
func (g *Group) Remove() error {
	deadline := time.Now().Add(removeWait)
	for {
		err := syscall.Rmdir(g.Dir)
		switch {
		case err == nil, errors.Is(err, syscall.ENOENT):
			return nil
		case errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond)
			continue
		case errors.Is(err, syscall.EBUSY):
			pids, _ := g.Pids()
			return fmt.Errorf("remove cgroup %s: %w: processes %v still run in it; stop them first", g.Dir, err, pids)
		}
		return fmt.Errorf("remove cgroup %s: %w", g.Dir, err)
	}
}

// RemoveTree removes the cgroup and every cgroup under it, the deepest
// first; none may hold a process.
func (g *Group) RemoveTree() error {
	var dirs []string
	err := filepath.WalkDir(g.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove cgroup %s: %w", g.Dir, err)
	}
	slices.Reverse(dirs) // WalkDir lists a directory before what it holds
	var errs []error
	for _, d := range dirs {
		sub := &Group{h: g.h, Dir: d, Name: strings.TrimPrefix(filepath.ToSlash(strings.TrimPrefix(d, g.h.Dir)), "/")}
		if err := sub.Remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// GroupOf is the cgroup of process pid in h, from Proc/PID/cgroup.
func (h *Hierarchy) GroupOf(pid int) (*Group, error) {
	file := filepath.Join(h.opts.proc(), strconv.Itoa(pid), "cgroup")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	path, ok := "", false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path; v2's is 0::PATH.
		id, rest, _ := strings.Cut(sc.Text(), ":")
		ctls, p, found := strings.Cut(rest, ":")
		if !found {
			continue
		}
		if (h.Version == V2 && id == "0" && ctls == "") || (h.Version == V1 && slices.Contains(strings.Split(ctls, ","), "cpu")) {
			path, ok = p, true
			break
		}
	}
	if !ok {
		return nil, fmt.Errorf("%s names no cgroup of the %s hierarchy", file, h.Version)
	}
	root := strings.TrimSuffix(h.root, "/")
	if path != root && !strings.HasPrefix(path, root+"/") {
		return nil, fmt.Errorf("process %d is in cgroup %s, outside the part of the hierarchy mounted at %s (%s)", pid, path, h.Dir, h.root)
	}
	return h.Group(strings.Trim(strings.TrimPrefix(path, root), "/")), nil
}
