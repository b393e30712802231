package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/cgroup"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/lfsck"
	"nacre/internal/lfsck/admin"
	"nacre/internal/localcluster"
	"nacre/internal/obs"
)

// The checker's benchmarks (`nacre bench popd`, `nacre bench lfsck`),
// after the two source documents that measured Lustre's:
//
//   - seed 003's unloaded test: populated trees PopD (N subdirectories, L
//     sub-subdirectories, C threads creating the files), checker at full
//     speed, objects/s as the tree grows;
//   - seed 000's Table I: the same files with 2, 4 and 8 OSTs (stripe
//     count -1: every file on every OST);
//   - seed 003's test under load: the create rate alone, with the checker
//     at full speed, and with speed limits of 1/5 to 4/5 of full speed.

// PopDOptions describe a populated tree.
type PopDOptions struct {
	MGS         string
	Root        string // the tree's directory under / (made if missing)
	Dirs        int    // N subdirectories
	Subdirs     int    // L sub-subdirectories in each
	Threads     int    // C threads creating files, each in its own sub-subdirectory
	Files       int    // files to add now
	Offset      int    // files already in the tree (a tree grows by calls)
	StripeCount int    // 0: file system default; -1: every OST
	Progress    io.Writer
	Timeline    *Timeline // if set, counts every file made (--plot)
	// For, if set, ends the creating after this long (the tree's
	// directories are made first, outside that time).
	For time.Duration
}

// PopDResult is how the population went.
type PopDResult struct {
	Files     int     `json:"files"`
	Seconds   float64 `json:"seconds"`
	FilesPerS float64 `json:"files_per_s"`
}

func (o *PopDOptions) defaults() {
	if o.Root == "" {
		o.Root = "popd"
	}
	if o.Dirs <= 0 {
		o.Dirs = 4
	}
	if o.Subdirs <= 0 {
		o.Subdirs = 4
	}
	if o.Threads <= 0 {
		o.Threads = 8
	}
}

func mkdirOrLookup(ctx context.Context, c *client.Client, parent fid.FID, name string) (fid.FID, error) {
	ino, err := c.Mkdir(ctx, parent, name, 0o755)
	if errors.Is(err, syscall.EEXIST) {
		ino, err = c.Lookup(ctx, parent, name)
	}
	if err != nil {
		return fid.FID{}, err
	}
	return fid.FromPB(ino.Fid), nil
}

// PopD adds o.Files files to the tree /Root/d<n>/s<l>/, C threads in
// parallel, thread t in sub-subdirectory t mod (N*L).
func PopD(ctx context.Context, o PopDOptions) (*PopDResult, error) {
	o.defaults()
	nc := min(o.Threads, 8)
	clients := make([]*client.Client, nc)
	for i := range clients {
		c, err := client.New(ctx, client.Config{MGS: o.MGS})
		if err != nil {
			for _, c := range clients[:i] {
				c.Close()
			}
			return nil, err
		}
		clients[i] = c
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	c := clients[0]
	root, err := mkdirOrLookup(ctx, c, fid.Root, o.Root)
	if err != nil {
		return nil, err
	}
	if o.StripeCount != 0 {
		if _, err := c.SetLayout(ctx, root, &pb.Layout{StripeCount: int32(o.StripeCount), StripeOffset: -1}); err != nil {
			return nil, err
		}
	}
	var subs []fid.FID
	for n := 0; n < o.Dirs; n++ {
		d, err := mkdirOrLookup(ctx, c, root, fmt.Sprintf("d%d", n))
		if err != nil {
			return nil, err
		}
		for l := 0; l < o.Subdirs; l++ {
			s, err := mkdirOrLookup(ctx, c, d, fmt.Sprintf("s%d", l))
			if err != nil {
				return nil, err
			}
			subs = append(subs, s)
		}
	}
	if o.For > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.For)
		defer cancel()
	}
	var done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	t0 := time.Now()
	stop := make(chan struct{})
	if o.Progress != nil {
		go func() {
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					progressLine(o.Progress, int(done.Load()), o.Files, t0)
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for t := 0; t < o.Threads; t++ {
		n := o.Files / o.Threads
		if t < o.Files%o.Threads {
			n++
		}
		first := o.Offset / o.Threads
		if t < o.Offset%o.Threads {
			first++
		}
		wg.Add(1)
		go func(t, first, n int) {
			defer wg.Done()
			cl := clients[t%nc]
			dir := subs[t%len(subs)]
			for i := first; i < first+n; i++ {
				if ctx.Err() != nil {
					return
				}
				_, _, err := cl.Create(ctx, dir, fmt.Sprintf("t%d.%d", t, i), 0o644, client.CreateOpts{Exclusive: true})
				if err != nil && timeUp(ctx) {
					return // the caller's time is up
				}
				if err != nil && !errors.Is(err, syscall.EEXIST) {
					errOnce.Do(func() { firstErr = err })
					return
				}
				done.Add(1)
				if o.Timeline != nil {
					o.Timeline.Add(1)
				}
			}
		}(t, first, n)
	}
	wg.Wait()
	close(stop)
	if firstErr != nil && !timeUp(ctx) {
		return nil, firstErr
	}
	secs := time.Since(t0).Seconds()
	if o.Progress != nil {
		progressLine(o.Progress, int(done.Load()), o.Files, t0)
		if cli.IsTerminal(o.Progress) {
			fmt.Fprintln(o.Progress)
		}
	}
	return &PopDResult{Files: int(done.Load()), Seconds: round1(secs), FilesPerS: round1(float64(done.Load()) / secs)}, ctx.Err()
}

// LfsckBenchOptions configure `nacre bench lfsck`.
type LfsckBenchOptions struct {
	MGS string // the cluster for the scaling and load runs
	// Scaling: grow one PopD tree to each size (files) and check it.
	Sizes                  []int
	Dirs, Subdirs, Threads int
	StripeCount            int
	// Table I: a fresh local cluster per OST count, OSTFiles files
	// striped over every OST, started by Binary in ClusterDir.
	OSTCounts  []int
	OSTFiles   int
	OSTStripes int // stripe count of the Table I files; 0 or -1: every OST (seed 000)
	ClusterDir string
	Binary     string
	// OSTRestart restarts each Table I cluster after populating it, so
	// that the runs read the files from the stores' tables, as on a file
	// system that has been up a while, and not from the memtables the
	// bulk load left (which double the MDT's CPU per run).
	OSTRestart bool
	// MDTCounts: a fresh local cluster per MDT count, MDTFiles files in
	// a tree on each MDT, the namespace check run on every MDT at once;
	// each MDT's rate is what must not fall as MDTs are added.
	MDTCounts []int
	MDTFiles  int
	// NodeCPU gives the target processes of the clusters the benchmark
	// starts (Table I, Interleave) CPU budgets by role, as `nacre up
	// --node-cpu` does; zero: none.
	NodeCPU localcluster.NodeCPU
	// Have is the number of files the scaling tree already holds.
	Have int
	// Interleave builds a tree per size, each on a local cluster of its
	// own (Binary, ClusterDir), and measures them in rounds that visit
	// every size in turn (runScalingInterleaved).
	Interleave bool
	// Repeat runs each measurement this many times and keeps the median
	// (the machines are shared and noisy).
	Repeat int
	// Load: the create rate alone and with the checker, LoadSeconds each.
	Load        bool
	LoadSeconds float64
	LoadRounds  int // alternations of without / with the checker per setting
	// Settle is the pause after the unmeasured run that follows each
	// population (see settle).
	Settle   time.Duration
	Progress io.Writer
}

// LfsckPoint is one checker run.
type LfsckPoint struct {
	Files       int     `json:"files"`
	OSTs        int     `json:"osts,omitempty"`
	MDTs        int     `json:"mdts,omitempty"` // MDT counts: the cluster's MDTs
	MDT         *uint32 `json:"mdt,omitempty"`  // MDT counts: the MDT this run checked`
	Component   string  `json:"component"`
	Objects     uint64  `json:"objects"`
	Stripes     uint64  `json:"stripes,omitempty"`
	Seconds     float64 `json:"seconds"`
	ObjectsPerS float64 `json:"objects_per_s"`
	// Table I: CPU seconds the MDT's process and all OST processes
	// together spent in the run. On one machine the OSTs share its cores;
	// on a real cluster each OSS runs on its own, so the MDT's share is
	// what grows with the OST count or does not.
	MDTCPUSeconds float64 `json:"mdt_cpu_s,omitempty"`
	OSTCPUSeconds float64 `json:"ost_cpu_s,omitempty"`
	StripeCount   int     `json:"stripe_count,omitempty"`
	Restarted     bool    `json:"restarted,omitempty"` // Table I: the cluster restarted after populating (OSTRestart)
	// NodeCPU is the CPU budget of each role's target processes, in
	// cores, on a cluster the benchmark started with --node-cpu.
	NodeCPU *localcluster.NodeCPU `json:"node_cpu,omitempty"`
}

// LoadPoint is one create-rate measurement under the checker.
type LoadPoint struct {
	Setting         string  `json:"setting"` // "none", "full", "1/5", ...
	SpeedLimit      uint64  `json:"speed_limit"`
	CreatesPerS     float64 `json:"creates_per_s"`
	BaseCreatesPerS float64 `json:"creates_per_s_without_checker"`
	RelativeRate    float64 `json:"relative_create_rate"`
	CheckerPerS     float64 `json:"checker_objects_per_s"`
	CheckerRounds   int     `json:"checker_rounds"`
}

// LfsckBenchResult holds every figure.
type LfsckBenchResult struct {
	Benchmark string       `json:"benchmark"`
	Start     time.Time    `json:"start"`
	Host      string       `json:"host"`
	CPUs      int          `json:"cpus"`
	Scaling   []LfsckPoint `json:"scaling,omitempty"`
	TableI    []LfsckPoint `json:"table1,omitempty"`
	MDTScale  []LfsckPoint `json:"mdt_scale,omitempty"`
	Load      []LoadPoint  `json:"load,omitempty"`
	LoadFiles int          `json:"load_files,omitempty"`
}

var benchComponents = []string{"namespace", "scrub", "layout", "all"}

// measureMedian runs measure n times and keeps the median by speed.
func measureMedian(ctx context.Context, c *admin.Conn, comp string, files, osts, n int) (LfsckPoint, error) {
	var pts []LfsckPoint
	for i := 0; i < max(n, 1); i++ {
		p, err := measure(ctx, c, comp, files, osts)
		if err != nil {
			return p, err
		}
		pts = append(pts, p)
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].ObjectsPerS < pts[j].ObjectsPerS })
	return pts[len(pts)/2], nil
}

// settle lets the stores finish the work a population leaves behind
// (pebble flushes and compacts the new keys for a while) and warms the
// caches alike for every size and OST count: one unmeasured run of every
// component, then a pause.
func settle(ctx context.Context, c *admin.Conn, o LfsckBenchOptions) error {
	say(o.Progress, "settling: one unmeasured run, then %s", o.Settle)
	if _, err := c.Run(ctx, 0, &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.Settle):
	}
	return nil
}

// measure runs one component (or all) at full speed and reads its figures.
func measure(ctx context.Context, c *admin.Conn, comp string, files, osts int) (LfsckPoint, error) {
	rep, err := c.Run(ctx, 0, &pb.LfsckStartRequest{Types: []string{comp}, Reset_: true})
	if err != nil {
		return LfsckPoint{}, err
	}
	name := comp
	if comp == "all" {
		name = "namespace"
	}
	cr := rep.Components[name]
	p := LfsckPoint{Files: files, OSTs: osts, Component: comp, Objects: cr.Stats["objects"],
		Seconds: cr.RunTimePhase1 + cr.RunTimePhase2}
	if comp == "layout" || comp == "all" {
		p.Stripes = rep.Components["layout"].Stats["stripes"]
	}
	if comp == "layout" {
		p.Objects = rep.Components["layout"].Stats["files"]
		p.Seconds = rep.Components["layout"].RunTimePhase1 + rep.Components["layout"].RunTimePhase2
	}
	if comp == "all" {
		for _, cc := range rep.Components {
			p.Seconds = max(p.Seconds, cc.RunTimePhase1+cc.RunTimePhase2)
		}
	}
	if f, _ := countFound(rep); f != 0 {
		return p, fmt.Errorf("the checker found %d inconsistencies in a benchmark tree", f)
	}
	if p.Seconds > 0 {
		p.ObjectsPerS = round1(float64(p.Objects) / p.Seconds)
	}
	return p, nil
}

func countFound(r *lfsck.Report) (uint64, uint64) {
	var f, rp uint64
	for _, c := range r.Components {
		f += c.Inconsistent
		rp += c.Repaired
	}
	return f, rp
}

func say(w io.Writer, format string, args ...any) {
	if w != nil {
		fmt.Fprintf(w, format+"\n", args...)
	}
}

// RunLfsckBench runs the benchmarks o asks for.
func RunLfsckBench(ctx context.Context, o LfsckBenchOptions) (*LfsckBenchResult, error) {
	host, _ := os.Hostname()
	res := &LfsckBenchResult{Benchmark: "lfsck", Start: time.Now().UTC(), Host: host, CPUs: runtime.NumCPU()}
	if !o.NodeCPU.IsZero() && len(o.OSTCounts) == 0 && len(o.MDTCounts) == 0 && !(o.Interleave && len(o.Sizes) > 0) {
		return nil, fmt.Errorf("--node-cpu %s gives budgets to the clusters the benchmark starts (--osts, --mdts, --interleave); the cluster of --mgs runs with those `nacre up --node-cpu` gave it", o.NodeCPU)
	}
	if len(o.Sizes) > 0 && o.Interleave {
		if o.Load {
			return nil, errors.New("--interleave builds its own trees; run --load on a cluster of its own (--mgs)")
		}
		pts, err := runScalingInterleaved(ctx, o)
		res.Scaling = pts
		if err != nil {
			return res, err
		}
	} else if len(o.Sizes) > 0 || o.Load {
		if o.MGS == "" {
			return nil, errors.New("the scaling and load runs need a cluster: --mgs HOST:PORT")
		}
		c, err := admin.Dial(ctx, o.MGS, nil)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		have := o.Have
		for _, size := range o.Sizes {
			if size > have {
				say(o.Progress, "populating PopD to %d files (%d dirs x %d subdirs, %d threads)", size, o.Dirs, o.Subdirs, o.Threads)
				if _, err := PopD(ctx, PopDOptions{MGS: o.MGS, Dirs: o.Dirs, Subdirs: o.Subdirs, Threads: o.Threads,
					Files: size - have, Offset: have, StripeCount: o.StripeCount, Progress: o.Progress}); err != nil {
					return res, err
				}
				have = size
			}
			if err := settle(ctx, c, o); err != nil {
				return res, err
			}
			for _, comp := range benchComponents {
				p, err := measureMedian(ctx, c, comp, size, 0, o.Repeat)
				if err != nil {
					return res, err
				}
				say(o.Progress, "%8d files  %-9s %9d objects in %6.2f s: %10.0f objects/s", size, comp, p.Objects, p.Seconds, p.ObjectsPerS)
				res.Scaling = append(res.Scaling, p)
			}
		}
		if o.Load {
			res.LoadFiles = have
			lp, err := runLoad(ctx, c, o)
			res.Load = lp
			if err != nil {
				return res, err
			}
		}
	}
	for _, n := range o.OSTCounts {
		pts, err := runOSTs(ctx, o, n)
		res.TableI = append(res.TableI, pts...)
		if err != nil {
			return res, err
		}
	}
	for _, n := range o.MDTCounts {
		pts, err := runMDTs(ctx, o, n)
		res.MDTScale = append(res.MDTScale, pts...)
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// runMDTs starts a local cluster of n MDTs, puts MDTFiles files in a tree
// on each (/m<k>, a remote directory on MDT k), and runs the namespace
// check on every MDT at once, Repeat times: a point per MDT and run.
func runMDTs(ctx context.Context, o LfsckBenchOptions, n int) ([]LfsckPoint, error) {
	lc, stop, err := startCluster(ctx, o.ClusterDir, fmt.Sprintf("mdts%d", n), localcluster.Options{MDTs: n, OSTs: 1, Binary: o.Binary, NodeCPU: o.NodeCPU}, o.Progress)
	if err != nil {
		return nil, err
	}
	defer stop()
	cl, err := client.New(ctx, client.Config{MGS: lc.MGS})
	if err != nil {
		return nil, err
	}
	for k := 0; k < n; k++ {
		on := uint32(k)
		if _, _, err := cl.Create(ctx, fid.Root, fmt.Sprintf("m%d", k), syscall.S_IFDIR|0o755, client.CreateOpts{Exclusive: true, MDT: &on}); err != nil {
			cl.Close()
			return nil, err
		}
	}
	cl.Close()
	for k := 0; k < n; k++ {
		say(o.Progress, "populating /m%d on MDT%04x: %d files", k, k, o.MDTFiles)
		if _, err := PopD(ctx, PopDOptions{MGS: lc.MGS, Root: fmt.Sprintf("m%d", k), Dirs: o.Dirs, Subdirs: o.Subdirs, Threads: o.Threads,
			Files: o.MDTFiles, StripeCount: 1, Progress: o.Progress}); err != nil {
			return nil, err
		}
	}
	c, err := admin.Dial(ctx, lc.MGS, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	all := func() ([]*lfsck.Report, error) {
		reps := make([]*lfsck.Report, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for k := 0; k < n; k++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				reps[k], errs[k] = c.Run(ctx, uint32(k), &pb.LfsckStartRequest{Types: []string{"namespace"}, Reset_: true})
			}()
		}
		wg.Wait()
		return reps, errors.Join(errs...)
	}
	say(o.Progress, "settling: one unmeasured run on every MDT, then %s", o.Settle)
	if _, err := all(); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(o.Settle):
	}
	var out []LfsckPoint
	for r := 0; r < max(o.Repeat, 1); r++ {
		reps, err := all()
		if err != nil {
			return out, err
		}
		for k, rep := range reps {
			if f, _ := countFound(rep); f != 0 {
				return out, fmt.Errorf("the checker found %d inconsistencies on MDT%04x in a benchmark tree", f, k)
			}
			cr := rep.Components["namespace"]
			idx := uint32(k)
			p := LfsckPoint{Files: o.MDTFiles, MDTs: n, MDT: &idx, Component: "namespace", Objects: cr.Stats["objects"],
				Seconds: cr.RunTimePhase1 + cr.RunTimePhase2, NodeCPU: nodeCPU(o)}
			if p.Seconds > 0 {
				p.ObjectsPerS = round1(float64(p.Objects) / p.Seconds)
			}
			say(o.Progress, "%d MDTs  MDT%04x  namespace %9d objects in %6.2f s: %10.0f objects/s%s", n, k, p.Objects, p.Seconds, p.ObjectsPerS, budgetNote(o))
			out = append(out, p)
		}
	}
	return out, nil
}

// runOSTs starts a local cluster with n OSTs, populates it with files
// striped over every OST, and checks it.
func runOSTs(ctx context.Context, o LfsckBenchOptions, n int) ([]LfsckPoint, error) {
	lc, stop, err := benchCluster(ctx, o, fmt.Sprintf("osts%d", n), n)
	if err != nil {
		return nil, err
	}
	defer stop()
	sc := o.OSTStripes
	if sc == 0 {
		sc = -1
	}
	if _, err := PopD(ctx, PopDOptions{MGS: lc.MGS, Dirs: o.Dirs, Subdirs: o.Subdirs, Threads: o.Threads, Files: o.OSTFiles,
		StripeCount: sc, Progress: o.Progress}); err != nil {
		return nil, err
	}
	if o.OSTRestart {
		say(o.Progress, "restarting the cluster: the stores then hold the files in their tables, not in memtables")
		if err := localcluster.Down(lc.Dir, io.Discard); err != nil {
			return nil, fmt.Errorf("restart the cluster in %s: %w", lc.Dir, err)
		}
		if lc, err = localcluster.Up(ctx, localcluster.Options{Dir: lc.Dir, OSTs: n, Binary: o.Binary, Out: io.Discard, NodeCPU: o.NodeCPU}); err != nil {
			return nil, fmt.Errorf("restart the cluster in %s: %w", lc.Dir, err)
		}
		if err := waitPools(ctx, lc.MGS, n); err != nil {
			return nil, err
		}
	}
	var mdtPids, ostPids []int
	for _, t := range lc.Targets {
		switch {
		case strings.HasPrefix(filepath.Base(t.Dir), "mdt"):
			mdtPids = append(mdtPids, t.Pid)
		case strings.HasPrefix(filepath.Base(t.Dir), "ost"):
			ostPids = append(ostPids, t.Pid)
		}
	}
	c, err := admin.Dial(ctx, lc.MGS, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := settle(ctx, c, o); err != nil {
		return nil, err
	}
	var out []LfsckPoint
	for _, comp := range []string{"layout", "all"} {
		m0, o0 := cpuSeconds(mdtPids), cpuSeconds(ostPids)
		p, err := measureMedian(ctx, c, comp, o.OSTFiles, n, o.Repeat)
		if err != nil {
			return out, err
		}
		runs := float64(max(o.Repeat, 1))
		p.MDTCPUSeconds = round3((cpuSeconds(mdtPids) - m0) / runs)
		p.OSTCPUSeconds = round3((cpuSeconds(ostPids) - o0) / runs)
		p.StripeCount, p.Restarted, p.NodeCPU = sc, o.OSTRestart, nodeCPU(o)
		say(o.Progress, "%d OSTs  %8d files  %-6s %6.2f s  (%d stripes; CPU per run: MDT %.2f s, OSTs %.2f s%s)",
			n, o.OSTFiles, comp, p.Seconds, p.Stripes, p.MDTCPUSeconds, p.OSTCPUSeconds, budgetNote(o))
		out = append(out, p)
	}
	return out, nil
}

// benchCluster starts a fresh local cluster with n OSTs in a directory
// named name under o.ClusterDir (or a temporary directory) and waits for
// its pools; stop stops it and removes a temporary directory.
func benchCluster(ctx context.Context, o LfsckBenchOptions, name string, n int) (*localcluster.Cluster, func(), error) {
	return startCluster(ctx, o.ClusterDir, name, localcluster.Options{OSTs: n, Binary: o.Binary, NodeCPU: o.NodeCPU}, o.Progress)
}

// startCluster starts a fresh local cluster as lo says, in a directory
// named name under base (or under a temporary directory if base is ""),
// and waits for its pools; stop stops it and removes a temporary
// directory (one under base stays, to be looked at).
func startCluster(ctx context.Context, base, name string, lo localcluster.Options, progress io.Writer) (*localcluster.Cluster, func(), error) {
	temp := base == ""
	if temp {
		d, err := os.MkdirTemp("", "nacre-bench-")
		if err != nil {
			return nil, nil, err
		}
		base = d
	}
	lo.Dir, lo.Out = filepath.Join(base, name), io.Discard
	os.RemoveAll(lo.Dir)
	stop := func() {
		localcluster.Down(lo.Dir, io.Discard)
		if temp {
			os.RemoveAll(base)
		}
	}
	say(progress, "starting a cluster with %d MDT(s) and %d OST(s) in %s", max(lo.MDTs, 1), lo.OSTs, lo.Dir)
	lc, err := localcluster.Up(ctx, lo)
	if err != nil {
		stop()
		return nil, nil, err
	}
	if msg := lc.BudgetSummary(); msg != "" {
		say(progress, "%s", msg)
	}
	// The MDSs learn of the OSTs and fill their pools in the first second
	// or two; files made before then get fewer stripes than -1 means.
	if err := waitPools(ctx, lc.MGS, lo.OSTs); err != nil {
		stop()
		return nil, nil, err
	}
	return lc, stop, nil
}

// nodeCPU is the CPU budgets of the clusters the benchmark starts, for
// their points (nil: none).
func nodeCPU(o LfsckBenchOptions) *localcluster.NodeCPU {
	if o.NodeCPU.IsZero() {
		return nil
	}
	n := o.NodeCPU
	return &n
}

// budgetNote adds the CPU budgets to a result line of a cluster the
// benchmark started ("" without).
func budgetNote(o LfsckBenchOptions) string {
	if o.NodeCPU.IsZero() {
		return ""
	}
	return "; node CPU " + o.NodeCPU.String()
}

// runScalingInterleaved is the scaling test with a tree (and a local
// cluster) per size, all kept up, and the measurements taken in rounds
// that visit every size in turn. Growing one tree measures each size at
// a different time, and on a VM whose speed drifts by ±15 % from one
// minute to the next that drift lands between the sizes; here it lands
// on all of them alike.
func runScalingInterleaved(ctx context.Context, o LfsckBenchOptions) ([]LfsckPoint, error) {
	type tree struct {
		size int
		c    *admin.Conn
		pts  map[string][]LfsckPoint
	}
	var trees []*tree
	defer func() {
		for _, t := range trees {
			t.c.Close()
		}
	}()
	for _, size := range o.Sizes {
		lc, stop, err := benchCluster(ctx, o, fmt.Sprintf("files%d", size), 2)
		if err != nil {
			return nil, err
		}
		defer stop()
		say(o.Progress, "populating PopD to %d files (%d dirs x %d subdirs, %d threads)", size, o.Dirs, o.Subdirs, o.Threads)
		if _, err := PopD(ctx, PopDOptions{MGS: lc.MGS, Dirs: o.Dirs, Subdirs: o.Subdirs, Threads: o.Threads,
			Files: size, StripeCount: o.StripeCount, Progress: o.Progress}); err != nil {
			return nil, err
		}
		c, err := admin.Dial(ctx, lc.MGS, nil)
		if err != nil {
			return nil, err
		}
		trees = append(trees, &tree{size: size, c: c, pts: map[string][]LfsckPoint{}})
	}
	for _, t := range trees {
		if err := settle(ctx, t.c, o); err != nil {
			return nil, err
		}
	}
	rounds := max(o.Repeat, 1)
	for r := 1; r <= rounds; r++ {
		for _, t := range trees {
			for _, comp := range benchComponents {
				p, err := measure(ctx, t.c, comp, t.size, 0)
				if err != nil {
					return nil, err
				}
				p.NodeCPU = nodeCPU(o)
				t.pts[comp] = append(t.pts[comp], p)
				say(o.Progress, "round %d/%d %8d files  %-9s %9d objects in %6.2f s: %10.0f objects/s%s", r, rounds, t.size, comp, p.Objects, p.Seconds, p.ObjectsPerS, budgetNote(o))
			}
		}
	}
	var out []LfsckPoint
	for _, t := range trees {
		for _, comp := range benchComponents {
			pts := t.pts[comp]
			sort.Slice(pts, func(i, j int) bool { return pts[i].ObjectsPerS < pts[j].ObjectsPerS })
			out = append(out, pts[len(pts)/2])
		}
	}
	return out, nil
}

// runLoad measures the create rate alone, with the namespace checker at
// full speed, and at 1/5 to 4/5 of the checker's full speed under the same
// create load.
func runLoad(ctx context.Context, c *admin.Conn, o LfsckBenchOptions) ([]LoadPoint, error) {
	secs := o.LoadSeconds
	if secs <= 0 {
		secs = 20
	}
	full, err := measureMedian(ctx, c, "namespace", 0, 0, o.Repeat)
	if err != nil {
		return nil, err
	}
	say(o.Progress, "load: full speed unloaded: %.0f objects/s", full.ObjectsPerS)
	// fifths: 0 for no limit; k for a limit of k/5 of the full speed under
	// the same create load (measured in the "full" setting), not of the
	// unloaded speed: under load the checker gets a share of the cores, and
	// a limit above what it reaches limits nothing.
	type setting struct {
		name   string
		fifths int
		on     bool
	}
	settings := []setting{{"none", 0, false}, {"full", 0, true}}
	for k := 1; k <= 4; k++ {
		settings = append(settings, setting{fmt.Sprintf("%d/5", k), k, true})
	}
	var loadedFull float64
	// Each setting is measured right after a run without the checker, and
	// compared with it: the machine's drift (other work on a shared VM)
	// cancels out better than against one baseline.
	rounds := max(o.LoadRounds, 1)
	var out []LoadPoint
	for i, s := range settings {
		var speed uint64
		if s.fifths > 0 {
			speed = max(1, uint64(loadedFull*float64(s.fifths)/5))
		}
		var base, with, checker float64
		var lp LoadPoint
		for round := 0; round < rounds; round++ {
			if s.on {
				b, err := loadOnce(ctx, c, o, secs, fmt.Sprintf("base%d.%d", i, round), 0, false)
				if err != nil {
					return out, err
				}
				base += b.CreatesPerS
			}
			p, err := loadOnce(ctx, c, o, secs, fmt.Sprintf("load%d.%d", i, round), speed, s.on)
			if err != nil {
				return out, err
			}
			with += p.CreatesPerS
			checker += p.CheckerPerS
			lp = p
		}
		if !s.on {
			base = with
		}
		lp.CreatesPerS = round1(with / float64(rounds))
		lp.CheckerPerS = round1(checker / float64(rounds))
		base /= float64(rounds)
		lp.Setting = s.name
		lp.SpeedLimit = speed
		if s.name == "full" {
			loadedFull = lp.CheckerPerS
			say(o.Progress, "load: full speed under load: %.0f objects/s; the limits below are fractions of it", loadedFull)
		}
		lp.BaseCreatesPerS = round1(base)
		if base > 0 {
			lp.RelativeRate = float64(int64(lp.CreatesPerS/base*1000+0.5)) / 1000
		}
		say(o.Progress, "load: checker %-5s (limit %7d/s): %8.0f creates/s vs %8.0f without (%.0f%%), checker %9.0f objects/s",
			s.name, speed, lp.CreatesPerS, base, lp.RelativeRate*100, lp.CheckerPerS)
		out = append(out, lp)
	}
	return out, nil
}

// loadOnce creates files with o.Threads threads for secs seconds while
// the namespace checker runs again and again (if on).
func loadOnce(ctx context.Context, c *admin.Conn, o LfsckBenchOptions, secs float64, dir string, speed uint64, on bool) (LoadPoint, error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var checked atomic.Uint64
	rounds := 0
	var cerr error
	var cwg sync.WaitGroup
	if on {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for lctx.Err() == nil {
				req := &pb.LfsckStartRequest{Types: []string{"namespace"}, Reset_: true}
				if speed > 0 {
					req.Speed = &speed
				}
				rep, err := c.Run(lctx, 0, req)
				if err != nil {
					if lctx.Err() == nil {
						cerr = err
					}
					return
				}
				checked.Add(rep.Components["namespace"].Stats["objects"])
				rounds++
			}
		}()
		time.Sleep(200 * time.Millisecond)
	}
	dur := time.Duration(secs * float64(time.Second))
	t0 := time.Now()
	r, err := PopD(ctx, PopDOptions{MGS: o.MGS, Root: "popd-" + dir, Dirs: 2, Subdirs: 4, Threads: o.Threads, Files: 1 << 30, For: dur})
	el := time.Since(t0).Seconds()
	if on {
		// The round in progress counts too.
		if rep, err := c.Report(ctx, 0); err == nil && rep.Running {
			checked.Add(rep.Components["namespace"].Stats["objects"])
		}
	}
	cancel()
	if on {
		c.Stop(context.Background(), 0)
	}
	cwg.Wait()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) && r == nil {
		return LoadPoint{}, err
	}
	if cerr != nil {
		return LoadPoint{}, cerr
	}
	lp := LoadPoint{SpeedLimit: speed, CheckerRounds: rounds}
	if r != nil {
		lp.CreatesPerS = round1(float64(r.Files) / dur.Seconds()) // creating lasted For
	}
	lp.CheckerPerS = round1(float64(checked.Load()) / el)
	return lp, nil
}

// timeUp reports whether ctx is done or its deadline passed (a call's own
// derived deadline can fire a moment before ctx's).
func timeUp(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d.Add(-50*time.Millisecond))
}

// cpuSeconds sums the user and system CPU time of processes (those
// that are gone count nothing).
func cpuSeconds(pids []int) float64 {
	var total float64
	for _, pid := range pids {
		if t, err := cgroup.ProcessCPU(pid); err == nil {
			total += t.Seconds()
		}
	}
	return total
}

// waitPools waits until the MDT has precreated objects on n OSTs (its
// nacre_mds_precreate_pool_objects gauge), so that a file striped over
// every OST gets n stripes.
func waitPools(ctx context.Context, mgs string, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ready := 0
		if st, err := cli.GetStatus(ctx, mgs, nil); err == nil {
			for _, t := range st.Targets {
				if !strings.Contains(t.Name, "MDT") || t.MetricsURL == "" {
					continue
				}
				if sc, err := obs.Fetch(ctx, t.MetricsURL); err == nil {
					for _, ost := range sc.LabelValues("nacre_mds_precreate_pool_objects", "ost") {
						if sc.Sum("nacre_mds_precreate_pool_objects", map[string]string{"ost": ost}) > 0 {
							ready++
						}
					}
				}
			}
		}
		if ready >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the MDT has objects on %d of %d OSTs after 30 s; see `nacre status`", ready, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
