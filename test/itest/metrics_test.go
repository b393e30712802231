package itest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// docMetric is one row of the metrics table of docs/architecture.md §7.
type docMetric struct {
	name, typ string
	labels    []string // besides the constant "target"
	servedBy  string   // all, or kinds separated by commas: mgs, mdt, ost
}

// documentedMetrics reads the metrics table of docs/architecture.md.
func documentedMetrics(t *testing.T) map[string]docMetric {
	t.Helper()
	b, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]docMetric{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `nacre_") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 5 {
			t.Fatalf("metrics table row with %d cells: %s", len(cells), line)
		}
		clean := func(s string) string { return strings.Trim(strings.TrimSpace(s), "`") }
		m := docMetric{name: clean(cells[0]), typ: clean(cells[1]), servedBy: strings.ToLower(clean(cells[3]))}
		for _, l := range strings.Split(cells[2], ",") {
			if l = clean(l); l != "" {
				m.labels = append(m.labels, l)
			}
		}
		sort.Strings(m.labels)
		if _, dup := out[m.name]; dup {
			t.Fatalf("metric %s documented twice", m.name)
		}
		out[m.name] = m
	}
	if len(out) < 20 {
		t.Fatalf("found only %d documented metrics in docs/architecture.md", len(out))
	}
	return out
}

// servedByKind reports whether the table says servers of kind serve d.
func (d docMetric) servedByKind(kind string) bool {
	if d.servedBy == "all" {
		return true
	}
	for _, k := range strings.Split(d.servedBy, ",") {
		if strings.TrimSpace(k) == kind {
			return true
		}
	}
	return false
}

// families is one scraped metrics page: the nacre_ families by name.
type families map[string]*dto.MetricFamily

func scrapeFamilies(t *testing.T, url string) families {
	t.Helper()
	out := families{}
	for name, f := range scrapeAll(t, url) {
		if strings.HasPrefix(name, "nacre_") {
			out[name] = f
		}
	}
	return out
}

// scrapeAll is every metric family a metrics page serves.
func scrapeAll(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	all, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return all
}

func labelsOf(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// sum adds the values of every series of name whose labels include match
// (a histogram's observation count).
func (f families) sum(name string, match map[string]string) float64 {
	fam := f[name]
	if fam == nil {
		return 0
	}
	var v float64
	for _, m := range fam.GetMetric() {
		l := labelsOf(m)
		ok := true
		for k, want := range match {
			if l[k] != want {
				ok = false
			}
		}
		if !ok {
			continue
		}
		switch fam.GetType() {
		case dto.MetricType_COUNTER:
			v += m.GetCounter().GetValue()
		case dto.MetricType_GAUGE:
			v += m.GetGauge().GetValue()
		case dto.MetricType_HISTOGRAM:
			v += float64(m.GetHistogram().GetSampleCount())
		default:
			v += m.GetUntyped().GetValue()
		}
	}
	return v
}

// has reports whether a series of name with labels including match exists.
func (f families) has(name string, match map[string]string) bool {
	for _, m := range f[name].GetMetric() {
		l := labelsOf(m)
		ok := true
		for k, want := range match {
			if l[k] != want {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// checkDocumented compares a server's page with the table: every metric
// served is documented for its kind with its type and labels, and every
// metric documented for the kind is served (all but lazy ones; before any
// operation, only those that are always there).
func checkDocumented(t *testing.T, target, kind string, f families, doc map[string]docMetric, afterOps bool, lazy map[string]bool) {
	t.Helper()
	for name, fam := range f {
		d, ok := doc[name]
		if !ok {
			t.Errorf("%s serves %s, which docs/architecture.md §7 does not document", target, name)
			continue
		}
		if !d.servedByKind(kind) {
			t.Errorf("%s (%s) serves %s, documented as served by %s", target, kind, name, d.servedBy)
		}
		if got := strings.ToLower(fam.GetType().String()); got != d.typ {
			t.Errorf("%s: %s is a %s, documented as a %s", target, name, got, d.typ)
		}
		for _, m := range fam.GetMetric() {
			l := labelsOf(m)
			var names []string
			for k := range l {
				if k != "target" || name == "nacre_mgs_target_up" {
					names = append(names, k)
				}
			}
			sort.Strings(names)
			if strings.Join(names, ",") != strings.Join(d.labels, ",") {
				t.Errorf("%s: %s has labels %v, documented %v", target, name, names, d.labels)
			}
			if name != "nacre_mgs_target_up" && l["target"] != target {
				t.Errorf("%s: %s has target=%q, want %q", target, name, l["target"], target)
			}
		}
	}
	for name, d := range doc {
		if !d.servedByKind(kind) {
			continue
		}
		always := len(d.labels) == 0 || strings.HasPrefix(name, "nacre_lfsck_")
		if afterOps && lazy[name] || !afterOps && !always {
			continue
		}
		if _, ok := f[name]; !ok {
			t.Errorf("%s (%s) does not serve the documented %s", target, kind, name)
		}
	}
}

// TestMetricsMoveWithOperations: every server's metrics page (found with
// `nacre status --json`) serves exactly the metrics docs/architecture.md
// documents for its kind, and they move with client operations and a
// checker run: operations by type, latency, data bytes, disk and network
// bytes, precreate pools, the checker's progress.
func TestMetricsMoveWithOperations(t *testing.T) {
	doc := documentedMetrics(t)
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	ctx := context.Background()

	st := clusterStatus(t, cl)
	kinds := map[string]int{}
	for _, ts := range st.Targets {
		if !strings.HasPrefix(ts.MetricsURL, "http://") {
			t.Fatalf("%s has no metrics URL in nacre status --json: %+v", ts.Name, ts)
		}
		kinds[ts.Kind]++
	}
	if kinds["mgs"] != 1 || kinds["mdt"] != 1 || kinds["ost"] != 2 {
		t.Fatalf("targets by kind %v, want 1 mgs, 1 mdt, 2 ost", kinds)
	}
	// The OSTs' errors appear with their first failed request, which
	// these operations do not cause.
	lazy := map[string]bool{"nacre_ost_op_errors_total": true}
	scrape := func(afterOps bool) map[string]families {
		pages := map[string]families{}
		for _, ts := range st.Targets {
			f := scrapeFamilies(t, ts.MetricsURL)
			checkDocumented(t, ts.Name, ts.Kind, f, doc, afterOps, lazy)
			pages[ts.Name] = f
		}
		return pages
	}
	before := scrape(false)
	if t.Failed() {
		t.FailNow()
	}

	// Operations: creates, a striped write and read, a failing create,
	// unlinks, then a checker run.
	c := cl.Client(t)
	const files, unlinks = 30, 10
	for i := 0; i < files; i++ {
		if _, _, err := c.Create(ctx, fid.Root, fmt.Sprint("f", i), 0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	const size = 1 << 20 // 64 KiB stripes over 2 OSTs: 512 KiB each
	ino, _, err := c.Create(ctx, fid.Root, "striped", 0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: 2, StripeSize: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	creates := files + 1
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>16)
	}
	fh := c.OpenInode(ino)
	if n, err := fh.WriteAt(ctx, data, 0); err != nil || n != size {
		t.Fatalf("write: %d, %v", n, err)
	}
	if err := fh.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, size)
	fh = c.OpenInode(ino)
	if n, err := fh.ReadAt(ctx, got, 0); err != nil || n != size || !bytes.Equal(got, data) {
		t.Fatalf("read back: %d bytes, %v, equal %v", n, err, bytes.Equal(got, data))
	}
	fh.Close(ctx)
	if _, _, err := c.Create(ctx, fid.Root, "f0", 0o644, client.CreateOpts{Exclusive: true}); err == nil {
		t.Fatal("exclusive create of an existing name succeeded")
	}
	if _, err := c.ReadDirAll(ctx, fid.Root, false); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < unlinks; i++ {
		if _, err := c.Unlink(ctx, fid.Root, fmt.Sprint("f", i)); err != nil {
			t.Fatal(err)
		}
	}
	rep := lfsckRun(t, cl)
	ns := rep.Components["namespace"]
	if ns == nil || ns.Status != "completed" {
		t.Fatalf("checker run: %s", summary(rep))
	}

	after := scrape(true)
	if t.Failed() {
		t.FailNow()
	}
	delta := func(target, name string, match map[string]string) float64 {
		return after[target].sum(name, match) - before[target].sum(name, match)
	}
	mdt, mgs := "", ""
	var osts []string
	for _, ts := range st.Targets {
		switch ts.Kind {
		case "mdt":
			mdt = ts.Name
		case "mgs":
			mgs = ts.Name
		case "ost":
			osts = append(osts, ts.Name)
		}
	}

	// The MDT: operations by type, their latency, errors, pools, checker.
	for _, c := range []struct {
		op   string
		want int
	}{{"create", creates}, {"unlink", unlinks}} {
		if d := delta(mdt, "nacre_mds_ops_total", map[string]string{"op": c.op}); d < float64(c.want) {
			t.Errorf("nacre_mds_ops_total{op=%q} moved by %v, want >= %d", c.op, d, c.want)
		}
		if d := delta(mdt, "nacre_mds_op_seconds", map[string]string{"op": c.op}); d < float64(c.want) {
			t.Errorf("nacre_mds_op_seconds{op=%q} counted %v observations, want >= %d", c.op, d, c.want)
		}
	}
	if d := delta(mdt, "nacre_mds_op_errors_total", map[string]string{"op": "create", "errno": "17"}); d < 1 {
		t.Errorf("nacre_mds_op_errors_total{op=create,errno=17} moved by %v after a failing exclusive create", d)
	}
	// A readdir that succeeds is no error (each counted as EIO before).
	if d := delta(mdt, "nacre_mds_op_errors_total", map[string]string{"op": "readdir"}); d != 0 {
		t.Errorf("nacre_mds_op_errors_total{op=readdir} moved by %v after readdirs that succeeded", d)
	}
	for i := range osts {
		ost := fmt.Sprintf("OST%04x", i)
		if !after[mdt].has("nacre_mds_precreate_pool_objects", map[string]string{"ost": ost}) {
			t.Errorf("no nacre_mds_precreate_pool_objects{ost=%q}", ost)
		} else if v := after[mdt].sum("nacre_mds_precreate_pool_objects", map[string]string{"ost": ost}); v <= 0 {
			t.Errorf("nacre_mds_precreate_pool_objects{ost=%q} = %v, want > 0", ost, v)
		}
	}
	for _, comp := range []string{"scrub", "namespace", "layout"} {
		m := map[string]string{"component": comp}
		cr := rep.Components[comp]
		if v := after[mdt].sum("nacre_lfsck_checked_total", m); v != float64(cr.Checked) {
			t.Errorf("nacre_lfsck_checked_total{component=%q} = %v, the run's report says %d", comp, v, cr.Checked)
		}
		if v := after[mdt].sum("nacre_lfsck_repaired_total", m); v != float64(cr.Repaired) {
			t.Errorf("nacre_lfsck_repaired_total{component=%q} = %v, the run's report says %d", comp, v, cr.Repaired)
		}
		if v := after[mdt].sum("nacre_lfsck_running", m); v != 0 {
			t.Errorf("nacre_lfsck_running{component=%q} = %v after the run ended", comp, v)
		}
	}
	if v := after[mdt].sum("nacre_lfsck_checked_total", map[string]string{"component": "namespace"}); v < files-unlinks+1 {
		t.Errorf("nacre_lfsck_checked_total{component=namespace} = %v, want >= %d (the files)", v, files-unlinks+1)
	}
	if d := delta(mdt, "nacre_lfsck_checked_total", map[string]string{"component": "namespace"}); d <= 0 {
		t.Errorf("nacre_lfsck_checked_total{component=namespace} did not move with a checker run")
	}

	// The MDT's Raft group: every mutation is a proposal, applied and
	// made durable by a synced log write (one client: one per write).
	mutations := float64(creates + unlinks)
	for _, name := range []string{"nacre_raft_proposals_total", "nacre_raft_applied_entries_total", "nacre_raft_synced_entries_total"} {
		if d := delta(mdt, name, nil); d < mutations {
			t.Errorf("%s: %s moved by %v with %v mutations", mdt, name, d, mutations)
		}
	}
	if syncs, ents := delta(mdt, "nacre_raft_syncs_total", nil), delta(mdt, "nacre_raft_synced_entries_total", nil); syncs < 1 || syncs > ents {
		t.Errorf("%s: %v synced log writes for %v synced entries", mdt, syncs, ents)
	}
	if v := after[mdt].sum("nacre_raft_is_leader", nil); v != 1 {
		t.Errorf("%s: nacre_raft_is_leader = %v on a single replica", mdt, v)
	}
	if a := after[mdt].sum("nacre_raft_applied_index", nil); a < before[mdt].sum("nacre_raft_applied_index", nil)+mutations {
		t.Errorf("%s: nacre_raft_applied_index went from %v to %v over %v mutations", mdt, before[mdt].sum("nacre_raft_applied_index", nil), a, mutations)
	}
	if v := after[mgs].sum("nacre_raft_is_leader", nil); v != 1 {
		t.Errorf("%s: nacre_raft_is_leader = %v on a single replica", mgs, v)
	}

	// The OSTs: data bytes, operations, network and disk bytes.
	var written, read float64
	for _, ost := range osts {
		w := delta(ost, "nacre_ost_write_bytes_total", nil)
		r := delta(ost, "nacre_ost_read_bytes_total", nil)
		written += w
		read += r
		if w < size/2 || r < size/2 {
			t.Errorf("%s: nacre_ost_write_bytes_total moved by %v and read by %v, want >= %d each (half of the striped file)", ost, w, r, size/2)
		}
		if d := delta(ost, "nacre_ost_ops_total", map[string]string{"api": "bulk", "op": "write"}); d < 1 {
			t.Errorf("%s: nacre_ost_ops_total{api=wire,op=write} moved by %v", ost, d)
		}
		if d := delta(ost, "nacre_net_received_bytes_total", nil); d < w {
			t.Errorf("%s: nacre_net_received_bytes_total moved by %v, less than the %v bytes written", ost, d, w)
		}
		if d := delta(ost, "nacre_net_sent_bytes_total", nil); d < r {
			t.Errorf("%s: nacre_net_sent_bytes_total moved by %v, less than the %v bytes read", ost, d, r)
		}
		if d := delta(ost, "nacre_disk_written_bytes_total", nil); d <= 0 {
			t.Errorf("%s: nacre_disk_written_bytes_total did not move with %v bytes written", ost, w)
		}
	}
	if written < size || read < size {
		t.Errorf("OSTs' write bytes moved by %v and read bytes by %v, want >= %d", written, read, size)
	}
	for _, target := range []string{mdt, mgs} {
		for _, name := range []string{"nacre_net_received_bytes_total", "nacre_net_sent_bytes_total"} {
			if d := delta(target, name, nil); d <= 0 {
				t.Errorf("%s: %s did not move", target, name)
			}
		}
	}
	if d := delta(mdt, "nacre_disk_written_bytes_total", nil); d <= 0 {
		t.Errorf("%s: nacre_disk_written_bytes_total did not move with %d creates", mdt, creates)
	}
	// The RPC queue depth of every protocol each server speaks.
	for _, ts := range st.Targets {
		protos := map[string][]string{"mgs": {"grpc"}, "mdt": {"grpc", "mdrpc"}, "ost": {"grpc", "bulk"}}[ts.Kind]
		for _, p := range protos {
			if !after[ts.Name].has("nacre_rpc_inflight", map[string]string{"proto": p}) {
				t.Errorf("%s: no nacre_rpc_inflight{proto=%q}", ts.Name, p)
			}
		}
	}
	if !after[mgs].has("nacre_mgs_target_up", map[string]string{"target": "MDT0000"}) || after[mgs].sum("nacre_mgs_target_up", nil) < 3 {
		t.Errorf("nacre_mgs_target_up: %v targets up, want the MDT and both OSTs", after[mgs].sum("nacre_mgs_target_up", nil))
	}
}
