package bench

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"nacre/internal/cli"
	"nacre/internal/obs"
)

// Timeline samples, once per interval, the benchmark's own operation
// count and every server's disk and network byte counters (seed 000's
// iostat and netstat view), for plots.
type Timeline struct {
	// MGS, if set, names the cluster whose servers are sampled.
	MGS      string
	Interval time.Duration
	// Unit names what Add counts ("ops", "bytes").
	Unit string

	count  atomic.Int64
	phase  atomic.Value
	mu     sync.Mutex
	points []TimelinePoint
	cancel context.CancelFunc
	done   chan struct{}
	start  time.Time
	base   int64 // the count at Start
}

// TimelinePoint is one interval.
type TimelinePoint struct {
	T       float64                `json:"t"`
	Phase   string                 `json:"phase"`
	Rate    float64                `json:"rate"`
	Servers map[string]ServerRates `json:"servers,omitempty"`
}

// ServerRates are one server's throughput in bytes/s over an interval.
type ServerRates struct {
	DiskRead  float64 `json:"disk_read"`
	DiskWrite float64 `json:"disk_write"`
	NetIn     float64 `json:"net_in"`
	NetOut    float64 `json:"net_out"`
}

// Add counts n units of work done by the benchmark.
func (t *Timeline) Add(n int64) { t.count.Add(n) }

// SetPhase names the work from now on.
func (t *Timeline) SetPhase(p string) { t.phase.Store(p) }

// Start begins sampling.
func (t *Timeline) Start(ctx context.Context) {
	if t.Interval == 0 {
		t.Interval = time.Second
	}
	ctx, t.cancel = context.WithCancel(ctx)
	t.done = make(chan struct{})
	t.start = time.Now()
	t.base = t.count.Load()
	t.phase.Store("")
	go t.run(ctx)
}

// Stop ends sampling and waits for the sampler.
func (t *Timeline) Stop() {
	if t.cancel == nil {
		return
	}
	t.cancel()
	<-t.done
	t.cancel = nil
}

// Points returns the samples so far.
func (t *Timeline) Points() []TimelinePoint {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TimelinePoint(nil), t.points...)
}

type serverSample struct {
	name string
	url  string
	last *obs.Scrape
}

func (t *Timeline) run(ctx context.Context) {
	defer close(t.done)
	var servers []*serverSample
	if t.MGS != "" {
		if st, err := cli.GetStatus(ctx, t.MGS, nil); err == nil {
			for _, ts := range st.Targets {
				if ts.MetricsURL != "" {
					servers = append(servers, &serverSample{name: ts.Name, url: ts.MetricsURL})
				}
			}
			sort.Slice(servers, func(i, j int) bool { return servers[i].name < servers[j].name })
		}
	}
	sample := func() {
		for _, s := range servers {
			s.last, _ = obs.Fetch(ctx, s.url)
		}
	}
	sample()
	tick := time.NewTicker(t.Interval)
	defer tick.Stop()
	// The first interval starts at Start (the servers' first scrape above
	// takes a while), so that rate x interval adds up to the work.
	last, lastAt := t.base, t.start
	// point is the interval from the last point to now, with the servers'
	// rates over it (asked with ctx).
	point := func(ctx context.Context, now time.Time, n int64) TimelinePoint {
		pt := TimelinePoint{T: now.Sub(t.start).Seconds(), Phase: t.phase.Load().(string), Rate: float64(n-last) / now.Sub(lastAt).Seconds()}
		last, lastAt = n, now
		if len(servers) > 0 {
			pt.Servers = map[string]ServerRates{}
			for _, s := range servers {
				cur, err := obs.Fetch(ctx, s.url)
				if err != nil || s.last == nil {
					s.last = cur
					continue
				}
				dt := cur.At.Sub(s.last.At).Seconds()
				rate := func(name string) float64 { return (cur.Sum(name, nil) - s.last.Sum(name, nil)) / dt }
				pt.Servers[s.name] = ServerRates{
					DiskRead: rate("nacre_disk_read_bytes_total"), DiskWrite: rate("nacre_disk_written_bytes_total"),
					NetIn: rate("nacre_net_received_bytes_total"), NetOut: rate("nacre_net_sent_bytes_total"),
				}
				s.last = cur
			}
		}
		return pt
	}
	add := func(pt TimelinePoint) {
		t.mu.Lock()
		t.points = append(t.points, pt)
		t.mu.Unlock()
	}
	for {
		select {
		case <-ctx.Done():
			// The last, partial interval: without it a short run's
			// timeline misses up to a second of its work (and a run
			// shorter than the interval would have no server rates).
			now := time.Now()
			if n := t.count.Load(); n != last && now.After(lastAt) {
				fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				add(point(fctx, now, n))
				cancel()
			}
			return
		case <-tick.C:
		}
		add(point(ctx, time.Now(), t.count.Load()))
	}
}
