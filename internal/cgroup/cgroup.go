// Package cgroup gives a process a CPU budget with a Linux control group
// (a cgroup): a quota of CPU time in every period, so that a process
// with a budget of 0.25 core runs at most 25 ms in each 100 ms, however
// idle the machine's cores are. A local cluster puts each target process
// in a cgroup of its own this way, so that its processes behave as nodes
// of their own instead of sharing every core.
//
// The kernel offers the cpu controller in one of two hierarchies:
//
//   - cgroup v2 (one unified tree; systemd's default, at /sys/fs/cgroup):
//     the quota is the cgroup's cpu.max, "QUOTA PERIOD" in µs ("max
//     PERIOD": none), and a cgroup has that file only when its parent
//     lists cpu in cgroup.subtree_control. A cgroup that holds processes
//     cannot give controllers to children (the root excepted), so the
//     cgroups are made under the hierarchy's root, which a container's
//     cgroup namespace may make a cgroup that holds processes: Create
//     then says so.
//   - cgroup v1 (a tree per controller, the cpu controller at
//     /sys/fs/cgroup/cpu or /sys/fs/cgroup/cpu,cpuacct): the quota is
//     cpu.cfs_quota_us per cpu.cfs_period_us (-1: none).
//
// Find looks for a writable v2 hierarchy that offers cpu first, then a
// v1 hierarchy with cpu, and says what it found of each when neither
// serves. A process joins a cgroup when its pid is written to the
// cgroup's cgroup.procs, which moves all of its threads; what it starts
// later is born there. A cgroup is removed with rmdir once no process is
// left in it (its control files go with it).
//
// The package reads the kernel's files under Options.Proc (/proc) and the
// hierarchies where the mount table there says they are, so that tests
// point it at a fake tree; ProcessCPU alone reads this machine's /proc.
package cgroup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"nacre/internal/mountinfo"
)

// Version is a cgroup hierarchy's version: 1 or 2.
type Version int

// The two versions.
const (
	V1 Version = 1
	V2 Version = 2
)

func (v Version) String() string { return fmt.Sprintf("cgroup v%d", int(v)) }

// Options say where the kernel's files are; the zero value is this
// machine's.
type Options struct {
	// Proc is where proc is mounted (default /proc): the hierarchies are
	// found in Proc/self/mountinfo, a process's cgroups in
	// Proc/PID/cgroup.
	Proc string
}

func (o Options) proc() string {
	if o.Proc == "" {
		return "/proc"
	}
	return o.Proc
}

// Hierarchy is a mounted cgroup hierarchy that holds the cpu controller.
type Hierarchy struct {
	Version Version
	// Dir is where it is mounted: /sys/fs/cgroup (v2),
	// /sys/fs/cgroup/cpu (v1).
	Dir string
	// root is the cgroup shown at Dir, as Proc/PID/cgroup names
	// cgroups: "/" unless the mount shows a subtree.
	root string
	opts Options
}

// Find finds the hierarchy that holds the cpu controller, mounted
// writable: a cgroup v2 one whose cgroup.controllers lists cpu, else a v1
// one with cpu among its controllers. Its error says what it found and
// why none serves.
func Find(o Options) (*Hierarchy, error) {
	mountsFile := filepath.Join(o.proc(), "self", "mountinfo")
	mounts, err := mountinfo.Read(mountsFile)
	if err != nil {
		return nil, fmt.Errorf("find the cgroup hierarchies: %w", err)
	}
	var why []string
	for _, m := range mounts {
		if m.FsType != "cgroup2" {
			continue
		}
		ctl, err := os.ReadFile(filepath.Join(m.Dir, "cgroup.controllers"))
		switch {
		case err != nil:
			why = append(why, fmt.Sprintf("cgroup v2 at %s: %v", m.Dir, err))
		case !hasWord(string(ctl), "cpu"):
			why = append(why, fmt.Sprintf("cgroup v2 at %s does not offer the cpu controller (its cgroup.controllers: %q; the cpu controller is bound to a v1 hierarchy, or not delegated here)",
				m.Dir, strings.TrimSpace(string(ctl))))
		case m.ReadOnly():
			why = append(why, fmt.Sprintf("cgroup v2 at %s is mounted read-only", m.Dir))
		default:
			return &Hierarchy{Version: V2, Dir: m.Dir, root: m.Root, opts: o}, nil
		}
	}
	for _, m := range mounts {
		if m.FsType != "cgroup" || !m.HasSuperOption("cpu") {
			continue
		}
		if m.ReadOnly() {
			why = append(why, fmt.Sprintf("cgroup v1 cpu at %s is mounted read-only", m.Dir))
			continue
		}
		return &Hierarchy{Version: V1, Dir: m.Dir, root: m.Root, opts: o}, nil
	}
	if len(why) == 0 {
		why = append(why, "no cgroup hierarchy is mounted (none in "+mountsFile+")")
	}
	return nil, fmt.Errorf("no writable cgroup cpu controller on this machine: %s. CPU budgets need the cpu controller of cgroup v2 (/sys/fs/cgroup on systemd hosts) or of cgroup v1, mounted read-write, and root; in a container, give it a writable cgroup mount (docker run --privileged --cgroupns=private)",
		strings.Join(why, "; "))
}

// Usable is Find, and then proves the hierarchy takes a new cgroup with
// a CPU budget by making one and removing it: one that is mounted
// writable may still refuse this user, or (cgroup v2) have processes in
// the cgroup that would hold the new ones.
func Usable(o Options) (*Hierarchy, error) {
	h, err := Find(o)
	if err != nil {
		return nil, err
	}
	g, err := h.Create(fmt.Sprintf("nacre-probe-%d", os.Getpid()), MinCores)
	if err != nil {
		return nil, err
	}
	if err := g.Remove(); err != nil {
		return nil, err
	}
	return h, nil
}

// hasWord says whether the blank-separated list s holds w.
func hasWord(s, w string) bool {
	for _, f := range strings.Fields(s) {
		if f == w {
			return true
		}
	}
	return false
}

// String names the hierarchy: "cgroup v1 at /sys/fs/cgroup/cpu".
func (h *Hierarchy) String() string { return fmt.Sprintf("%s at %s", h.Version, h.Dir) }

// Group is one cgroup of a hierarchy.
type Group struct {
	h *Hierarchy
	// Name is its path under the hierarchy's root, "nacre/c1/ost0" ("" is
	// the root itself).
	Name string
	// Dir is its directory.
	Dir string
}

// Group is the cgroup name of h, which may not exist.
func (h *Hierarchy) Group(name string) *Group {
	return &Group{h: h, Name: name, Dir: filepath.Join(h.Dir, filepath.FromSlash(name))}
}

// String names the cgroup by its directory.
func (g *Group) String() string { return g.Dir }

// Exists says whether the cgroup exists.
func (g *Group) Exists() bool {
	st, err := os.Stat(g.Dir)
	return err == nil && st.IsDir()
}

// checkName accepts a cgroup name: a relative slash-separated path
// without empty, "." or ".." parts.
func checkName(name string) error {
	if name == "" {
		return errors.New("a cgroup needs a name")
	}
	for _, p := range strings.Split(name, "/") {
		if p == "" || p == "." || p == ".." || strings.ContainsAny(p, "\n") {
			return fmt.Errorf("cgroup name %q: use a relative path of plain names, such as nacre/c1/ost0", name)
		}
	}
	return nil
}

// Create makes the cgroup name of h (and the cgroups above it that are
// missing) and gives it a budget of cores (0: none). A cgroup that
// exists already is used as it is, with the new budget: a target started
// again goes back to its own. On failure it removes what it made.
func (h *Hierarchy) Create(name string, cores float64) (_ *Group, err error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	var made []string
	defer func() {
		if err != nil {
			for i := len(made) - 1; i >= 0; i-- {
				os.Remove(made[i])
			}
		}
	}()
	dir := h.Dir
	for _, p := range strings.Split(name, "/") {
		if h.Version == V2 {
			if err := enableCPU(dir); err != nil {
				return nil, err
			}
		}
		dir = filepath.Join(dir, p)
		switch err := os.Mkdir(dir, 0o755); {
		case err == nil:
			made = append(made, dir)
		case errors.Is(err, fs.ErrExist):
		case errors.Is(err, fs.ErrPermission):
			return nil, fmt.Errorf("make cgroup %s: %w: run as root (or in a cgroup tree delegated to this user)", dir, err)
		default:
			return nil, fmt.Errorf("make cgroup %s: %w", dir, err)
		}
	}
	g := h.Group(name)
	if err := g.SetBudget(cores); err != nil {
		return nil, err
	}
	return g, nil
}

// enableCPU gives the cgroup v2 children of dir the cpu controller: its
// cgroup.subtree_control lists cpu, or is made to.
func enableCPU(dir string) error {
	f := filepath.Join(dir, "cgroup.subtree_control")
	b, err := os.ReadFile(f)
	if err != nil {
		return fmt.Errorf("read %s: %w", f, err)
	}
	if hasWord(string(b), "cpu") {
		return nil
	}
	err = writeFile(f, "+cpu")
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.EBUSY):
		return fmt.Errorf("give the cgroups under %s the cpu controller (write +cpu to %s): %w: that cgroup holds processes, and cgroup v2 gives controllers only to the children of a cgroup without processes of its own (a container's root cgroup is one such). Move its processes into a child cgroup first (mkdir %s/init, then write each pid of %s/cgroup.procs to %s/init/cgroup.procs), or run where the hierarchy's root gives cpu to its children",
			dir, f, err, dir, dir, dir)
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EINVAL):
		return fmt.Errorf("give the cgroups under %s the cpu controller (write +cpu to %s): %w: the cpu controller is not available there (not in its cgroup.controllers); enable it in its parent's cgroup.subtree_control", dir, f, err)
	}
	return fmt.Errorf("give the cgroups under %s the cpu controller (write +cpu to %s): %w", dir, f, err)
}

// writeFile writes s to an existing control file: the kernel makes them,
// and one that is missing means a controller is not enabled there.
func writeFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
