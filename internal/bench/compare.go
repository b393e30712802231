package bench

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// Target is one side of a comparison: "path:DIR" (a mounted file system)
// or "mgs:HOST:PORT" (a Nacre cluster through the client library).
type Target struct {
	Label string
	Path  string
	MGS   string
}

// ParseTarget reads a target specification.
func ParseTarget(s string) (Target, error) {
	kind, v, ok := strings.Cut(s, ":")
	switch {
	case ok && kind == "path" && v != "":
		return Target{Label: s, Path: v}, nil
	case ok && kind == "mgs" && v != "":
		return Target{Label: s, MGS: v}, nil
	}
	return Target{}, fmt.Errorf("target %q: use path:DIR or mgs:HOST:PORT", s)
}

// CompareOptions configure `nacre bench compare`.
type CompareOptions struct {
	A, B     Target
	Rounds   int
	Bench    string // "md" or "io"
	MD       MDOptions
	IO       IOOptions
	Progress io.Writer
	// Timeline records every run's per-second timeline (with the servers
	// of an mgs: target) into CompareResult.Points, one after the other,
	// phases named "LABEL PHASE", for --plot.
	Timeline bool
	// TimelineEvery is the sampling interval (0: 1 s).
	TimelineEvery time.Duration
}

// CompareRow is one figure compared.
type CompareRow struct {
	Name     string    `json:"name"`
	Unit     string    `json:"unit"`
	A        []float64 `json:"a"`
	B        []float64 `json:"b"`
	Ratios   []float64 `json:"ratios"`
	Median   float64   `json:"median_ratio"`
	MinRatio float64   `json:"min_ratio"`
	MaxRatio float64   `json:"max_ratio"`
}

// CompareResult is the outcome of RunCompare.
type CompareResult struct {
	Benchmark string       `json:"benchmark"`
	A         string       `json:"a"`
	B         string       `json:"b"`
	Rounds    int          `json:"rounds"`
	Rows      []CompareRow `json:"rows"`
	// Points: the runs' timelines back to back (Timeline option).
	Points []TimelinePoint `json:"-"`
}

func runFigures(ctx context.Context, o CompareOptions, t Target, tl *Timeline) (map[string]float64, []string, string, error) {
	figs := map[string]float64{}
	var order []string
	switch o.Bench {
	case "md":
		m := o.MD
		m.Path, m.MGS, m.Progress, m.Timeline = t.Path, t.MGS, nil, tl
		r, err := RunMD(ctx, m)
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s: %w", t.Label, err)
		}
		for _, p := range r.Phases {
			figs[p.Name] = p.OpsPerSec
			order = append(order, p.Name)
		}
		return figs, order, "ops/s", nil
	case "io":
		i := o.IO
		i.Path, i.MGS, i.Progress, i.Timeline = t.Path, t.MGS, nil, tl
		r, err := RunIO(ctx, i)
		if err != nil {
			return nil, nil, "", fmt.Errorf("%s: %w", t.Label, err)
		}
		for _, row := range r.Rows {
			k := fmt.Sprintf("%s %s %s", row.Pattern, row.Mode, row.Op)
			if row.StripeCount != 0 {
				k += fmt.Sprintf(" c%d", row.StripeCount)
			}
			figs[k] = row.MiBPerSec
			order = append(order, k)
		}
		return figs, order, "MiB/s", nil
	}
	return nil, nil, "", fmt.Errorf("compare runs md or io, not %q", o.Bench)
}

// RunCompare alternates the two targets for the rounds (A then B, then B
// then A, ...) so that drift on a noisy machine hits both alike.
func RunCompare(ctx context.Context, o CompareOptions) (*CompareResult, error) {
	if o.Rounds <= 0 {
		o.Rounds = 3
	}
	res := &CompareResult{Benchmark: o.Bench, A: o.A.Label, B: o.B.Label, Rounds: o.Rounds}
	rows := map[string]*CompareRow{}
	var order []string
	for r := 0; r < o.Rounds; r++ {
		sides := []Target{o.A, o.B}
		if r%2 == 1 {
			sides = []Target{o.B, o.A}
		}
		got := map[string]map[string]float64{}
		for _, t := range sides {
			var tl *Timeline
			if o.Timeline {
				tl = &Timeline{MGS: t.MGS, Unit: "ops", Interval: o.TimelineEvery}
			}
			figs, ord, unit, err := runFigures(ctx, o, t, tl)
			if err != nil {
				return res, err
			}
			if tl != nil {
				res.appendTimeline(t.Label, tl.Points())
			}
			got[t.Label] = figs
			for _, k := range ord {
				if rows[k] == nil {
					rows[k] = &CompareRow{Name: k, Unit: unit}
					order = append(order, k)
				}
			}
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "round %d/%d: %s done\n", r+1, o.Rounds, t.Label)
			}
		}
		for k, row := range rows {
			a, b := got[o.A.Label][k], got[o.B.Label][k]
			row.A, row.B = append(row.A, a), append(row.B, b)
			if b > 0 {
				row.Ratios = append(row.Ratios, a/b)
			}
		}
	}
	for _, k := range order {
		row := rows[k]
		if len(row.Ratios) > 0 {
			s := append([]float64(nil), row.Ratios...)
			sort.Float64s(s)
			row.Median = round3(median(s))
			row.MinRatio, row.MaxRatio = round3(s[0]), round3(s[len(s)-1])
		}
		res.Rows = append(res.Rows, *row)
	}
	return res, nil
}

func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func round3(v float64) float64 { return float64(int64(v*1000+0.5)) / 1000 }

func medianOf(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return median(s)
}

// PrintCompare writes the ratios.
func PrintCompare(w io.Writer, r *CompareResult) {
	fmt.Fprintf(w, "%s: A = %s, B = %s, %d rounds alternating (ratio = A/B, median and range)\n", r.Benchmark, r.A, r.B, r.Rounds)
	t := newTable(w)
	t.AppendHeader(table.Row{"FIGURE", "A (median)", "B (median)", "RATIO A/B", "RANGE"})
	for _, row := range r.Rows {
		t.AppendRow(table.Row{row.Name, fmt.Sprintf("%.1f %s", medianOf(row.A), row.Unit), fmt.Sprintf("%.1f %s", medianOf(row.B), row.Unit),
			fmt.Sprintf("%.2fx", row.Median), fmt.Sprintf("%.2f–%.2f", row.MinRatio, row.MaxRatio)})
	}
	t.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: text.AlignRight}, {Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}})
	t.Render()
}

// appendTimeline adds one run's timeline after the ones before it.
func (r *CompareResult) appendTimeline(label string, pts []TimelinePoint) {
	off := 0.0
	if n := len(r.Points); n > 0 {
		off = r.Points[n-1].T
	}
	for _, p := range pts {
		p.T += off
		p.Phase = label + " " + p.Phase
		r.Points = append(r.Points, p)
	}
}
