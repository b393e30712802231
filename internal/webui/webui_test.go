package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/obs"
)

// fakeCluster is an MGS and its targets' metrics pages, moved by hand.
type fakeCluster struct {
	mu      sync.Mutex
	now     time.Time
	cfg     *pb.ClusterConfig
	err     error
	metrics map[string]map[string]float64 // by metrics address: series key -> value
}

func newFake() *fakeCluster {
	f := &fakeCluster{now: time.Unix(1_800_000_000, 0), metrics: map[string]map[string]float64{}}
	statfs := &pb.Statfs{BytesTotal: 1000, BytesFree: 400, InodesTotal: 100, InodesFree: 90}
	f.cfg = &pb.ClusterConfig{Fsname: "nacre", Targets: []*pb.TargetInfo{
		{Kind: pb.TargetKind_TARGET_OST, Index: 0, Addr: "127.0.0.1:3", MetricsAddr: "m-ost0", State: "up", Statfs: statfs},
		{Kind: pb.TargetKind_TARGET_MGS, Addr: "127.0.0.1:1", MetricsAddr: "m-mgs", State: "up", Leader: true},
		{Kind: pb.TargetKind_TARGET_MDT, Index: 0, Addr: "127.0.0.1:2", MetricsAddr: "m-mdt0", State: "up", Leader: true, Statfs: statfs},
	}}
	for _, a := range []string{"m-ost0", "m-mgs", "m-mdt0"} {
		f.metrics[a] = map[string]float64{}
	}
	return f
}

func (f *fakeCluster) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeCluster) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fakeCluster) add(addr, key string, v float64) {
	f.mu.Lock()
	f.metrics[addr][key] += v
	f.mu.Unlock()
}

func (f *fakeCluster) cluster(context.Context) (*pb.ClusterConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg, f.err
}

// fetch answers a scrape from f.metrics; a key is NAME or NAME,LABEL=VALUE.
func (f *fakeCluster) fetch(_ context.Context, url string) (*obs.Scrape, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/metrics")
	m, ok := f.metrics[addr]
	if !ok {
		return nil, fmt.Errorf("scrape %s: connection refused", url)
	}
	sc := &obs.Scrape{At: f.now, Samples: map[string]obs.Sample{}}
	for k, v := range m {
		name, lbl, _ := strings.Cut(k, ",")
		s := obs.Sample{Name: name, Labels: map[string]string{}, Value: v}
		if lbl != "" {
			lk, lv, _ := strings.Cut(lbl, "=")
			s.Labels[lk] = lv
		}
		sc.Samples[s.Key()] = s
	}
	return sc, nil
}

func (f *fakeCluster) server(listen string) *Server {
	return New(Config{Listen: listen, Cluster: f.cluster, Fetch: f.fetch, Now: f.clock})
}

func get(t *testing.T, h http.Handler, host, path string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "http://"+host+path, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func apiDoc(t *testing.T, h http.Handler) *Cluster {
	t.Helper()
	rec := get(t, h, "127.0.0.1:9100", APIPath)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", APIPath, rec.Code, rec.Body)
	}
	var doc Cluster
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatalf("GET %s: %v\n%s", APIPath, err, rec.Body)
	}
	return &doc
}

func (d *Cluster) target(t *testing.T, name string) Target {
	t.Helper()
	for _, ts := range d.Targets {
		if ts.Name == name {
			return ts
		}
	}
	t.Fatalf("no target %s in %+v", name, d.Targets)
	return Target{}
}

// TestAPIShowsTargetsRatesAndEvents: /api/cluster lists every target in
// order with its space, gives the rates of the counters between two
// looks (operations, data, CPU), the checker's progress, and records a
// target that goes down and comes back as events, latest first.
func TestAPIShowsTargetsRatesAndEvents(t *testing.T) {
	f := newFake()
	s := f.server("127.0.0.1:9100")
	mux := http.NewServeMux()
	s.Attach(mux)

	doc := apiDoc(t, mux) // the first look: states, no rates yet
	var names []string
	for _, ts := range doc.Targets {
		names = append(names, ts.Name)
	}
	if got := strings.Join(names, " "); got != "MGS nacre-MDT0000 nacre-OST0000" {
		t.Fatalf("targets %q, want MGS, then MDTs, then OSTs", got)
	}
	if doc.Totals != nil || !doc.Scraped {
		t.Fatalf("first look: totals %+v, scraped %v; want no rates from one scrape, but a scrape", doc.Totals, doc.Scraped)
	}
	if m := doc.target(t, "nacre-MDT0000"); m.BytesUsed != 600 || m.InodesUsed != 10 {
		t.Fatalf("MDT space %d B, %d inodes used; want 600, 10", m.BytesUsed, m.InodesUsed)
	}

	f.advance(2 * time.Second)
	f.add("m-mdt0", "nacre_mds_ops_total,op=create", 100)
	f.add("m-mdt0", "nacre_mds_ops_total,op=getattr", 40)
	f.add("m-mdt0", "process_cpu_seconds_total", 1)
	f.add("m-ost0", "nacre_ost_write_bytes_total", 4<<20)
	f.add("m-ost0", "nacre_ost_ops_total,op=write", 4)
	f.add("m-mdt0", "nacre_lfsck_running,component=scrub", 1)
	f.add("m-mdt0", "nacre_lfsck_phase,component=scrub", 1)
	f.add("m-mdt0", "nacre_lfsck_checked_total,component=scrub", 500)
	s.look(context.Background())
	doc = apiDoc(t, mux)
	if doc.Interval != 2 || doc.Totals == nil {
		t.Fatalf("second look: interval %v, totals %+v; want rates over 2 s", doc.Interval, doc.Totals)
	}
	if doc.Totals.MDSOps != 70 || doc.Totals.Written != 2<<20 || doc.Totals.OSTOps != 2 || doc.Totals.CPU != 0.5 {
		t.Fatalf("totals %+v: want 70 metadata ops/s, 2 MiB/s written, 2 OST requests/s, half a core", *doc.Totals)
	}
	m := doc.target(t, "nacre-MDT0000")
	if m.Rates == nil || m.Rates.Ops != 70 || len(m.Rates.TopOps) != 2 || m.Rates.TopOps[0] != (OpRate{"create", 50}) {
		t.Fatalf("MDT rates %+v: want 70 ops/s, create 50 first", m.Rates)
	}
	if len(m.OpsHistory) != 1 || len(doc.History) != 1 {
		t.Fatalf("history: MDT %v, totals %d points; want one point each", m.OpsHistory, len(doc.History))
	}
	if len(doc.Lfsck) != 1 || doc.Lfsck[0].Component != "scrub" || !doc.Lfsck[0].Running || doc.Lfsck[0].CheckedPerSec != 250 {
		t.Fatalf("lfsck %+v: want scrub running at 250 checked/s", doc.Lfsck)
	}

	f.mu.Lock()
	f.cfg.Targets[0].State = "down" // OST0000
	f.cfg.Targets[0].LastHeardNs = f.now.Add(-6 * time.Second).UnixNano()
	f.mu.Unlock()
	f.advance(time.Second)
	s.look(context.Background())
	doc = apiDoc(t, mux)
	if o := doc.target(t, "nacre-OST0000"); o.State != "down" || o.Rates != nil {
		t.Fatalf("OST0000 down: state %q, rates %+v; want down and no rates (not scraped)", o.State, o.Rates)
	}
	if len(doc.Events) != 1 || doc.Events[0].Level != "critical" || !strings.Contains(doc.Events[0].Message, "nacre-OST0000 is down") ||
		!strings.Contains(doc.Events[0].Message, "last heard 7.0 s ago") {
		t.Fatalf("events %+v: want one critical 'nacre-OST0000 is down ... last heard 7.0 s ago'", doc.Events)
	}

	f.mu.Lock()
	f.cfg.Targets[0].State = "up"
	f.mu.Unlock()
	f.advance(time.Second)
	s.look(context.Background())
	doc = apiDoc(t, mux)
	if len(doc.Events) != 2 || !strings.Contains(doc.Events[0].Message, "nacre-OST0000 is up again") || doc.Events[0].Level != "notice" {
		t.Fatalf("events %+v: want 'is up again' first, then the down", doc.Events)
	}
}

// TestEventsFollowLeadersAndTheMGS: a replicated group's leader change,
// its loss of a leader, and an MGS that stops answering are events; the
// document keeps the last answer's targets and says why it is old.
func TestEventsFollowLeadersAndTheMGS(t *testing.T) {
	f := newFake()
	rep := func(id uint64, leader bool, state string) *pb.TargetInfo {
		return &pb.TargetInfo{Kind: pb.TargetKind_TARGET_MDT, ReplicaId: id, Addr: fmt.Sprint("127.0.0.1:", 10+id), Leader: leader, State: state, Role: "voter"}
	}
	// The MGS lists itself until replicas of its own register: its
	// entry going is no event.
	self := &pb.TargetInfo{Kind: pb.TargetKind_TARGET_MGS, State: "up", Leader: true}
	f.cfg.Targets = []*pb.TargetInfo{self, rep(1, true, "up"), rep(2, false, "up"), rep(3, false, "up")}
	s := f.server("127.0.0.1:9100")
	ctx := context.Background()
	s.look(ctx)
	step := func(targets ...*pb.TargetInfo) *Cluster {
		f.mu.Lock()
		f.cfg = &pb.ClusterConfig{Fsname: "nacre", Targets: targets}
		f.mu.Unlock()
		f.advance(time.Second)
		s.look(ctx)
		return s.doc
	}
	doc := step(rep(1, false, "down"), rep(2, false, "up"), rep(3, false, "up"))
	if len(doc.NoLeader) != 1 || doc.NoLeader[0] != "nacre-MDT0000" {
		t.Fatalf("no_leader %v, want nacre-MDT0000", doc.NoLeader)
	}
	if r := doc.target(t, "nacre-MDT0000 r2"); r.Role != "follower" {
		t.Fatalf("replica 2 role %q, want follower", r.Role)
	}
	doc = step(rep(1, false, "down"), rep(2, false, "up"), rep(3, true, "up"))
	if r := doc.target(t, "nacre-MDT0000 r3"); r.Role != "leader" {
		t.Fatalf("replica 3 role %q, want leader", r.Role)
	}
	f.mu.Lock()
	f.err = fmt.Errorf("MGS: no leader")
	f.mu.Unlock()
	f.advance(time.Second)
	s.look(ctx)
	doc = s.doc
	if doc.Error != "MGS: no leader" || len(doc.Targets) != 3 {
		t.Fatalf("MGS silent: error %q, %d targets; want the error and the last answer's 3 targets", doc.Error, len(doc.Targets))
	}
	var got []string
	for _, e := range doc.Events {
		got = append(got, e.Level+": "+e.Message)
	}
	want := []string{
		"critical: the MGS does not answer: MGS: no leader",
		"notice: nacre-MDT0000 is led by replica 3",
		"critical: nacre-MDT0000 has no leader",
		"critical: nacre-MDT0000 r1 is down",
	}
	if len(got) != len(want) {
		t.Fatalf("events:\n%s\nwant %d", strings.Join(got, "\n"), len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("event %d: %q, want it to start %q", i, got[i], want[i])
		}
	}
}

// TestPageRefusedOffLoopback: on a listener that is not loopback the
// page and its API answer 403 saying why, and nothing polls the cluster.
func TestPageRefusedOffLoopback(t *testing.T) {
	f := newFake()
	polled := false
	s := New(Config{Listen: "0.0.0.0:9100", Cluster: func(context.Context) (*pb.ClusterConfig, error) { polled = true; return f.cfg, nil }, Fetch: f.fetch})
	mux := http.NewServeMux()
	s.Attach(mux)
	for _, p := range []string{Path, APIPath} {
		rec := get(t, mux, "127.0.0.1:9100", p)
		if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "loopback address only") || !strings.Contains(rec.Body.String(), "0.0.0.0:9100") {
			t.Errorf("GET %s off loopback: %d %q; want 403 naming the listener and the rule", p, rec.Code, rec.Body)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Run(ctx) // returns at once
	if ctx.Err() != nil || polled {
		t.Fatalf("Run of a refused page: waited %v, polled %v; want neither", ctx.Err(), polled)
	}
	if _, err := URL("0.0.0.0:9100"); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("URL off loopback: %v; want an error naming the rule", err)
	}
	if u, err := URL("127.0.0.1:9100"); err != nil || u != "http://127.0.0.1:9100/ui/" {
		t.Fatalf("URL on loopback: %q, %v", u, err)
	}
}

// TestPageServedToLoopbackHostsOnly: the page, its script and its style
// come from the binary; a request naming another host (a DNS name
// rebound to 127.0.0.1) is refused.
func TestPageServedToLoopbackHostsOnly(t *testing.T) {
	s := newFake().server("127.0.0.1:9100")
	mux := http.NewServeMux()
	s.Attach(mux)
	for path, want := range map[string]string{Path: `src="app.js"`, Path + "app.js": "/api/cluster", Path + "style.css": ".spark"} {
		rec := get(t, mux, "localhost:9100", path)
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s: %d, body without %q", path, rec.Code, want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	rec := get(t, mux, "attacker.example:9100", APIPath)
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `"attacker.example:9100"`) {
		t.Fatalf("GET with Host attacker.example: %d %q; want 403 naming the host", rec.Code, rec.Body)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9100": true, "127.3.4.5:1": true, "[::1]:9100": true, "localhost:80": true, "LOCALHOST": true, "127.0.0.1": true,
		":9100": false, "0.0.0.0:9100": false, "[::]:9100": false, "10.0.0.1:9100": false, "example.com:80": false, "": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
