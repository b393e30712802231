package bench

import (
	"fmt"
	"image/color"
	"os"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var palette = []color.Color{
	color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
	color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
	color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff}, color.RGBA{0xbc, 0xbd, 0x22, 0xff},
	color.RGBA{0x17, 0xbe, 0xcf, 0xff},
}

// WritePlot draws a timeline as a PNG: the benchmark's rate per phase on
// top; below, each server's disk write and network receive throughput
// (MB/s), and disk read / network send when there is any.
// It returns the legend entries it drew, top plot first.
func WritePlot(file, title, unit string, pts []TimelinePoint) ([]string, error) {
	var legend []string
	err := writePlot(file, title, unit, pts, &legend)
	return legend, err
}

func writePlot(file, title, unit string, pts []TimelinePoint, legend *[]string) error {
	top := plot.New()
	top.Title.Text = title
	top.X.Label.Text = "seconds"
	top.Y.Label.Text = unit + "/s"
	top.Legend.Top = true
	// One line per phase, in order of appearance.
	var phases []string
	series := map[string]plotter.XYs{}
	for _, p := range pts {
		if _, ok := series[p.Phase]; !ok {
			phases = append(phases, p.Phase)
		}
		series[p.Phase] = append(series[p.Phase], plotter.XY{X: p.T, Y: p.Rate})
	}
	// A continuous line over the whole run, and a marker per sample
	// coloured by phase (phases shorter than a sample still show).
	var all plotter.XYs
	for _, p := range pts {
		all = append(all, plotter.XY{X: p.T, Y: p.Rate})
	}
	if len(all) > 1 {
		l, err := plotter.NewLine(all)
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 0xa0}
		top.Add(l)
	}
	for i, ph := range phases {
		sc, err := plotter.NewScatter(series[ph])
		if err != nil {
			return err
		}
		sc.GlyphStyle.Color = palette[i%len(palette)]
		sc.GlyphStyle.Radius = vg.Points(3)
		sc.GlyphStyle.Shape = draw.CircleGlyph{}
		top.Add(sc)
		top.Legend.Add(name(ph, "run"), sc)
		*legend = append(*legend, name(ph, "run"))
	}
	bottom := plot.New()
	bottom.Title.Text = "servers: disk and network throughput"
	bottom.X.Label.Text = "seconds"
	bottom.Y.Label.Text = "MB/s"
	bottom.Legend.Top = true
	names := map[string]bool{}
	for _, p := range pts {
		for s := range p.Servers {
			names[s] = true
		}
	}
	var servers []string
	for s := range names {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for i, s := range servers {
		var dw, ni, dr, no plotter.XYs
		var anyRead, anyOut bool
		for _, p := range pts {
			r, ok := p.Servers[s]
			if !ok {
				continue
			}
			dw = append(dw, plotter.XY{X: p.T, Y: r.DiskWrite / 1e6})
			ni = append(ni, plotter.XY{X: p.T, Y: r.NetIn / 1e6})
			dr = append(dr, plotter.XY{X: p.T, Y: r.DiskRead / 1e6})
			no = append(no, plotter.XY{X: p.T, Y: r.NetOut / 1e6})
			anyRead = anyRead || r.DiskRead > 0
			anyOut = anyOut || r.NetOut > 0
		}
		c := palette[i%len(palette)]
		lines := []struct {
			xy     plotter.XYs
			label  string
			dashed bool
			show   bool
		}{{dw, " disk write", false, true}, {ni, " net in", true, true}, {dr, " disk read", true, anyRead}, {no, " net out", true, anyOut && len(servers) <= 3}}
		for _, l := range lines {
			if !l.show || len(l.xy) == 0 {
				continue
			}
			if err := addLine(bottom, l.xy, s+l.label, c, l.dashed); err != nil {
				return err
			}
			*legend = append(*legend, s+l.label)
		}
	}
	rows := [][]*plot.Plot{{top}}
	height := vg.Points(360)
	if len(servers) > 0 {
		rows = append(rows, []*plot.Plot{bottom})
		height = vg.Points(720)
	}
	img := vgimg.New(vg.Points(900), height)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadY: vg.Points(12), PadX: vg.Points(8), PadTop: vg.Points(6), PadBottom: vg.Points(6)}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("plot %s: %w", file, err)
	}
	return f.Close()
}

func name(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

func addLine(p *plot.Plot, xy plotter.XYs, label string, c color.Color, dashed bool) error {
	if len(xy) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}
