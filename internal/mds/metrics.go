package mds

import (
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"nacre/internal/lfsck"
	"nacre/internal/mdt"
	"nacre/internal/obs"
)

type mdtPool = mdt.PoolState

// metrics are the MDS's Prometheus series (nacre_mds_*).
type metrics struct {
	ops          *prometheus.CounterVec
	errors       *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	pool         *prometheus.GaugeVec
	precreated   prometheus.Counter
	destroyQueue prometheus.Gauge
	recoveries   prometheus.Counter
	replayed     prometheus.Counter
	dtxOpen      prometheus.Gauge
}

func newMetrics(reg *prometheus.Registry, label string) metrics {
	c := prometheus.Labels{"target": label}
	m := metrics{
		ops:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nacre_mds_ops_total", Help: "Metadata operations served, by type.", ConstLabels: c}, []string{"op"}),
		errors:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nacre_mds_op_errors_total", Help: "Metadata operations that returned an errno, by type and errno.", ConstLabels: c}, []string{"op", "errno"}),
		latency:      prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nacre_mds_op_seconds", Help: "Latency of metadata operations as served.", ConstLabels: c, Buckets: obs.LatencyBuckets}, []string{"op"}),
		pool:         prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nacre_mds_precreate_pool_objects", Help: "Unused precreated objects per OST.", ConstLabels: c}, []string{"ost"}),
		precreated:   prometheus.NewCounter(prometheus.CounterOpts{Name: "nacre_mds_precreated_objects_total", Help: "OST objects precreated.", ConstLabels: c}),
		destroyQueue: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nacre_mds_destroy_queue_objects", Help: "OST objects of removed files not yet destroyed.", ConstLabels: c}),
		recoveries:   prometheus.NewCounter(prometheus.CounterOpts{Name: "nacre_mds_recoveries_total", Help: "Starts that lost the log's unsynced tail and gathered it back from clients.", ConstLabels: c}),
		replayed:     prometheus.NewCounter(prometheus.CounterOpts{Name: "nacre_mds_replayed_entries_total", Help: "Log entries clients gave back in recoveries and the MDT applied again.", ConstLabels: c}),
		dtxOpen:      prometheus.NewGauge(prometheus.GaugeOpts{Name: "nacre_mds_dtx_open", Help: "Cross-MDT transactions this MDT keeps a record of (pending intents, outcomes not yet forgotten), as the leader last counted.", ConstLabels: c}),
	}
	if reg != nil {
		reg.MustRegister(m.ops, m.errors, m.latency, m.pool, m.precreated, m.destroyQueue, m.recoveries, m.replayed, m.dtxOpen)
	}
	return m
}

func (m metrics) observe(op string, start time.Time, errno int32) {
	m.ops.WithLabelValues(op).Inc()
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if errno != 0 {
		m.errors.WithLabelValues(op, fmt.Sprint(errno)).Inc()
	}
}

func (m metrics) setPools(p map[uint32]mdt.PoolState) {
	for ost, ps := range p {
		m.pool.WithLabelValues(fmt.Sprintf("OST%04x", ost)).Set(float64(ps.Avail()))
	}
}

// lfsckCollector exports the checker's progress (nacre_lfsck_*, per
// component). It reads the checker's figures when scraped, so that the
// scan itself (hundreds of thousands of objects a second) updates no
// metric.
type lfsckCollector struct {
	mu                                      sync.RWMutex
	closed                                  bool // the server stopped: its store is about to close
	c                                       *lfsck.Checker
	running, phase, position                *prometheus.Desc
	checked, failed, inconsistent, repaired *prometheus.Desc
}

func newLfsckCollector(c *lfsck.Checker, label string) *lfsckCollector {
	cl := prometheus.Labels{"target": label}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, []string{"component"}, cl)
	}
	return &lfsckCollector{c: c,
		running:  d("nacre_lfsck_running", "1 while the checker runs this component (scrub, namespace, layout), else 0."),
		phase:    d("nacre_lfsck_phase", "Phase of the running check of this component (1: scan, 2: cross-checks), 0 when it does not run."),
		position: d("nacre_lfsck_position", "Phase-1 scan position: the local object key the running check has reached, else the latest run's last checkpoint position."),
		checked: d("nacre_lfsck_checked_total",
			"Items checked by the checker since the server started, over all runs (the per-run figure is `checked` in nacre lfsck query)."),
		failed: d("nacre_lfsck_failed_total",
			"Items the checker failed to check or repair since the server started, over all runs."),
		inconsistent: d("nacre_lfsck_inconsistent_total",
			"Inconsistencies the checker found (dry runs included) since the server started, over all runs."),
		repaired: d("nacre_lfsck_repaired_total",
			"Inconsistencies the checker repaired since the server started, over all runs."),
	}
}

func (l *lfsckCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{l.running, l.phase, l.position, l.checked, l.failed, l.inconsistent, l.repaired} {
		ch <- d
	}
}

// close makes the collector export nothing from now on; it waits for a
// scrape in progress.
func (l *lfsckCollector) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

func (l *lfsckCollector) Collect(ch chan<- prometheus.Metric) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return
	}
	p := l.c.Progress()
	for _, comp := range lfsck.Components {
		name, pr := lfsck.ComponentNames[comp], p[comp]
		running := 0.0
		if pr.Running {
			running = 1
		}
		ch <- prometheus.MustNewConstMetric(l.running, prometheus.GaugeValue, running, name)
		ch <- prometheus.MustNewConstMetric(l.phase, prometheus.GaugeValue, float64(pr.Phase), name)
		ch <- prometheus.MustNewConstMetric(l.position, prometheus.GaugeValue, float64(pr.Position), name)
		ch <- prometheus.MustNewConstMetric(l.checked, prometheus.CounterValue, float64(pr.Checked), name)
		ch <- prometheus.MustNewConstMetric(l.failed, prometheus.CounterValue, float64(pr.Failed), name)
		ch <- prometheus.MustNewConstMetric(l.inconsistent, prometheus.CounterValue, float64(pr.Inconsistent), name)
		ch <- prometheus.MustNewConstMetric(l.repaired, prometheus.CounterValue, float64(pr.Repaired), name)
	}
}
