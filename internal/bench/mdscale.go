package bench

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	"nacre/internal/localcluster"
)

// MDScaleOptions run the metadata benchmark on fresh local clusters of
// several MDT counts (nacre bench md --mdts 1,2,4): each worker in its own
// directory, worker i's on MDT i % N, so that N MDTs share the work.
type MDScaleOptions struct {
	// MD are the phases, workers and items of every run (its MGS, Path
	// and SpreadMDTs are set per cluster).
	MD        MDOptions
	MDTCounts []int
	OSTs      int
	// NodeCPU gives each target process a CPU budget of its own, so that
	// each MDT behaves as a server of its own on a machine with few cores.
	NodeCPU localcluster.NodeCPU
	Binary  string
	// ClusterDir holds the clusters' directories (default: a temporary
	// directory, removed at the end).
	ClusterDir string
	Progress   io.Writer
}

// MDScaleRun is one MDT count's run.
type MDScaleRun struct {
	MDTs   int       `json:"mdts"`
	Result *MDResult `json:"result"`
	// Speedup is each phase's rate over the first count's.
	Speedup map[string]float64 `json:"speedup"`
}

// MDScaleResult is the outcome of RunMDScale.
type MDScaleResult struct {
	Benchmark string       `json:"benchmark"`
	Workers   int          `json:"workers"`
	Items     int          `json:"items_per_worker"`
	OSTs      int          `json:"osts"`
	NodeCPU   string       `json:"node_cpu,omitempty"`
	Start     time.Time    `json:"start"`
	Runs      []MDScaleRun `json:"runs"`
}

// RunMDScale starts a cluster per MDT count in turn, runs the phases on
// it and stops it.
func RunMDScale(ctx context.Context, o MDScaleOptions) (*MDScaleResult, error) {
	if len(o.MDTCounts) == 0 {
		return nil, fmt.Errorf("--mdts: give the MDT counts to compare, e.g. 1,2,4")
	}
	for _, n := range o.MDTCounts {
		if err := localcluster.CheckMDTs(n); err != nil {
			return nil, err
		}
	}
	if o.MD.SharedDir || o.MD.Path != "" {
		return nil, fmt.Errorf("--mdts compares clusters it starts, each worker in its own directory on its own MDT: not with --path or --shared-dir")
	}
	if o.OSTs == 0 {
		o.OSTs = 1
	}
	res := &MDScaleResult{Benchmark: "md-mdts", Workers: o.MD.Workers, Items: o.MD.Items, OSTs: o.OSTs, Start: time.Now()}
	if !o.NodeCPU.IsZero() {
		res.NodeCPU = o.NodeCPU.String()
	}
	for _, n := range o.MDTCounts {
		r, err := mdScaleOne(ctx, o, n)
		if err != nil {
			return nil, fmt.Errorf("%d MDTs: %w", n, err)
		}
		run := MDScaleRun{MDTs: n, Result: r, Speedup: map[string]float64{}}
		for _, p := range r.Phases {
			if len(res.Runs) > 0 {
				if b := findPhase(res.Runs[0].Result, p.Name); b != nil && b.OpsPerSec > 0 {
					run.Speedup[p.Name] = p.OpsPerSec / b.OpsPerSec
				}
			} else {
				run.Speedup[p.Name] = 1
			}
		}
		res.Runs = append(res.Runs, run)
	}
	return res, nil
}

func mdScaleOne(ctx context.Context, o MDScaleOptions, n int) (*MDResult, error) {
	lc, stop, err := startCluster(ctx, o.ClusterDir, fmt.Sprintf("mdts%d", n),
		localcluster.Options{MDTs: n, OSTs: o.OSTs, Binary: o.Binary, NodeCPU: o.NodeCPU}, o.Progress)
	if err != nil {
		return nil, err
	}
	defer stop()
	md := o.MD
	md.MGS, md.TLS, md.SpreadMDTs, md.Progress = lc.MGS, lc.TLS, n, o.Progress
	return RunMD(ctx, md)
}

func findPhase(r *MDResult, name string) *Phase {
	for i := range r.Phases {
		if r.Phases[i].Name == name {
			return &r.Phases[i]
		}
	}
	return nil
}

// PrintMDScale prints each phase's rate per MDT count, and its ratio to
// the first count's.
func PrintMDScale(w io.Writer, r *MDScaleResult) {
	budget := ""
	if r.NodeCPU != "" {
		budget = ", node CPU " + r.NodeCPU
	}
	fmt.Fprintf(w, "md benchmark over MDT counts: %d workers x %d items, each worker's directory on MDT i %% N, %d OST(s)%s\n", r.Workers, r.Items, r.OSTs, budget)
	if len(r.Runs) == 0 {
		return
	}
	t := newTable(w)
	hdr := table.Row{"PHASE"}
	for _, run := range r.Runs {
		hdr = append(hdr, fmt.Sprintf("%d MDT OPS/S", run.MDTs), "x")
	}
	t.AppendHeader(hdr)
	for _, p := range r.Runs[0].Result.Phases {
		row := table.Row{p.Name}
		for _, run := range r.Runs {
			q := findPhase(run.Result, p.Name)
			if q == nil {
				row = append(row, "-", "-")
				continue
			}
			row = append(row, f0(q.OpsPerSec), fmt.Sprintf("%.2f", run.Speedup[p.Name]))
		}
		t.AppendRow(row)
	}
	var cc []table.ColumnConfig
	for i := 2; i <= 1+2*len(r.Runs); i++ {
		cc = append(cc, table.ColumnConfig{Number: i, Align: text.AlignRight})
	}
	t.SetColumnConfigs(cc)
	t.Render()
}
