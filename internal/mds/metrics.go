package mds

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	}
	if reg != nil {
		reg.MustRegister(m.ops, m.errors, m.latency, m.pool, m.precreated, m.destroyQueue)
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
