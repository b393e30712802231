package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"

	"nacre/internal/layout"
)

// Top shows live per-target rates until ctx is done. On a terminal the
// table is redrawn in place; otherwise one block per interval is printed.
func Top(ctx context.Context, e Env, interval time.Duration, iterations int) error {
	if err := checkInterval("top", interval); err != nil {
		return err
	}
	if iterations < 0 {
		return fmt.Errorf("top: -n %d: give a number of refreshes of 1 or more, or 0 to refresh until Ctrl-C", iterations)
	}
	tty := isTerminal(e.Out)
	for i := 0; iterations == 0 || i < iterations; i++ {
		s, err := CollectStats(ctx, e.MGS, "", interval)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if tty {
			fmt.Fprint(e.Out, "\033[H\033[2J")
		}
		fmt.Fprintf(e.Out, "nacre top — %s — %s, every %s (Ctrl-C to quit)\n", s.Fsname, time.Now().Format("15:04:05"), interval)
		t := newTable(e.Out)
		t.AppendHeader(table.Row{"TARGET", "OPS/S", "BUSIEST OPS", "DATA R/W /s", "DISK R/W /s", "NET IN/OUT /s", "INFLIGHT"})
		for _, ts := range s.Targets {
			if ts.Error != "" {
				t.AppendRow(table.Row{ts.Name, "-", "unreachable", "", "", "", ""})
				continue
			}
			var total float64
			type kv struct {
				op string
				r  float64
			}
			var ops []kv
			for op, o := range ts.Ops {
				total += o.Rate
				if o.Rate > 0 {
					ops = append(ops, kv{op, o.Rate})
				}
			}
			sort.Slice(ops, func(i, j int) bool { return ops[i].r > ops[j].r })
			var busy []string
			for j, o := range ops {
				if j == 3 {
					break
				}
				busy = append(busy, fmt.Sprintf("%s %.0f", o.op, o.r))
			}
			rw := func(r, w string) string {
				return layout.FormatSize(uint64(ts.Rates[r])) + "/" + layout.FormatSize(uint64(ts.Rates[w]))
			}
			t.AppendRow(table.Row{ts.Name, fmt.Sprintf("%.0f", total), strings.Join(busy, ", "),
				rw("data_read_bytes", "data_written_bytes"), rw("disk_read_bytes", "disk_written_bytes"),
				rw("net_received_bytes", "net_sent_bytes"), ts.Gauges["rpc_inflight"]})
		}
		t.Render()
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}
