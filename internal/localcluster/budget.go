package localcluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"nacre/internal/cgroup"
	"nacre/internal/target"
)

// CPU budgets (`nacre up --node-cpu`): each target process of a local
// cluster runs in a cgroup of its own with a CPU quota for its role, so
// that on one machine the targets behave as nodes of their own: eight
// OSTs on two cores get 0.15 core each and overlap their work, instead
// of taking the MDT's core.
//
// The cgroups are nacre/FSNAME-HASH/TARGET under the root of the
// hierarchy that holds the cpu controller (cgroup.Find): HASH comes from
// the cluster directory's absolute path, so two clusters on one machine,
// even of one name, never share one; TARGET is the target's directory
// name (mgs, mdt0, ost3, mdt0-r2). Every cgroup is made, with its quota,
// before the first process starts, and each process runs in its cgroup
// from its first instruction (a shell joins it and execs nacre serve), so
// no target runs without its budget, and the Go runtime of nacre serve,
// which reads its cgroup's quota once as it starts, sets GOMAXPROCS from
// it (the quota rounded up, at least 2) and not from the machine's cores.
// A target started again (a restart after a crash, `nacre up` of a
// cluster partly running) goes back to its cgroup, with the budget given
// now or, without --node-cpu, the one its cgroup (or another of its role)
// has. Down removes the cluster's cgroups once its processes are stopped.

// NodeCPU is the CPU budget of a cluster's target processes by role, in
// cores: what --node-cpu gives. 0 is no budget for that role.
type NodeCPU struct {
	MGS float64 `json:"mgs,omitempty"`
	MDS float64 `json:"mds,omitempty"` // each MDT process (and replica)
	OST float64 `json:"ost,omitempty"`
}

// role is a role of --node-cpu: its name and the kind of its targets.
type role struct {
	name string
	kind target.Kind
}

// roles are the roles of --node-cpu, in the order they are shown.
var roles = []role{{"mgs", target.MGS}, {"mds", target.MDT}, {"ost", target.OST}}

// IsZero says whether no role has a budget.
func (n NodeCPU) IsZero() bool { return n == NodeCPU{} }

// For is the budget of a target of kind k.
func (n NodeCPU) For(k target.Kind) float64 {
	switch k {
	case target.MGS:
		return n.MGS
	case target.MDT:
		return n.MDS
	case target.OST:
		return n.OST
	}
	return 0
}

func (n *NodeCPU) set(k target.Kind, cores float64) {
	switch k {
	case target.MGS:
		n.MGS = cores
	case target.MDT:
		n.MDS = cores
	case target.OST:
		n.OST = cores
	}
}

// String is the budgets as --node-cpu takes them: "0.5" when every role
// has the same, else "mgs=0.1,mds=0.6,ost=0.15" (roles without one left
// out); "" for none.
func (n NodeCPU) String() string {
	if n.MGS > 0 && n.MGS == n.MDS && n.MDS == n.OST {
		return formatCores(n.MGS)
	}
	var parts []string
	for _, r := range roles {
		if c := n.For(r.kind); c > 0 {
			parts = append(parts, r.name+"="+formatCores(c))
		}
	}
	return strings.Join(parts, ",")
}

func formatCores(c float64) string { return strconv.FormatFloat(c, 'f', -1, 64) }

// ParseNodeCPU reads --node-cpu: CORES for every target process, or
// ROLE=CORES for each role (mgs, mds: the MDTs, ost), or both
// ("0.5,ost=0.15": the OSTs 0.15, the others 0.5); a role not given has
// no budget.
func ParseNodeCPU(s string) (NodeCPU, error) {
	bad := func(what, why string) error {
		return fmt.Errorf("--node-cpu %s: %s; give CORES for every target process (--node-cpu 0.5), ROLE=CORES for each role of mgs, mds (the MDTs) and ost (--node-cpu mds=0.6,ost=0.15,mgs=0.1), or both (--node-cpu 0.5,ost=0.15)", what, why)
	}
	if strings.TrimSpace(s) == "" {
		return NodeCPU{}, bad(`""`, "no budget given")
	}
	var n NodeCPU
	all := 0.0
	given := map[string]bool{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return NodeCPU{}, bad(s, "an empty item")
		}
		name, val, named := strings.Cut(item, "=")
		if !named {
			name, val = "", item
		}
		name = strings.TrimSpace(name)
		kind := target.Kind("")
		if named {
			i := slices.IndexFunc(roles, func(r role) bool { return r.name == name })
			if i < 0 {
				return NodeCPU{}, bad(item, fmt.Sprintf("%q is no role", name))
			}
			kind = roles[i].kind
		}
		if given[name] {
			if name == "" {
				return NodeCPU{}, bad(s, "two budgets for every role")
			}
			return NodeCPU{}, bad(s, fmt.Sprintf("%s given twice", name))
		}
		given[name] = true
		val = strings.TrimSpace(val)
		cores, err := strconv.ParseFloat(val, 64)
		if err != nil || math.IsNaN(cores) || math.IsInf(cores, 0) {
			return NodeCPU{}, bad(item, fmt.Sprintf("%q is not a number of cores", val))
		}
		if cores <= 0 || cgroup.CheckCores(cores) != nil {
			return NodeCPU{}, bad(item, fmt.Sprintf("a budget is %g core or more (the kernel's smallest quota: 1 ms in each %s)", cgroup.MinCores, cgroup.Period))
		}
		if kind == "" {
			all = cores
		} else {
			n.set(kind, cores)
		}
	}
	for _, r := range roles {
		if n.For(r.kind) == 0 {
			n.set(r.kind, all)
		}
	}
	return n, nil
}

// cgroupTop is the cgroup that holds the cgroups of every local cluster
// on this machine.
const cgroupTop = "nacre"

// dirHash names the cluster directory dir in its cgroup's name: 8 hex
// digits of the SHA-256 of its absolute path (symbolic links resolved).
func dirHash(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:4])
}

// clusterCgroups finds the cgroups of the cluster in dir in h (one, unless
// its file system was renamed by a new format there).
func clusterCgroups(h *cgroup.Hierarchy, dir string) []*cgroup.Group {
	ms, _ := filepath.Glob(filepath.Join(h.Dir, cgroupTop, "*-"+dirHash(dir)))
	var out []*cgroup.Group
	for _, m := range ms {
		out = append(out, h.Group(cgroupTop+"/"+filepath.Base(m)))
	}
	return out
}

// roleOf is the role of a target directory's name (mgs, mdt0-r2, ost7).
func roleOf(name string) target.Kind {
	switch {
	case strings.HasPrefix(name, "mgs"):
		return target.MGS
	case strings.HasPrefix(name, "mdt"):
		return target.MDT
	case strings.HasPrefix(name, "ost"):
		return target.OST
	}
	return ""
}

// budgets are the cgroups of the targets an Up (or a single start)
// starts.
type budgets struct {
	h *cgroup.Hierarchy // nil: no budgets
	// cluster is the cluster's cgroup.
	cluster *cgroup.Group
	// groups holds the cgroup of each target directory to start that has
	// a budget.
	groups map[string]*cgroup.Group
}

// group is the cgroup a target in directory d starts in (nil: none).
func (b *budgets) group(d string) *cgroup.Group {
	if b == nil {
		return nil
	}
	return b.groups[d]
}

// planBudgets makes the cgroups of the targets of the cluster in dir
// about to start (their directories and identities), each with the
// budget ask gives its role; with ask zero, a target gets the budget its
// own cgroup has (a target started again), or else one of its role has,
// in the cluster's cgroups, and none when the cluster has none. On
// failure it leaves no cgroup it made behind.
func planBudgets(dir string, ask NodeCPU, toStart []string, ids map[string]target.Identity) (*budgets, error) {
	if len(toStart) == 0 {
		return nil, nil
	}
	h, err := cgroup.Find(cgroup.Options{})
	if err != nil {
		if ask.IsZero() {
			return nil, nil
		}
		return nil, fmt.Errorf("--node-cpu %s: %w", ask, err)
	}
	b := &budgets{h: h, groups: map[string]*cgroup.Group{}}
	if existing := clusterCgroups(h, dir); len(existing) > 0 {
		b.cluster = existing[0]
	} else if ask.IsZero() {
		return nil, nil
	} else {
		b.cluster = h.Group(cgroupTop + "/" + ids[toStart[0]].Fsname + "-" + dirHash(dir))
	}
	want := map[string]float64{}
	for _, d := range toStart {
		name := filepath.Base(d)
		if ask.IsZero() {
			want[d] = b.kept(name)
		} else {
			want[d] = ask.For(ids[d].Kind)
		}
	}
	for _, d := range toStart {
		if want[d] == 0 {
			continue
		}
		g, err := h.Create(b.cluster.Name+"/"+filepath.Base(d), want[d])
		if err != nil {
			b.remove()
			return nil, fmt.Errorf("give %s a CPU budget of %g cores: %w", filepath.Base(d), want[d], err)
		}
		b.groups[d] = g
	}
	if len(b.groups) == 0 {
		return nil, nil
	}
	return b, nil
}

// kept is the budget a target named name keeps without --node-cpu: its
// own cgroup's, else that of another of its role in the cluster's
// cgroup (0: none).
func (b *budgets) kept(name string) float64 {
	if g := b.h.Group(b.cluster.Name + "/" + name); g.Exists() {
		c, _ := g.Budget()
		return c
	}
	entries, _ := os.ReadDir(b.cluster.Dir)
	for _, e := range entries {
		if !e.IsDir() || roleOf(e.Name()) != roleOf(name) {
			continue
		}
		if c, _ := b.h.Group(b.cluster.Name + "/" + e.Name()).Budget(); c > 0 {
			return c
		}
	}
	return 0
}

// remove removes the cgroups of the plan that no process uses, and the
// cluster's cgroup and the top one if nothing is left in them.
func (b *budgets) remove() {
	if b == nil {
		return
	}
	for _, g := range b.groups {
		if pids, err := g.Pids(); err == nil && len(pids) == 0 {
			g.Remove()
		}
	}
	removeIfEmpty(b.cluster)
	removeIfEmpty(b.h.Group(cgroupTop))
}

// removeIfEmpty removes g if no cgroup is left under it (and no process
// in it).
func removeIfEmpty(g *cgroup.Group) {
	entries, err := os.ReadDir(g.Dir)
	if err != nil || slices.ContainsFunc(entries, func(e os.DirEntry) bool { return e.IsDir() }) {
		return
	}
	if pids, err := g.Pids(); err == nil && len(pids) == 0 {
		g.Remove()
	}
}

// removeCgroups removes the cgroups of the cluster in dir, whose
// processes are stopped, and the top cgroup when no other cluster uses
// it; it says what it removed, or could not, on out.
func removeCgroups(dir string, out io.Writer) {
	h, err := cgroup.Find(cgroup.Options{})
	if err != nil {
		return // no cgroups here: none to remove
	}
	groups := clusterCgroups(h, dir)
	if len(groups) == 0 {
		return
	}
	var errs []error
	for _, g := range groups {
		if err := g.RemoveTree(); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "removed the cgroups of its CPU budgets (%s)\n", g.Dir)
	}
	removeIfEmpty(h.Group(cgroupTop))
	if err := errors.Join(errs...); err != nil {
		fmt.Fprintf(out, "warning: %v\n", err)
	}
}

// removeTargetCgroup removes the cgroup of the target named name (its
// directory's name) of the cluster in dir, whose process is stopped.
func removeTargetCgroup(dir, name string) {
	h, err := cgroup.Find(cgroup.Options{})
	if err != nil {
		return
	}
	for _, c := range clusterCgroups(h, dir) {
		h.Group(c.Name + "/" + name).Remove()
	}
}

// readBudgets fills in the CPU budget of each target process from its
// cgroup, and says where the cgroups are.
func (c *Cluster) readBudgets() {
	h, err := cgroup.Find(cgroup.Options{})
	if err != nil {
		return
	}
	for i, p := range c.Targets {
		g, err := h.GroupOf(p.Pid)
		if err != nil {
			continue
		}
		if cores, err := g.Budget(); err == nil && cores > 0 {
			c.Targets[i].CPU, c.Targets[i].Cgroup = cores, g.Dir
			c.cpuAt = h.Version.String()
		}
	}
}

// BudgetSummary says the CPU budgets the target processes run with, by
// role ("" when none has one): "CPU budgets: mgs 0.1 core, mds 0.6 core,
// ost 0.15 core, each target process in a cgroup of its own (cgroup v1:
// /sys/fs/cgroup/cpu/nacre/nacre-1a2b3c4d/TARGET)".
func (c *Cluster) BudgetSummary() string {
	if c.cpuAt == "" {
		return ""
	}
	var parts []string
	where := ""
	for _, r := range roles {
		var vals []string
		for _, p := range c.Targets {
			if roleOf(filepath.Base(p.Dir)) != r.kind {
				continue
			}
			v := "none"
			if p.CPU > 0 {
				v = formatCores(p.CPU) + " core"
				if where == "" {
					where = filepath.Dir(p.Cgroup)
				}
			}
			if !slices.Contains(vals, v) {
				vals = append(vals, v)
			}
		}
		if len(vals) > 0 {
			parts = append(parts, r.name+" "+strings.Join(vals, " or "))
		}
	}
	return fmt.Sprintf("CPU budgets: %s, each target process in a cgroup of its own (%s: %s/TARGET)", strings.Join(parts, ", "), c.cpuAt, where)
}
