package raftgroup

import "github.com/prometheus/client_golang/prometheus"

// Collector exports a group's counters as Prometheus series (nacre_raft_*).
// It reads them when scraped, so the ready loop updates no metric itself.
// The figure an operator watches first is entries per fsync
// (nacre_raft_synced_entries_total / nacre_raft_syncs_total): how much
// group commit the load gets.
type Collector struct {
	g *Group

	proposals, syncs, syncedEntries, logWrites *prometheus.Desc
	applyBatches, appliedEntries, compactions  *prometheus.Desc
	term, applied, leader                      *prometheus.Desc
}

// NewCollector returns a collector for g; label names the target
// (the "target" label of every series).
func NewCollector(g *Group, label string) *Collector {
	cl := prometheus.Labels{"target": label}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, cl) }
	return &Collector{g: g,
		proposals:      d("nacre_raft_proposals_total", "Entries this replica proposed to its Raft group."),
		logWrites:      d("nacre_raft_log_writes_total", "Batches written to the Raft log."),
		syncs:          d("nacre_raft_syncs_total", "Raft log writes that were synced (one fdatasync each)."),
		syncedEntries:  d("nacre_raft_synced_entries_total", "Log entries made durable by synced writes; divided by nacre_raft_syncs_total, the group commit achieved."),
		applyBatches:   d("nacre_raft_apply_batches_total", "State machine Apply calls."),
		appliedEntries: d("nacre_raft_applied_entries_total", "Entries applied to the state machine."),
		compactions:    d("nacre_raft_log_compactions_total", "Raft log truncations."),
		term:           d("nacre_raft_term", "Current Raft term."),
		applied:        d("nacre_raft_applied_index", "Index the state machine has applied."),
		leader:         d("nacre_raft_is_leader", "1 while this replica leads its group, else 0."),
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.proposals, c.logWrites, c.syncs, c.syncedEntries,
		c.applyBatches, c.appliedEntries, c.compactions, c.term, c.applied, c.leader} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.g.Stats()
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	counter(c.proposals, s.Proposals)
	counter(c.logWrites, s.LogWrites)
	counter(c.syncs, s.Syncs)
	counter(c.syncedEntries, s.SyncedEntries)
	counter(c.applyBatches, s.ApplyBatches)
	counter(c.appliedEntries, s.AppliedEntries)
	counter(c.compactions, s.Compactions)
	gauge(c.term, c.g.Term())
	gauge(c.applied, c.g.AppliedIndex())
	leader := uint64(0)
	if c.g.IsLeader() {
		leader = 1
	}
	gauge(c.leader, leader)
}
