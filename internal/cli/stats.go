package cli

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	"nacre/internal/obs"
	"nacre/internal/pki"
)

// OpStat is one operation type of one target: its count since the target
// started, and its rate and mean latency over the sampling interval.
type OpStat struct {
	Count float64 `json:"count"`
	Rate  float64 `json:"per_sec"`
	// MeanUs is 0 (and left out of the JSON) when no operation of the
	// type ended in the interval: there is no mean then, not a mean of 0.
	MeanUs float64 `json:"mean_us,omitempty"`
}

// TargetStats is `nacre stats --json` for one target.
type TargetStats struct {
	Name       string             `json:"name"`
	Kind       string             `json:"kind"`
	MetricsURL string             `json:"metrics_url"`
	Ops        map[string]OpStat  `json:"ops"`
	Counters   map[string]float64 `json:"counters"`
	Rates      map[string]float64 `json:"per_sec"`
	Gauges     map[string]float64 `json:"gauges"`
	Error      string             `json:"error,omitempty"`
}

// StatsJSON is `nacre stats --json`.
type StatsJSON struct {
	Fsname   string        `json:"fsname"`
	Interval float64       `json:"interval_seconds"`
	Targets  []TargetStats `json:"targets"`
}

// opSeries names the operation counter and latency histogram of a kind.
var opSeries = map[string][2]string{
	"mdt": {"nacre_mds_ops_total", "nacre_mds_op_seconds"},
	"ost": {"nacre_ost_ops_total", "nacre_ost_op_duration_seconds"},
}

// counterSeries are shown as totals and rates.
var counterSeries = []struct{ name, label string }{
	{"nacre_ost_read_bytes_total", "data_read_bytes"},
	{"nacre_ost_write_bytes_total", "data_written_bytes"},
	{"nacre_disk_read_bytes_total", "disk_read_bytes"},
	{"nacre_disk_written_bytes_total", "disk_written_bytes"},
	{"nacre_net_received_bytes_total", "net_received_bytes"},
	{"nacre_net_sent_bytes_total", "net_sent_bytes"},
	{"nacre_mds_op_errors_total", "errors"},
	{"nacre_ost_op_errors_total", "errors"},
	{"nacre_ost_crc_errors_total", "crc_errors"},
	{"nacre_mds_precreated_objects_total", "precreated_objects"},
}

var gaugeSeries = []struct{ name, label string }{
	{"nacre_rpc_inflight", "rpc_inflight"},
	{"nacre_mds_destroy_queue_objects", "destroy_queue"},
	{"nacre_mds_precreate_pool_objects", "precreate_pool"},
	{"nacre_ost_objects", "objects"},
	{"nacre_ost_data_connections", "data_connections"},
}

// MinInterval is the shortest --interval of stats and top: rates over
// less are mostly noise of the scrape itself, and top would ask every
// target for its metrics hundreds of times a second.
const MinInterval = 100 * time.Millisecond

// checkInterval refuses an --interval that is not a measuring period
// (0, negative: stats printed "interval_seconds": -1, top polled without
// pause) or is too short to mean anything.
func checkInterval(cmd string, d time.Duration) error {
	if d < MinInterval {
		return fmt.Errorf("%s: --interval %s: give a duration of at least %s (e.g. --interval 1s, the default)", cmd, d, MinInterval)
	}
	return nil
}

// CollectStats samples every target's metrics twice, interval apart.
func CollectStats(ctx context.Context, mgs, only string, interval time.Duration, creds *pki.Creds) (*StatsJSON, error) {
	st, err := GetStatus(ctx, mgs, creds)
	if err != nil {
		return nil, err
	}
	var targets []TargetStatus
	for _, t := range st.Targets {
		if t.MetricsURL == "" || (only != "" && !strings.EqualFold(only, t.Name) && !strings.HasSuffix(strings.ToUpper(t.Name), strings.ToUpper(only))) {
			continue
		}
		targets = append(targets, t)
	}
	if only != "" && len(targets) == 0 {
		return nil, fmt.Errorf("no target %q; `nacre status` lists them", only)
	}
	first := make([]*obs.Scrape, len(targets))
	errs := make([]error, len(targets))
	for i, t := range targets {
		first[i], errs[i] = obs.Fetch(ctx, t.MetricsURL)
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(interval):
	}
	out := &StatsJSON{Fsname: st.Fsname, Interval: interval.Seconds()}
	for i, t := range targets {
		ts := TargetStats{Name: t.Name, Kind: t.Kind, MetricsURL: t.MetricsURL, Ops: map[string]OpStat{},
			Counters: map[string]float64{}, Rates: map[string]float64{}, Gauges: map[string]float64{}}
		second, err := obs.Fetch(ctx, t.MetricsURL)
		if err == nil {
			err = errs[i]
		}
		if err != nil {
			ts.Error = err.Error()
			out.Targets = append(out.Targets, ts)
			continue
		}
		diffStats(&ts, first[i], second)
		out.Targets = append(out.Targets, ts)
	}
	return out, nil
}

func diffStats(ts *TargetStats, a, b *obs.Scrape) {
	dt := b.At.Sub(a.At).Seconds()
	if s, ok := opSeries[ts.Kind]; ok {
		for _, op := range b.LabelValues(s[0], "op") {
			m := map[string]string{"op": op}
			n := b.Sum(s[0], m)
			dn := n - a.Sum(s[0], m)
			dsum := b.Sum(s[1]+"_sum", m) - a.Sum(s[1]+"_sum", m)
			dcnt := b.Sum(s[1]+"_count", m) - a.Sum(s[1]+"_count", m)
			os := OpStat{Count: n, Rate: round1(dn / dt)}
			if dcnt > 0 {
				// At least 0.1 µs: a mean that rounds to 0 is still a mean.
				os.MeanUs = max(round1(dsum/dcnt*1e6), 0.1)
			}
			ts.Ops[op] = os
		}
	}
	for _, c := range counterSeries {
		v := b.Sum(c.name, nil)
		if v == 0 && a.Sum(c.name, nil) == 0 && !hasSeries(b, c.name) {
			continue
		}
		ts.Counters[c.label] += v
		ts.Rates[c.label] += round1((v - a.Sum(c.name, nil)) / dt)
	}
	for _, g := range gaugeSeries {
		if hasSeries(b, g.name) {
			ts.Gauges[g.label] = b.Sum(g.name, nil)
		}
	}
}

func hasSeries(s *obs.Scrape, name string) bool {
	for _, x := range s.Samples {
		if x.Name == name {
			return true
		}
	}
	return false
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }

// Stats prints per-target counters and rates, like `lctl get_param *.stats`.
func Stats(ctx context.Context, e Env, only string, interval time.Duration, asJSON bool) error {
	if err := checkInterval("stats", interval); err != nil {
		return err
	}
	s, err := CollectStats(ctx, e.MGS, only, interval, e.TLS)
	if err != nil {
		return err
	}
	if asJSON {
		if err := JSON(e.Out, s); err != nil {
			return err
		}
	} else {
		writeStats(e.Out, s)
	}
	return s.unreachable()
}

// unreachable is the error of a sample that lacks some target's figures:
// a script reading them must not take a down OST's silence for idleness.
func (s *StatsJSON) unreachable() error {
	var names []string
	for _, t := range s.Targets {
		if t.Error != "" {
			names = append(names, t.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	return fmt.Errorf("no figures from %s: its metrics do not answer; check `nacre status`", strings.Join(names, ", "))
}

// writeStats prints s as a table per target. SAMPLES counts the
// operations since the target started; PER SEC and MEAN µs are over the
// interval, and MEAN µs is "-" when none ended in it.
func writeStats(w io.Writer, s *StatsJSON) {
	for _, ts := range s.Targets {
		fmt.Fprintf(w, "%s (%s)  %s\n", ts.Name, ts.Kind, ts.MetricsURL)
		if ts.Error != "" {
			fmt.Fprintf(w, "  unreachable: %s\n\n", ts.Error)
			continue
		}
		if len(ts.Ops) > 0 {
			t := newTable(w)
			t.AppendHeader(table.Row{"OPERATION", "SAMPLES", "PER SEC", "MEAN µs"})
			for _, op := range sortedKeys(ts.Ops) {
				o := ts.Ops[op]
				mean := "-"
				if o.MeanUs > 0 {
					mean = fmt.Sprintf("%.1f", o.MeanUs)
				}
				t.AppendRow(table.Row{op, int64(o.Count), fmt.Sprintf("%.1f", o.Rate), mean})
			}
			t.SetColumnConfigs([]table.ColumnConfig{{Number: 2, Align: text.AlignRight}, {Number: 3, Align: text.AlignRight}, {Number: 4, Align: text.AlignRight}})
			t.Render()
		}
		for _, k := range sortedKeys(ts.Counters) {
			fmt.Fprintf(w, "  %-22s %16.0f  %12.1f/s\n", k, ts.Counters[k], ts.Rates[k])
		}
		for _, k := range sortedKeys(ts.Gauges) {
			fmt.Fprintf(w, "  %-22s %16.0f\n", k, ts.Gauges[k])
		}
		fmt.Fprintln(w)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
