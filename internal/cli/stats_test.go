package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"nacre/internal/obs"
)

// scrape is a metrics page of an MDT: ops[op] = {count, latency sum in s}.
func scrape(at time.Time, ops map[string][2]float64) *obs.Scrape {
	s := &obs.Scrape{At: at, Samples: map[string]obs.Sample{}}
	for op, v := range ops {
		l := map[string]string{"op": op}
		s.Samples["ops "+op] = obs.Sample{Name: "nacre_mds_ops_total", Labels: l, Value: v[0]}
		s.Samples["count "+op] = obs.Sample{Name: "nacre_mds_op_seconds_count", Labels: l, Value: v[0]}
		s.Samples["sum "+op] = obs.Sample{Name: "nacre_mds_op_seconds_sum", Labels: l, Value: v[1]}
	}
	return s
}

// TestStatsMeanOfAnIdleOperation: an operation with samples since the
// start but none in the interval has no mean latency in the interval: the
// table shows "-" and the JSON leaves mean_us out (it showed 0.0).
func TestStatsMeanOfAnIdleOperation(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := scrape(t0, map[string][2]float64{"getattr": {500, 0.1}, "create": {20, 0.02}})
	b := scrape(t0.Add(time.Second), map[string][2]float64{"getattr": {600, 0.12}, "create": {20, 0.02}})
	ts := TargetStats{Name: "nacre-MDT0000", Kind: "mdt", Ops: map[string]OpStat{}, Counters: map[string]float64{}, Rates: map[string]float64{}, Gauges: map[string]float64{}}
	diffStats(&ts, a, b)
	if g := ts.Ops["getattr"]; g.Count != 600 || g.Rate != 100 || g.MeanUs != 200 {
		t.Fatalf("getattr %+v, want 600 samples, 100/s, 200 µs", g)
	}
	if c := ts.Ops["create"]; c.Count != 20 || c.Rate != 0 || c.MeanUs != 0 {
		t.Fatalf("idle create %+v, want 20 samples, 0/s, no mean", c)
	}
	var out bytes.Buffer
	writeStats(&out, &StatsJSON{Targets: []TargetStats{ts}})
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(strings.ReplaceAll(l, "│", " "))
		switch {
		case len(f) > 0 && f[0] == "create":
			if f[len(f)-1] != "-" {
				t.Errorf("idle create shows mean %q: %s", f[len(f)-1], l)
			}
		case len(f) > 0 && f[0] == "getattr":
			if f[len(f)-1] != "200.0" {
				t.Errorf("getattr shows mean %q: %s", f[len(f)-1], l)
			}
		}
	}
	var j map[string]map[string]any
	b2, _ := json.Marshal(ts.Ops)
	json.Unmarshal(b2, &j)
	if _, ok := j["create"]["mean_us"]; ok {
		t.Errorf("idle create has mean_us in JSON: %s", b2)
	}
	if j["getattr"]["mean_us"] != 200.0 {
		t.Errorf("getattr JSON %s", b2)
	}
	if !strings.Contains(out.String(), "create") {
		t.Fatalf("no create row:\n%s", out.String())
	}
}

// TestStatsOfAnUnreachableTargetFails: the figures of the others are
// printed, and the command fails naming the target it has none of (it
// exited 0, so a script took a down OST for an idle one).
func TestStatsOfAnUnreachableTargetFails(t *testing.T) {
	s := &StatsJSON{Targets: []TargetStats{{Name: "nacre-MDT0000"}, {Name: "nacre-OST0001", Error: "connection refused"}}}
	err := s.unreachable()
	if err == nil || !strings.Contains(err.Error(), "nacre-OST0001") || strings.Contains(err.Error(), "MDT0000") {
		t.Fatalf("unreachable() = %v, want an error naming nacre-OST0001 only", err)
	}
	s.Targets[1].Error = ""
	if err := s.unreachable(); err != nil {
		t.Fatalf("every target answered: %v", err)
	}
}

// TestStatsAndTopRefuseIntervalsThatMeasureNothing: a zero, negative or
// tiny --interval is refused before anything is asked (stats printed
// "interval_seconds": -1; top polled every target ~300 times a second).
func TestStatsAndTopRefuseIntervalsThatMeasureNothing(t *testing.T) {
	cases := []struct {
		interval time.Duration
		n        int
		want     string // "" : the interval is taken
	}{
		{-time.Second, 0, "--interval -1s: give a duration of at least 100ms"},
		{0, 0, "--interval 0s: give a duration of at least 100ms"},
		{time.Millisecond, 0, "--interval 1ms: give a duration of at least 100ms"},
		{100 * time.Millisecond, 0, ""},
		{time.Second, 0, ""},
		{time.Second, -1, "top: -n -1: give a number of refreshes of 1 or more"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.interval, " ", c.n), func(t *testing.T) {
			// No MGS: a command whose flags pass fails on that instead.
			e := Env{Out: io.Discard, Err: io.Discard}
			errs := map[string]error{"top": Top(context.Background(), e, c.interval, c.n)}
			if c.n == 0 {
				errs["stats"] = Stats(context.Background(), e, "", c.interval, true)
			}
			for cmd, err := range errs {
				switch {
				case c.want == "" && (err == nil || !strings.Contains(err.Error(), "no MGS address")):
					t.Errorf("%s: %v, want the interval taken (and no MGS address)", cmd, err)
				case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
					t.Errorf("%s: %v, want %q", cmd, err, c.want)
				}
			}
		})
	}
}
