package obs

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Sample is one series of a scraped metrics page: a flat name (histograms
// give name_sum and name_count), its labels, and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Key identifies a series: the name and its labels other than "target".
func (s Sample) Key() string {
	keys := make([]string, 0, len(s.Labels))
	for k := range s.Labels {
		if k != "target" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(s.Name)
	for _, k := range keys {
		fmt.Fprintf(&b, ",%s=%s", k, s.Labels[k])
	}
	return b.String()
}

// Scrape is one metrics page of one server at one time.
type Scrape struct {
	At      time.Time
	Samples map[string]Sample // by Key
}

// Fetch scrapes a metrics URL, keeping only nacre_* series.
func Fetch(ctx context.Context, url string) (*Scrape, error) {
	return FetchMatching(ctx, url, func(name string) bool { return strings.HasPrefix(name, "nacre_") })
}

// FetchMatching scrapes a metrics URL, keeping the series whose name keep
// accepts (the web page also wants process_cpu_seconds_total).
func FetchMatching(ctx context.Context, url string, keep func(name string) bool) (*Scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	sc := &Scrape{At: time.Now(), Samples: map[string]Sample{}}
	for name, f := range fams {
		if !keep(name) {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			add := func(n string, v float64) {
				s := Sample{Name: n, Labels: labels, Value: v}
				sc.Samples[s.Key()] = s
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				add(name, m.GetCounter().GetValue())
			case dto.MetricType_GAUGE:
				add(name, m.GetGauge().GetValue())
			case dto.MetricType_HISTOGRAM:
				add(name+"_sum", m.GetHistogram().GetSampleSum())
				add(name+"_count", float64(m.GetHistogram().GetSampleCount()))
			case dto.MetricType_UNTYPED:
				add(name, m.GetUntyped().GetValue())
			}
		}
	}
	return sc, nil
}

// Sum adds every series of a name whose labels include match.
func (s *Scrape) Sum(name string, match map[string]string) float64 {
	var v float64
	for _, x := range s.Samples {
		if x.Name != name {
			continue
		}
		ok := true
		for k, want := range match {
			if x.Labels[k] != want {
				ok = false
			}
		}
		if ok {
			v += x.Value
		}
	}
	return v
}

// LabelValues lists the values a label takes in a series.
func (s *Scrape) LabelValues(name, label string) []string {
	seen := map[string]bool{}
	for _, x := range s.Samples {
		if x.Name == name {
			if v, ok := x.Labels[label]; ok {
				seen[v] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}
