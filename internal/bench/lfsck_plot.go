package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// WriteLfsckPlots draws the checker's figures into dir: lfsck-scaling.png
// (objects/s per component against the tree size), lfsck-osts.png (time
// against the number of OSTs) and lfsck-load.png (the create rate under
// the checker). It returns the files written.
func WriteLfsckPlots(dir string, r *LfsckBenchResult) ([]string, error) {
	var out []string
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if len(r.Scaling) > 0 {
		p := plot.New()
		p.Title.Text = "nacre lfsck: scan speed as the tree grows (PopD, full speed)"
		p.X.Label.Text = "files (millions)"
		p.Y.Label.Text = "objects/s"
		// Speeds sit well above zero: the bottom right stays clear.
		p.Legend.Top = false
		p.Legend.Left = false
		byComp := map[string]plotter.XYs{}
		for _, pt := range r.Scaling {
			byComp[pt.Component] = append(byComp[pt.Component], plotter.XY{X: float64(pt.Files) / 1e6, Y: pt.ObjectsPerS})
		}
		if err := addLines(p, byComp, benchComponents); err != nil {
			return out, err
		}
		p.Y.Min = 0
		f := filepath.Join(dir, "lfsck-scaling.png")
		if err := p.Save(7*vg.Inch, 4*vg.Inch, f); err != nil {
			return out, err
		}
		out = append(out, f)
	}
	if len(r.TableI) > 0 {
		p := plot.New()
		p.Title.Text = "nacre lfsck: the same files striped over 2, 4 and 8 OSTs (seed 000's Table I)"
		p.X.Label.Text = "OSTs"
		p.Y.Label.Text = "seconds"
		p.Legend.Top = true
		p.Legend.Left = true
		byComp := map[string]plotter.XYs{}
		for _, pt := range r.TableI {
			byComp[pt.Component] = append(byComp[pt.Component], plotter.XY{X: float64(pt.OSTs), Y: pt.Seconds})
		}
		if err := addLines(p, byComp, []string{"layout", "all"}); err != nil {
			return out, err
		}
		p.Y.Min = 0
		f := filepath.Join(dir, "lfsck-osts.png")
		if err := p.Save(7*vg.Inch, 4*vg.Inch, f); err != nil {
			return out, err
		}
		out = append(out, f)
	}
	if len(r.Load) > 0 {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("nacre lfsck under load: create rate with the namespace check running (%d files)", r.LoadFiles)
		p.Y.Label.Text = "creates/s (relative to none)"
		vals := plotter.Values{}
		var names []string
		for _, lp := range r.Load {
			vals = append(vals, lp.RelativeRate)
			names = append(names, lp.Setting)
		}
		bars, err := plotter.NewBarChart(vals, vg.Points(30))
		if err != nil {
			return out, err
		}
		bars.Color = palette[0]
		p.Add(bars)
		p.NominalX(names...)
		p.Y.Min, p.Y.Max = 0, 1.1
		f := filepath.Join(dir, "lfsck-load.png")
		if err := p.Save(7*vg.Inch, 4*vg.Inch, f); err != nil {
			return out, err
		}
		out = append(out, f)
	}
	return out, nil
}

func addLines(p *plot.Plot, series map[string]plotter.XYs, order []string) error {
	i := 0
	for _, name := range order {
		xy, ok := series[name]
		if !ok {
			continue
		}
		sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color = palette[i%len(palette)]
		pts.Color = palette[i%len(palette)]
		pts.Shape = draw.CircleGlyph{}
		p.Add(l, pts)
		p.Legend.Add(name, l, pts)
		i++
	}
	return nil
}

// MergeLfsckResults reads saved results (JSON) and merges them: the
// scaling, Table I and load figures of separate runs in one result.
func MergeLfsckResults(files []string) (*LfsckBenchResult, error) {
	out := &LfsckBenchResult{Benchmark: "lfsck"}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		r := &LfsckBenchResult{}
		if err := json.Unmarshal(b, r); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if out.Start.IsZero() || r.Start.Before(out.Start) {
			out.Start, out.Host, out.CPUs = r.Start, r.Host, r.CPUs
		}
		out.Scaling = append(out.Scaling, r.Scaling...)
		out.TableI = append(out.TableI, r.TableI...)
		if len(r.Load) > 0 {
			out.Load, out.LoadFiles = r.Load, r.LoadFiles
		}
	}
	return out, nil
}
