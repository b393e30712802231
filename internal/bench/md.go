// Package bench holds Nacre's benchmarks and the result model they share:
// per-phase rates and latency percentiles, per-second timelines with the
// servers' disk and network throughput, and their tables, CSV, JSON and
// plots. Every benchmark runs against the Nacre client library or, with a
// path, against any mounted file system, so that figures can be put side
// by side with the local disk and other file systems.
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/pki"
)

// MDOptions configure the metadata benchmark (mdtest-like).
type MDOptions struct {
	MGS string // cluster to drive through the client library
	// TLS are the client's credentials (nil: no TLS).
	TLS *pki.Creds
	// FollowerReads spreads the client's reads over every replica that is up.
	FollowerReads bool
	// Path, if set, runs the benchmark with system calls in this directory
	// of any mounted file system instead.
	Path      string
	Workers   int  // concurrent workers (each its own client, like mdtest ranks)
	Items     int  // files (and directories) per worker
	SharedDir bool // all workers in one directory tree (else one each)
	// Depth and Branch build a directory tree under each worker's
	// directory (mdtest -z, -b); items spread over the leaves.
	Depth, Branch int
	Iterations    int
	// Phases selects "dir" and/or "file" phases (default both).
	Phases []string
	// WriteBytes are written into each file at create (mdtest -w);
	// ReadBytes are read back in the read phase (mdtest -e).
	WriteBytes, ReadBytes int
	StripeCount           int // layout of the benchmark's files (client library only)
	// SpreadMDTs puts worker i's directory on MDT i % SpreadMDTs (a
	// remote directory, nacre mkdir -i), so that N MDTs share the work
	// (client library only; 0 or 1: every directory on MDT0).
	SpreadMDTs int
	PhaseGap   time.Duration // pause between phases (FUSE attribute caches)
	Progress   io.Writer
	Timeline   *Timeline
	// CPU, if set, counts the CPU each process spends per operation of
	// every phase (Phase.CPUUsPerOp).
	CPU *CPUProbe
}

// Phase is one measured phase (aggregated over iterations).
type Phase struct {
	Name      string  `json:"name"`
	Ops       int     `json:"ops"`
	Errors    int     `json:"errors"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	MinRate   float64 `json:"min_ops_per_sec"`
	MaxRate   float64 `json:"max_ops_per_sec"`
	StddevRt  float64 `json:"stddev_ops_per_sec"`
	MeanUs    float64 `json:"mean_us"`
	MinUs     float64 `json:"min_us"`
	P50Us     float64 `json:"p50_us"`
	P99Us     float64 `json:"p99_us"`
	MaxUs     float64 `json:"max_us"`
	// CPUUsPerOp is the CPU time (user and system) each process spent
	// per operation of the phase, in µs, by process name (with
	// MDOptions.CPU).
	CPUUsPerOp map[string]float64 `json:"cpu_us_per_op,omitempty"`
	lat        []time.Duration
}

// MDResult is the outcome of RunMD.
type MDResult struct {
	Benchmark  string    `json:"benchmark"`
	Target     string    `json:"target"`
	Workers    int       `json:"workers"`
	Items      int       `json:"items_per_worker"`
	SharedDir  bool      `json:"shared_dir"`
	Depth      int       `json:"depth"`
	Branch     int       `json:"branch"`
	Stripes    int       `json:"stripe_count"`
	MDTs       int       `json:"mdts,omitempty"` // SpreadMDTs
	Iterations int       `json:"iterations"`
	Start      time.Time `json:"start"`
	Phases     []Phase   `json:"phases"`
	Runs       [][]Phase `json:"runs"`
}

type worker struct {
	b      Backend
	base   Dir   // the worker's directory (or the shared one)
	leaves []Dir // where its items go
	id     int
}

func (w *worker) dir(i int) Dir { return w.leaves[i%len(w.leaves)] }

func newBackend(ctx context.Context, o MDOptions) (Backend, error) {
	if o.Path != "" {
		return PathBackend{Root: o.Path}, nil
	}
	if o.MGS == "" {
		return nil, fmt.Errorf("no target: pass --mgs HOST:PORT (or set NACRE_MGS), or --path DIR for a mounted file system")
	}
	return NewClientBackend(ctx, client.Config{MGS: o.MGS, FollowerReads: o.FollowerReads, TLS: o.TLS})
}

func rootOf(b Backend) Dir {
	switch x := b.(type) {
	case *ClientBackend:
		return x.Root
	case PathBackend:
		return x.Root
	}
	return nil
}

// RunMD runs the metadata phases and returns their figures.
func RunMD(ctx context.Context, o MDOptions) (*MDResult, error) {
	if o.Workers <= 0 || o.Items <= 0 {
		return nil, fmt.Errorf("--workers and --items must be at least 1 (got %d and %d)", o.Workers, o.Items)
	}
	if o.Depth < 0 || o.Branch < 0 || (o.Depth > 0 && o.Branch < 1) {
		return nil, fmt.Errorf("--depth %d --branch %d: a tree needs depth ≥ 0 and branch ≥ 1", o.Depth, o.Branch)
	}
	if o.Iterations <= 0 {
		o.Iterations = 1
	}
	if len(o.Phases) == 0 {
		o.Phases = []string{"dir", "file"}
	}
	for _, p := range o.Phases {
		switch p {
		case "dir", "file", "ls", "link":
		default:
			return nil, fmt.Errorf("--phases %q: use dir, file or both (dir,file), ls with file (file,ls), and link (hard links to one file per worker)", p)
		}
	}
	if slices.Contains(o.Phases, "ls") && !slices.Contains(o.Phases, "file") {
		return nil, fmt.Errorf("--phases ls needs the files of the file phases: use --phases file,ls")
	}
	if o.SpreadMDTs > 1 && (o.Path != "" || o.SharedDir) {
		return nil, fmt.Errorf("spreading the workers' directories over %d MDTs needs the client library and a directory per worker (not --path or --shared-dir)", o.SpreadMDTs)
	}
	if o.Path != "" {
		if err := checkPath(o.Path); err != nil {
			return nil, err
		}
	}
	res := &MDResult{Benchmark: "md", Workers: o.Workers, Items: o.Items, SharedDir: o.SharedDir,
		Depth: o.Depth, Branch: o.Branch, Stripes: o.StripeCount, MDTs: o.SpreadMDTs, Iterations: o.Iterations, Start: time.Now()}
	ws := make([]*worker, o.Workers)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.b.Close()
			}
		}
	}()
	for i := range ws {
		b, err := newBackend(ctx, o)
		if err != nil {
			return nil, err
		}
		ws[i] = &worker{b: b, id: i}
	}
	res.Target = ws[0].b.Name()
	if o.MGS != "" && o.Path == "" {
		res.Target += " (" + o.MGS + ")"
	}
	if o.Timeline != nil {
		o.Timeline.Start(ctx)
		defer o.Timeline.Stop()
	}
	for it := 0; it < o.Iterations; it++ {
		run, err := runMDOnce(ctx, o, ws, it)
		if err != nil {
			return res, err
		}
		res.Runs = append(res.Runs, run)
	}
	res.Phases = aggregate(res.Runs)
	for i := range res.Runs {
		for j := range res.Runs[i] {
			res.Runs[i][j].lat = nil
		}
	}
	return res, nil
}

func runMDOnce(ctx context.Context, o MDOptions, ws []*worker, iter int) ([]Phase, error) {
	b0 := ws[0].b
	var rb [4]byte
	rand.Read(rb[:])
	baseName := fmt.Sprintf("nacre-bench-md-%s-%d", hex.EncodeToString(rb[:]), iter)
	base, err := b0.Mkdir(ctx, rootOf(b0), baseName)
	if err != nil {
		return nil, fmt.Errorf("make the benchmark directory: %w", err)
	}
	if cb, ok := b0.(*ClientBackend); ok && o.StripeCount != 0 {
		if _, err := cb.Client().SetLayout(ctx, base.(fid.FID), &pb.Layout{StripeCount: int32(o.StripeCount), StripeOffset: -1}); err != nil {
			return nil, err
		}
	}
	var phases []Phase
	// The tree: one per worker (or one shared), measured as mdtest does.
	var treeDirs [][]treeDir
	treeRoots := make([]Dir, len(ws))
	for i, w := range ws {
		if o.SharedDir {
			treeRoots[i] = base
			continue
		}
		d, err := workerDir(ctx, o, b0, base, i)
		if err != nil {
			return nil, err
		}
		treeRoots[i] = d
		_ = w
	}
	owners := len(ws)
	if o.SharedDir {
		owners = 1
	}
	treeDirs = make([][]treeDir, owners)
	for i := 0; i < owners; i++ {
		treeDirs[i] = planTree(o.Depth, o.Branch)
	}
	leafOf := func(i int, dirs []treeDir, handles []Dir) []Dir {
		var leaves []Dir
		for k, d := range dirs {
			if d.depth == o.Depth {
				leaves = append(leaves, handles[k])
			}
		}
		if len(leaves) == 0 {
			leaves = []Dir{treeRoots[i]}
		}
		return leaves
	}
	handles := make([][]Dir, owners)
	if o.Depth > 0 {
		p, err := runPhase(ctx, o, "tree_create", ws[:owners], len(treeDirs[0]), func(ctx context.Context, w *worker, k int) error {
			d := treeDirs[w.id][k]
			parent := treeRoots[w.id]
			if d.parent >= 0 {
				parent = handles[w.id][d.parent]
			}
			h, err := w.b.Mkdir(ctx, parent, d.name)
			handles[w.id][k] = h
			return err
		}, func(w *worker) { handles[w.id] = make([]Dir, len(treeDirs[w.id])) })
		if err != nil {
			return phases, err
		}
		phases = append(phases, p)
	}
	for i, w := range ws {
		owner := i
		if o.SharedDir {
			owner = 0
		}
		w.base = treeRoots[i]
		w.leaves = leafOf(owner, treeDirs[owner], handles[owner])
	}
	data := make([]byte, o.WriteBytes)
	for i := range data {
		data[i] = byte(i)
	}
	name := func(kind string, w *worker, i int) string { return fmt.Sprintf("%s.%d.%d", kind, w.id, i) }
	type step struct {
		name string
		op   func(ctx context.Context, w *worker, i int) error
	}
	var steps []step
	ls := slices.Contains(o.Phases, "ls")
	linkTargets := false
	for _, ph := range o.Phases {
		switch ph {
		case "dir":
			steps = append(steps,
				step{"dir_create", func(ctx context.Context, w *worker, i int) error {
					_, err := w.b.Mkdir(ctx, w.dir(i), name("d", w, i))
					return err
				}},
				step{"dir_stat", func(ctx context.Context, w *worker, i int) error { return w.b.Stat(ctx, w.dir(i), name("d", w, i)) }},
				// mdtest's "Directory rename": each directory gets a new
				// name in its parent.
				step{"dir_rename", func(ctx context.Context, w *worker, i int) error {
					return w.b.Rename(ctx, w.dir(i), name("d", w, i), name("r", w, i))
				}},
				step{"dir_remove", func(ctx context.Context, w *worker, i int) error { return w.b.Rmdir(ctx, w.dir(i), name("r", w, i)) }})
		case "file":
			steps = append(steps,
				step{"file_create", func(ctx context.Context, w *worker, i int) error {
					return w.b.Create(ctx, w.dir(i), name("f", w, i), data)
				}},
				step{"file_stat", func(ctx context.Context, w *worker, i int) error { return w.b.Stat(ctx, w.dir(i), name("f", w, i)) }})
			if ls {
				steps = append(steps, step{"file_ls", func(ctx context.Context, w *worker, i int) error {
					return w.b.StatXattrs(ctx, w.dir(i), name("f", w, i))
				}})
			}
			steps = append(steps,
				step{"file_read", func(ctx context.Context, w *worker, i int) error {
					buf := make([]byte, o.ReadBytes)
					return w.b.Read(ctx, w.dir(i), name("f", w, i), buf)
				}},
				step{"file_remove", func(ctx context.Context, w *worker, i int) error { return w.b.Unlink(ctx, w.dir(i), name("f", w, i)) }})
		case "link":
			// --items hard links to one file per worker: what a link,
			// a stat through one and an unlink cost as the file's links
			// grow (a backup tree of hard-linked snapshots, cp -al).
			for _, w := range ws {
				if err := w.b.Create(ctx, w.base, name("t", w, 0), nil); err != nil {
					return phases, fmt.Errorf("create the link target: %w", err)
				}
			}
			linkTargets = true
			steps = append(steps,
				step{"link_create", func(ctx context.Context, w *worker, i int) error {
					return w.b.Link(ctx, w.base, name("t", w, 0), w.dir(i), name("l", w, i))
				}},
				step{"link_stat", func(ctx context.Context, w *worker, i int) error { return w.b.Stat(ctx, w.dir(i), name("l", w, i)) }},
				step{"link_remove", func(ctx context.Context, w *worker, i int) error { return w.b.Unlink(ctx, w.dir(i), name("l", w, i)) }})
		}
	}
	for n, s := range steps {
		if n > 0 && o.PhaseGap > 0 {
			time.Sleep(o.PhaseGap)
		}
		p, err := runPhase(ctx, o, s.name, ws, o.Items, s.op, nil)
		if err != nil {
			return phases, err
		}
		phases = append(phases, p)
	}
	if linkTargets {
		for _, w := range ws {
			w.b.Unlink(ctx, w.base, name("t", w, 0))
		}
	}
	if o.Depth > 0 {
		p, err := runPhase(ctx, o, "tree_remove", ws[:owners], len(treeDirs[0]), func(ctx context.Context, w *worker, k int) error {
			// Deepest first: walk the plan backwards.
			j := len(treeDirs[w.id]) - 1 - k
			d := treeDirs[w.id][j]
			parent := treeRoots[w.id]
			if d.parent >= 0 {
				parent = handles[w.id][d.parent]
			}
			return w.b.Rmdir(ctx, parent, d.name)
		}, nil)
		if err != nil {
			return phases, err
		}
		phases = append(phases, p)
	}
	if !o.SharedDir {
		for i := range ws {
			b0.Rmdir(ctx, base, fmt.Sprintf("w%d", i))
		}
	}
	b0.Rmdir(ctx, rootOf(b0), baseName)
	return phases, nil
}

// treeDir is one directory of a planned tree: its parent's position in
// the plan (-1: the tree root), its name and depth.
type treeDir struct {
	parent int
	name   string
	depth  int
}

// planTree lists a tree of the given depth and branching, parents first.
// workerDir makes worker i's directory, on its MDT with SpreadMDTs.
func workerDir(ctx context.Context, o MDOptions, b Backend, base Dir, i int) (Dir, error) {
	name := fmt.Sprintf("w%d", i)
	cb, ok := b.(*ClientBackend)
	if o.SpreadMDTs <= 1 || !ok {
		return b.Mkdir(ctx, base, name)
	}
	on := uint32(i % o.SpreadMDTs)
	ino, _, err := cb.Client().Create(ctx, base.(fid.FID), name, syscall.S_IFDIR|0o755, client.CreateOpts{Exclusive: true, MDT: &on})
	if err != nil {
		return nil, fmt.Errorf("make worker %d's directory on MDT%04x: %w", i, on, err)
	}
	return fid.FromPB(ino.Fid), nil
}

func planTree(depth, branch int) []treeDir {
	var out []treeDir
	level := []int{-1}
	for d := 1; d <= depth; d++ {
		var next []int
		for _, p := range level {
			for b := 0; b < branch; b++ {
				out = append(out, treeDir{parent: p, name: fmt.Sprintf("t%d.%d", d, b), depth: d})
				next = append(next, len(out)-1)
			}
		}
		level = next
	}
	return out
}

// phaseProgress shows a phase's progress on w: on a terminal a line
// redrawn five times a second and wiped at the end (the table printed
// after the run holds the figures), elsewhere (logs, CI) one line when the
// phase ends. The returned function ends it.
func phaseProgress(w io.Writer, name string, done *atomic.Int64, total int) func(time.Duration) {
	if w == nil {
		return func(time.Duration) {}
	}
	if !cli.IsTerminal(w) {
		return func(d time.Duration) {
			fmt.Fprintf(w, "%s: %d of %d ops done in %.2f s\n", name, done.Load(), total, d.Seconds())
		}
	}
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			fmt.Fprintf(w, "\r%s: %d/%d ops\033[K", name, done.Load(), total)
			select {
			case <-stop:
				fmt.Fprint(w, "\r\033[K")
				return
			case <-t.C:
			}
		}
	}()
	return func(time.Duration) {
		close(stop)
		<-stopped
	}
}

// runPhase runs op for every item of every worker, all workers at once,
// and measures the rate over the slowest worker (as mdtest does).
func runPhase(ctx context.Context, o MDOptions, name string, ws []*worker, items int, op func(context.Context, *worker, int) error, setup func(*worker)) (Phase, error) {
	if setup != nil {
		for _, w := range ws {
			setup(w)
		}
	}
	if o.Timeline != nil {
		o.Timeline.SetPhase(name)
	}
	lat := make([][]time.Duration, len(ws))
	errs := make([]int, len(ws))
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	var done atomic.Int64
	stopProgress := phaseProgress(o.Progress, name, &done, len(ws)*items)
	var cpu0 []float64
	if o.CPU != nil {
		cpu0 = o.CPU.sample()
	}
	start := time.Now()
	for wi, w := range ws {
		wg.Add(1)
		go func(wi int, w *worker) {
			defer wg.Done()
			l := make([]time.Duration, 0, items)
			for i := 0; i < items && ctx.Err() == nil; i++ {
				t0 := time.Now()
				if err := op(ctx, w, i); err != nil {
					errs[wi]++
					once.Do(func() { firstErr = fmt.Errorf("%s: %w", name, err) })
					continue
				}
				l = append(l, time.Since(t0))
				done.Add(1)
				if o.Timeline != nil {
					o.Timeline.Add(1)
				}
			}
			lat[wi] = l
		}(wi, w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	var cpu1 []float64
	if o.CPU != nil {
		cpu1 = o.CPU.sample()
	}
	stopProgress(elapsed)
	var all []time.Duration
	nerr := 0
	for i := range lat {
		all = append(all, lat[i]...)
		nerr += errs[i]
	}
	p := Summarize(name, all, elapsed)
	p.Errors = nerr
	if o.CPU != nil {
		p.CPUUsPerOp = o.CPU.perOp(cpu0, cpu1, p.Ops)
	}
	if ctx.Err() != nil {
		return p, ctx.Err()
	}
	if nerr > 0 {
		return p, fmt.Errorf("%d of %d operations failed; first: %w", nerr, len(ws)*items, firstErr)
	}
	return p, nil
}

// Summarize computes a phase's rate and latency figures.
func Summarize(name string, lat []time.Duration, elapsed time.Duration) Phase {
	p := Phase{Name: name, Ops: len(lat), Seconds: elapsed.Seconds(), lat: lat}
	if len(lat) == 0 {
		return p
	}
	sorted := append([]time.Duration(nil), lat...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	us := func(d time.Duration) float64 { return math.Round(float64(d.Nanoseconds())/10) / 100 }
	pct := func(q float64) time.Duration { return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))] }
	p.OpsPerSec = math.Round(float64(len(sorted))/elapsed.Seconds()*10) / 10
	p.MinRate, p.MaxRate = p.OpsPerSec, p.OpsPerSec
	p.MeanUs = us(sum / time.Duration(len(sorted)))
	p.MinUs, p.MaxUs = us(sorted[0]), us(sorted[len(sorted)-1])
	p.P50Us, p.P99Us = us(pct(0.50)), us(pct(0.99))
	return p
}

// aggregate folds the iterations of each phase: mean, min, max and
// standard deviation of the rate; latencies over all samples.
func aggregate(runs [][]Phase) []Phase {
	if len(runs) == 1 {
		return runs[0]
	}
	var order []string
	by := map[string][]Phase{}
	for _, r := range runs {
		for _, p := range r {
			if _, ok := by[p.Name]; !ok {
				order = append(order, p.Name)
			}
			by[p.Name] = append(by[p.Name], p)
		}
	}
	var out []Phase
	for _, name := range order {
		ps := by[name]
		var lat []time.Duration
		var secs float64
		errs := 0
		for _, p := range ps {
			lat = append(lat, p.lat...)
			secs += p.Seconds
			errs += p.Errors
		}
		a := Summarize(name, lat, time.Duration(secs*float64(time.Second)))
		a.Errors = errs
		a.CPUUsPerOp = cpuOverRuns(ps)
		var sum, sq float64
		a.MinRate, a.MaxRate = math.Inf(1), 0
		for _, p := range ps {
			sum += p.OpsPerSec
			a.MinRate = math.Min(a.MinRate, p.OpsPerSec)
			a.MaxRate = math.Max(a.MaxRate, p.OpsPerSec)
		}
		mean := sum / float64(len(ps))
		for _, p := range ps {
			sq += (p.OpsPerSec - mean) * (p.OpsPerSec - mean)
		}
		a.OpsPerSec = math.Round(mean*10) / 10
		a.StddevRt = math.Round(math.Sqrt(sq/float64(len(ps)))*10) / 10
		out = append(out, a)
	}
	return out
}

// PhaseNames lists the phases of a result, for tests and tools.
func (r *MDResult) PhaseNames() string {
	var n []string
	for _, p := range r.Phases {
		n = append(n, p.Name)
	}
	return strings.Join(n, ",")
}

// cpuOverRuns is the CPU per operation of one phase over its runs: each
// process's CPU over all the runs' operations.
func cpuOverRuns(ps []Phase) map[string]float64 {
	var m map[string]float64
	ops := 0
	for _, p := range ps {
		ops += p.Ops
		for name, us := range p.CPUUsPerOp {
			if m == nil {
				m = map[string]float64{}
			}
			m[name] += us * float64(p.Ops)
		}
	}
	for name := range m {
		m[name] /= float64(ops)
	}
	return m
}
