// Package bench holds Nacre's benchmarks: mdtest-like metadata phases,
// and the result model they share (per-phase rates and latency
// percentiles, as tables and JSON).
package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"sort"
	"sync"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
)

// MDOptions configure the metadata benchmark.
type MDOptions struct {
	MGS       string
	Workers   int  // concurrent workers, each with its own client (as mdtest ranks)
	Items     int  // files per worker
	SharedDir bool // all workers in one directory (else one directory each)
	// StripeCount of the benchmark's files (0: file system default).
	StripeCount int
	// Progress receives a line per finished phase (nil: none).
	Progress io.Writer
}

// Phase is one measured phase.
type Phase struct {
	Name      string  `json:"name"`
	Ops       int     `json:"ops"`
	Errors    int     `json:"errors"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"ops_per_sec"`
	MeanUs    float64 `json:"mean_us"`
	MinUs     float64 `json:"min_us"`
	P50Us     float64 `json:"p50_us"`
	P99Us     float64 `json:"p99_us"`
	MaxUs     float64 `json:"max_us"`
}

// MDResult is the outcome of RunMD.
type MDResult struct {
	Benchmark string    `json:"benchmark"`
	Target    string    `json:"target"`
	Workers   int       `json:"workers"`
	Items     int       `json:"items_per_worker"`
	SharedDir bool      `json:"shared_dir"`
	Stripes   int       `json:"stripe_count"`
	Start     time.Time `json:"start"`
	Phases    []Phase   `json:"phases"`
}

// worker is one mdtest rank.
type worker struct {
	c   *client.Client
	dir fid.FID
	pfx string
}

// RunMD runs file create, stat and remove through the client library.
func RunMD(ctx context.Context, o MDOptions) (*MDResult, error) {
	if o.Workers <= 0 || o.Items <= 0 {
		return nil, fmt.Errorf("--workers and --items must be at least 1 (got %d and %d)", o.Workers, o.Items)
	}
	res := &MDResult{Benchmark: "md", Target: "nacre client library (" + o.MGS + ")", Workers: o.Workers, Items: o.Items,
		SharedDir: o.SharedDir, Stripes: o.StripeCount, Start: time.Now()}
	ws := make([]*worker, o.Workers)
	for i := range ws {
		c, err := client.New(ctx, client.Config{MGS: o.MGS})
		if err != nil {
			closeAll(ws)
			return nil, err
		}
		ws[i] = &worker{c: c, pfx: fmt.Sprintf("f.%d.", i)}
	}
	defer closeAll(ws)
	c := ws[0].c
	var rb [4]byte
	rand.Read(rb[:])
	baseName := "nacre-bench-md-" + hex.EncodeToString(rb[:])
	base, err := c.Mkdir(ctx, fid.Root, baseName, 0o755)
	if err != nil {
		return nil, fmt.Errorf("make benchmark directory: %w", err)
	}
	defer cleanup(context.Background(), c, baseName, ws, o)
	if o.StripeCount != 0 {
		if _, err := c.SetLayout(ctx, fid.FromPB(base.Fid), &pb.Layout{StripeCount: int32(o.StripeCount), StripeOffset: -1}); err != nil {
			return nil, err
		}
	}
	for i, w := range ws {
		w.dir = fid.FromPB(base.Fid)
		if !o.SharedDir {
			d, err := c.Mkdir(ctx, w.dir, fmt.Sprintf("w%d", i), 0o755)
			if err != nil {
				return nil, err
			}
			w.dir = fid.FromPB(d.Fid)
		}
	}
	phases := []struct {
		name string
		op   func(ctx context.Context, w *worker, i int) error
	}{
		{"file_create", func(ctx context.Context, w *worker, i int) error {
			_, _, err := w.c.Create(ctx, w.dir, fmt.Sprint(w.pfx, i), syscall.S_IFREG|0o644, client.CreateOpts{Exclusive: true})
			return err
		}},
		{"file_stat", func(ctx context.Context, w *worker, i int) error {
			_, err := w.c.Lookup(ctx, w.dir, fmt.Sprint(w.pfx, i))
			return err
		}},
		{"file_remove", func(ctx context.Context, w *worker, i int) error {
			_, err := w.c.Unlink(ctx, w.dir, fmt.Sprint(w.pfx, i))
			return err
		}},
	}
	for _, ph := range phases {
		p, err := runPhase(ctx, ph.name, ws, o.Items, ph.op)
		if err != nil {
			return res, err
		}
		res.Phases = append(res.Phases, p)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "%-12s %10.0f ops/s  mean %8.1f us  p99 %8.1f us\n", p.Name, p.OpsPerSec, p.MeanUs, p.P99Us)
		}
	}
	return res, nil
}

func closeAll(ws []*worker) {
	for _, w := range ws {
		if w != nil {
			w.c.Close()
		}
	}
}

func cleanup(ctx context.Context, c *client.Client, baseName string, ws []*worker, o MDOptions) {
	if !o.SharedDir {
		base, err := c.Lookup(ctx, fid.Root, baseName)
		if err == nil {
			for i := range ws {
				c.Rmdir(ctx, fid.FromPB(base.Fid), fmt.Sprintf("w%d", i))
			}
		}
	}
	c.Rmdir(ctx, fid.Root, baseName)
}

// runPhase runs op for every item of every worker, all workers at once, and
// measures the rate over the slowest worker (as mdtest does).
func runPhase(ctx context.Context, name string, ws []*worker, items int, op func(context.Context, *worker, int) error) (Phase, error) {
	lat := make([][]time.Duration, len(ws))
	errs := make([]int, len(ws))
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for wi, w := range ws {
		wg.Add(1)
		go func(wi int, w *worker) {
			defer wg.Done()
			l := make([]time.Duration, 0, items)
			for i := 0; i < items; i++ {
				t0 := time.Now()
				if err := op(ctx, w, i); err != nil {
					errs[wi]++
					once.Do(func() { firstErr = fmt.Errorf("%s: %w", name, err) })
					continue
				}
				l = append(l, time.Since(t0))
			}
			lat[wi] = l
		}(wi, w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all []time.Duration
	nerr := 0
	for i := range lat {
		all = append(all, lat[i]...)
		nerr += errs[i]
	}
	p := Summarize(name, all, elapsed)
	p.Errors = nerr
	if nerr > 0 {
		return p, fmt.Errorf("%d of %d operations failed; first: %w", nerr, len(ws)*items, firstErr)
	}
	return p, nil
}

// Summarize computes a phase's rate and latency figures.
func Summarize(name string, lat []time.Duration, elapsed time.Duration) Phase {
	p := Phase{Name: name, Ops: len(lat), Seconds: elapsed.Seconds()}
	if len(lat) == 0 {
		return p
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	us := func(d time.Duration) float64 { return math.Round(float64(d.Nanoseconds())/10) / 100 }
	pct := func(q float64) time.Duration { return lat[min(len(lat)-1, int(q*float64(len(lat))))] }
	p.OpsPerSec = math.Round(float64(len(lat))/elapsed.Seconds()*10) / 10
	p.MeanUs = us(sum / time.Duration(len(lat)))
	p.MinUs, p.MaxUs = us(lat[0]), us(lat[len(lat)-1])
	p.P50Us, p.P99Us = us(pct(0.50)), us(pct(0.99))
	return p
}
