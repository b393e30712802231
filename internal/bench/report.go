package bench

import (
	"fmt"
	"io"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
)

// PrintMD writes a result as a table for people.
func PrintMD(w io.Writer, r *MDResult) {
	dir := "unique directories"
	if r.SharedDir {
		dir = "one shared directory"
	}
	fmt.Fprintf(w, "md benchmark: %d workers x %d files, %s, target %s\n", r.Workers, r.Items, dir, r.Target)
	t := table.NewWriter()
	t.SetOutputMirror(w)
	s := table.StyleLight
	s.Options.DrawBorder = false
	s.Format.Header = text.FormatDefault
	t.SetStyle(s)
	t.AppendHeader(table.Row{"PHASE", "OPS/S", "MEAN µs", "P50 µs", "P99 µs", "MIN µs", "MAX µs", "OPS", "ERRORS"})
	for _, p := range r.Phases {
		t.AppendRow(table.Row{p.Name, fmt.Sprintf("%.0f", p.OpsPerSec), fmt.Sprintf("%.1f", p.MeanUs), fmt.Sprintf("%.1f", p.P50Us),
			fmt.Sprintf("%.1f", p.P99Us), fmt.Sprintf("%.1f", p.MinUs), fmt.Sprintf("%.1f", p.MaxUs), p.Ops, p.Errors})
	}
	t.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: text.AlignRight}, {Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}, {Number: 5, Align: text.AlignRight}})
	t.Render()
}
