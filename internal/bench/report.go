package bench

import (
	"encoding/csv"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

func newTable(w io.Writer) table.Writer {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	s := table.StyleLight
	s.Options.DrawBorder = false
	s.Format.Header = text.FormatDefault
	t.SetStyle(s)
	return t
}

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }

// PrintMD writes a result as a table for people.
func PrintMD(w io.Writer, r *MDResult) {
	dir := "unique directories"
	if r.SharedDir {
		dir = "one shared directory"
	}
	tree := ""
	if r.Depth > 0 {
		tree = fmt.Sprintf(", tree depth %d branch %d", r.Depth, r.Branch)
	}
	fmt.Fprintf(w, "md benchmark: %d workers x %d items, %s%s, %d iteration(s), target %s\n", r.Workers, r.Items, dir, tree, r.Iterations, r.Target)
	t := newTable(w)
	hdr := table.Row{"PHASE", "OPS/S", "MEAN µs", "P50 µs", "P99 µs", "MIN µs", "MAX µs", "OPS", "ERRORS"}
	if r.Iterations > 1 {
		hdr = table.Row{"PHASE", "OPS/S", "MIN OPS/S", "MAX OPS/S", "STDDEV", "MEAN µs", "P99 µs", "OPS", "ERRORS"}
	}
	t.AppendHeader(hdr)
	for _, p := range r.Phases {
		if r.Iterations > 1 {
			t.AppendRow(table.Row{p.Name, f0(p.OpsPerSec), f0(p.MinRate), f0(p.MaxRate), f0(p.StddevRt), f1(p.MeanUs), f1(p.P99Us), p.Ops, p.Errors})
		} else {
			t.AppendRow(table.Row{p.Name, f0(p.OpsPerSec), f1(p.MeanUs), f1(p.P50Us), f1(p.P99Us), f1(p.MinUs), f1(p.MaxUs), p.Ops, p.Errors})
		}
	}
	var cc []table.ColumnConfig
	for i := 2; i <= 9; i++ {
		cc = append(cc, table.ColumnConfig{Number: i, Align: text.AlignRight})
	}
	t.SetColumnConfigs(cc)
	t.Render()
	printCPU(w, r.Phases)
}

// printCPU prints the CPU per operation of each phase by process, if the
// run counted it.
func printCPU(w io.Writer, phases []Phase) {
	seen := map[string]bool{}
	var names []string
	for _, p := range phases {
		for n := range p.CPUUsPerOp {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	fmt.Fprintln(w, "CPU per operation (user + system µs), by process:")
	t := newTable(w)
	hdr := table.Row{"PHASE"}
	for _, n := range names {
		hdr = append(hdr, n)
	}
	t.AppendHeader(append(hdr, "ALL"))
	for _, p := range phases {
		row := table.Row{p.Name}
		var all float64
		for _, n := range names {
			row = append(row, f1(p.CPUUsPerOp[n]))
			all += p.CPUUsPerOp[n]
		}
		t.AppendRow(append(row, f1(all)))
	}
	var cc []table.ColumnConfig
	for i := 2; i <= len(names)+2; i++ {
		cc = append(cc, table.ColumnConfig{Number: i, Align: text.AlignRight})
	}
	t.SetColumnConfigs(cc)
	t.Render()
}

// WriteMDCSV writes one row per phase (and per iteration with runs).
func WriteMDCSV(w io.Writer, r *MDResult) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"iteration", "phase", "ops", "errors", "seconds", "ops_per_sec", "min_ops_per_sec", "max_ops_per_sec", "stddev_ops_per_sec",
		"mean_us", "min_us", "p50_us", "p99_us", "max_us", "workers", "items_per_worker", "shared_dir", "target"})
	row := func(it string, p Phase) {
		cw.Write([]string{it, p.Name, strconv.Itoa(p.Ops), strconv.Itoa(p.Errors), f1(p.Seconds), f1(p.OpsPerSec), f1(p.MinRate), f1(p.MaxRate), f1(p.StddevRt),
			f1(p.MeanUs), f1(p.MinUs), f1(p.P50Us), f1(p.P99Us), f1(p.MaxUs), strconv.Itoa(r.Workers), strconv.Itoa(r.Items), strconv.FormatBool(r.SharedDir), r.Target})
	}
	for _, p := range r.Phases {
		row("all", p)
	}
	if len(r.Runs) > 1 {
		for i, run := range r.Runs {
			for _, p := range run {
				row(strconv.Itoa(i+1), p)
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
