package cli

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"

	"nacre/internal/layout"
)

// Top shows live per-target rates until ctx is done: at a terminal one
// screen redrawn in place, otherwise (a pipe, a log) one table per
// interval appended to the last.
func Top(ctx context.Context, e Env, interval time.Duration, iterations int) error {
	if err := checkInterval("top", interval); err != nil {
		return err
	}
	if iterations < 0 {
		return fmt.Errorf("top: -n %d: give a number of refreshes of 1 or more, or 0 to refresh until Ctrl-C", iterations)
	}
	scr := newTopScreen(e.Out)
	for i := 0; iterations == 0 || i < iterations; i++ {
		s, err := CollectStats(ctx, e.MGS, "", interval, e.TLS)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := scr.draw(s, interval, time.Now()); err != nil {
			return fmt.Errorf("top: %w", err)
		}
		if ctx.Err() != nil {
			return nil
		}
	}
	return nil
}

// topScreen is where top draws its tables.
type topScreen struct {
	w io.Writer
	// redraw: w is a terminal, each table replaces the last in place.
	redraw bool
}

func newTopScreen(w io.Writer) *topScreen { return &topScreen{w: w, redraw: IsTerminal(w)} }

// Terminal sequences of a redraw: the cursor to the top left corner, the
// rest of a line erased, the rest of the screen erased.
const (
	cursorHome  = "\x1b[H"
	eraseLine   = "\x1b[K"
	eraseScreen = "\x1b[J"
)

// draw shows one table of s. At a terminal the frame goes out in one
// write: from the top left corner, each line erasing what is left of the
// last frame's line, and then the screen below it, so that nothing
// flickers (a whole-screen clear first blanks it between frames) and a
// shorter table leaves no rows of the last behind.
func (t *topScreen) draw(s *StatsJSON, interval time.Duration, now time.Time) error {
	var b strings.Builder
	writeTopTable(&b, s, interval, now)
	frame := b.String()
	if t.redraw {
		frame = cursorHome + strings.ReplaceAll(frame, "\n", eraseLine+"\n") + eraseScreen
	}
	_, err := io.WriteString(t.w, frame)
	return err
}

// writeTopTable is one table of top: a line naming the file system and
// the time, then a row per target.
func writeTopTable(w io.Writer, s *StatsJSON, interval time.Duration, now time.Time) {
	fmt.Fprintf(w, "nacre top — %s — %s, every %s (Ctrl-C to quit)\n", s.Fsname, now.Format("15:04:05"), interval)
	t := newTable(w)
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
}
