package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// dashboardFile is the Grafana dashboard of docs/grafana.
const dashboardFile = "../../docs/grafana/nacre-dashboard.json"

// prometheusSeries are the series Prometheus adds to every scrape, which
// no server exports.
var prometheusSeries = map[string]bool{
	"up": true, "scrape_duration_seconds": true, "scrape_samples_scraped": true,
	"scrape_samples_post_metric_relabeling": true, "scrape_series_added": true,
}

// dashboardExprs lists the PromQL expressions of a Grafana dashboard: every
// panel query ("expr", in rows too) and the query of every query variable
// (the series of label_values(SERIES, LABEL)).
func dashboardExprs(t *testing.T, raw []byte) []string {
	t.Helper()
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if e, ok := v["expr"].(string); ok {
				exprs = append(exprs, e)
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	vars, _ := doc.(map[string]any)["templating"].(map[string]any)["list"].([]any)
	for _, v := range vars {
		v, _ := v.(map[string]any)
		if v["type"] != "query" {
			continue
		}
		q := v["query"]
		if m, ok := q.(map[string]any); ok { // newer Grafana: {"query": ...}
			q = m["query"]
		}
		s, _ := q.(string)
		if m := regexp.MustCompile(`^\s*label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)\s*$`).FindStringSubmatch(s); m != nil {
			exprs = append(exprs, m[1])
		} else if s != "" {
			t.Errorf("variable %v: query %q is not label_values(SERIES, LABEL), which this test reads", v["name"], s)
		}
	}
	return exprs
}

// promQLKeywords are the words of PromQL that are not series names.
var promQLKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "offset": true, "and": true, "or": true, "unless": true, "atan2": true,
	"inf": true, "nan": true,
}

var (
	promQLStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promQLBraces   = regexp.MustCompile(`\{[^{}]*\}|\[[^\[\]]*\]`)
	promQLGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promQLTokens   = regexp.MustCompile(`[0-9][0-9a-zA-Z_.]*|[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
)

// seriesNames gives the series names a PromQL expression selects: its
// identifiers outside strings, label matchers, ranges and grouping labels
// that are neither functions (a name before "(") nor keywords nor numbers.
// Grafana's variables ($target, $__rate_interval) are only in matchers
// and ranges.
func seriesNames(expr string) []string {
	e := promQLStrings.ReplaceAllString(expr, `""`)
	e = promQLBraces.ReplaceAllString(e, " ")
	e = promQLGrouping.ReplaceAllString(e, " ")
	var out []string
	for _, tok := range promQLTokens.FindAllString(e, -1) {
		if tok[0] >= '0' && tok[0] <= '9' || strings.HasSuffix(tok, "(") {
			continue
		}
		tok = strings.TrimSpace(tok)
		if !promQLKeywords[strings.ToLower(tok)] && !slices.Contains(out, tok) {
			out = append(out, tok)
		}
	}
	return out
}

// TestSeriesNamesOfPromQL: the reading of expressions the dashboard test
// relies on.
func TestSeriesNamesOfPromQL(t *testing.T) {
	for expr, want := range map[string][]string{
		`rate(nacre_mds_ops_total{target=~"$target"}[$__rate_interval])`:                                       {"nacre_mds_ops_total"},
		`histogram_quantile(0.99, sum by (le, op) (rate(nacre_mds_op_seconds_bucket{op!="x{y}"}[5m])))`:        {"nacre_mds_op_seconds_bucket"},
		`sum without(ost) (a) / on (target) group_left(kind) b offset 5m > bool 1e3`:                           {"a", "b"},
		`up{fsname="$fsname"} == 0 or absent(process_cpu_seconds_total)`:                                       {"up", "process_cpu_seconds_total"},
		`rate(nacre_raft_synced_entries_total[1m]) / rate (nacre_raft_syncs_total{target='MGS'}[1m]) unless x`: {"nacre_raft_synced_entries_total", "nacre_raft_syncs_total", "x"},
	} {
		if got := seriesNames(expr); !slices.Equal(got, want) {
			t.Errorf("seriesNames(%s) = %v, want %v", expr, got, want)
		}
	}
}

// scrapeNames lists the metric families a metrics page serves, with their
// types.
func scrapeNames(t *testing.T, url string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for name, f := range scrapeAll(t, url) {
		out[name] = strings.ToLower(f.GetType().String())
	}
	return out
}

// served reports whether a series name is served: a family of that name,
// or a histogram's _bucket, _sum or _count (a summary's _sum or _count).
func served(name string, fams map[string]string) bool {
	if _, ok := fams[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		switch fams[base] {
		case "histogram":
			return true
		case "summary":
			return suffix != "_bucket"
		}
	}
	return false
}

// TestGrafanaDashboardNamesServedSeries: every series the Grafana dashboard
// of docs/grafana names is served by a target of a real cluster (found
// with `nacre status --prometheus`, which promtool accepts where it is
// installed), after the operations that make labelled series appear: a
// panel naming a series no server exports fails it. The dashboard has the
// datasource and target variables, and every panel queries the datasource
// variable.
func TestGrafanaDashboardNamesServedSeries(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Templating struct {
			List []struct{ Name, Type string } `json:"list"`
		} `json:"templating"`
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["target"] != "query" {
		t.Errorf("dashboard variables %v: want datasource (a datasource) and target (a query)", vars)
	}
	for _, p := range dash.Panels {
		var panel struct {
			Title, Type string
			Datasource  struct{ UID string } `json:"datasource"`
		}
		json.Unmarshal(p, &panel)
		if panel.Type != "row" && panel.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q queries datasource %q, not the variable ${datasource}", panel.Title, panel.Datasource.UID)
		}
	}
	exprs := dashboardExprs(t, raw)
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions found in %s", len(exprs), dashboardFile)
	}

	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	ctx := context.Background()
	// Operations that make the labelled series appear: creates, a striped
	// write and read, a failing create (an MDS error), unlinks.
	c := cl.Client(t)
	for i := range 4 {
		if _, _, err := c.Create(ctx, fid.Root, fmt.Sprint("f", i), 0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	ino, _, err := c.Create(ctx, fid.Root, "striped", 0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: 2, StripeSize: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256<<10)
	fh := c.OpenInode(ino)
	if _, err := fh.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := fh.ReadAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Create(ctx, fid.Root, "f0", 0o644, client.CreateOpts{Exclusive: true}); err == nil {
		t.Fatal("exclusive create of an existing name succeeded")
	}
	for i := range 2 {
		if _, err := c.Unlink(ctx, fid.Root, fmt.Sprint("f", i)); err != nil {
			t.Fatal(err)
		}
	}

	// The scrape configuration names every target's metrics address.
	cfg, err := cl.Run("status", "--prometheus")
	if err != nil {
		t.Fatalf("nacre status --prometheus: %v\n%s", err, cfg)
	}
	if path, err := exec.LookPath("promtool"); err == nil {
		f := filepath.Join(t.TempDir(), "prometheus.yml")
		if err := os.WriteFile(f, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(path, "check", "config", f).CombinedOutput(); err != nil {
			t.Errorf("promtool check config: %v\n%s\n%s", err, out, cfg)
		}
	}
	fams := map[string]string{}
	st := clusterStatus(t, cl)
	for _, ts := range st.Targets {
		addr := strings.TrimSuffix(strings.TrimPrefix(ts.MetricsURL, "http://"), "/metrics")
		if !strings.Contains(cfg, fmt.Sprintf(`- targets: [%q]`, addr)) {
			t.Errorf("nacre status --prometheus does not scrape %s at %s:\n%s", ts.Name, addr, cfg)
		}
		for name, typ := range scrapeNames(t, ts.MetricsURL) {
			fams[name] = typ
		}
	}

	var missing []string
	for _, e := range exprs {
		for _, name := range seriesNames(e) {
			if !prometheusSeries[name] && !served(name, fams) {
				missing = append(missing, fmt.Sprintf("%s (in %s)", name, e))
			}
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		t.Errorf("the dashboard names series no server of the cluster serves:\n%s", strings.Join(missing, "\n"))
	}
}
