package webui

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/obs"
)

// Cluster is the document of /api/cluster.
type Cluster struct {
	Fsname string    `json:"fsname"`
	At     time.Time `json:"at"`
	// Error is why the MGS did not answer this look (no leader); the
	// targets are then those of its last answer.
	Error string `json:"error,omitempty"`
	// Scraped: the targets' metrics were read in this look (they are
	// only while someone watches).
	Scraped bool `json:"scraped"`
	// Interval is the time the rates are measured over (0: no rates
	// yet, they need two looks).
	Interval float64  `json:"interval_seconds"`
	Targets  []Target `json:"targets"`
	Totals   *Totals  `json:"totals,omitempty"`
	// History is the totals of the last two minutes, oldest first.
	History []Point `json:"history"`
	Lfsck   []Check `json:"lfsck"`
	// NoLeader names the replicated targets none of whose replicas leads.
	NoLeader []string `json:"no_leader,omitempty"`
	// Events are the latest first.
	Events []Event `json:"events"`
}

// Target is one target process.
type Target struct {
	Name      string `json:"name"` // nacre-MDT0000, MGS
	Kind      string `json:"kind"` // mgs, mdt, ost
	Index     uint32 `json:"index"`
	ReplicaID uint64 `json:"replica_id,omitempty"`
	// State is "up", "down", or "up?": the MGS has not heard from it
	// since it began to lead, and gives it a few seconds.
	State string `json:"state"`
	// Role is a replica's: "leader", "follower", "learner" or "not a
	// member"; empty for a target that is not replicated.
	Role        string `json:"role,omitempty"`
	Addr        string `json:"addr"`
	Host        string `json:"host,omitempty"`
	Pid         int64  `json:"pid,omitempty"`
	MetricsURL  string `json:"metrics_url,omitempty"`
	BytesTotal  uint64 `json:"bytes_total,omitempty"`
	BytesUsed   uint64 `json:"bytes_used,omitempty"`
	InodesTotal uint64 `json:"inodes_total,omitempty"`
	InodesUsed  uint64 `json:"inodes_used,omitempty"`
	// Rates are from its metrics over the interval; absent until two
	// scrapes answered.
	Rates       *Rates `json:"rates,omitempty"`
	ScrapeError string `json:"scrape_error,omitempty"`
	// OpsHistory is its operations per second over the last minute.
	OpsHistory []float64 `json:"ops_history,omitempty"`
}

// Rates are one target's figures per second over the interval.
type Rates struct {
	CPUCores float64  `json:"cpu_cores"` // CPU time per second
	RSSBytes float64  `json:"rss_bytes"`
	Ops      float64  `json:"ops_per_sec"` // metadata operations (MDT), requests (OST)
	TopOps   []OpRate `json:"top_ops,omitempty"`
	Read     float64  `json:"read_bytes_per_sec"`  // object data read by clients (OST)
	Written  float64  `json:"write_bytes_per_sec"` // object data written by clients (OST)
	NetIn    float64  `json:"net_in_bytes_per_sec"`
	NetOut   float64  `json:"net_out_bytes_per_sec"`
	InFlight float64  `json:"inflight"`
}

// OpRate is one operation type's rate.
type OpRate struct {
	Op   string  `json:"op"`
	Rate float64 `json:"per_sec"`
}

// Totals are the whole file system's rates.
type Totals struct {
	MDSOps  float64 `json:"mds_ops_per_sec"`
	OSTOps  float64 `json:"ost_ops_per_sec"`
	Read    float64 `json:"read_bytes_per_sec"`
	Written float64 `json:"write_bytes_per_sec"`
	CPU     float64 `json:"cpu_cores"`
}

// Point is the totals at one time (Unix milliseconds).
type Point struct {
	T int64 `json:"t"`
	Totals
}

// Check is one checker component on one MDT.
type Check struct {
	Target    string `json:"target"`
	Component string `json:"component"`
	Running   bool   `json:"running"`
	// Phase is 1 (scan) or 2 (cross-checks) while it runs.
	Phase         int     `json:"phase"`
	Position      float64 `json:"position"`
	Checked       float64 `json:"checked"`
	CheckedPerSec float64 `json:"checked_per_sec"`
	Inconsistent  float64 `json:"inconsistent"`
	Repaired      float64 `json:"repaired"`
	Failed        float64 `json:"failed"`
}

// Event is something that happened to the cluster. Level "critical" is
// a loss (a target down, a group without a leader, the MGS silent);
// "notice" is the rest.
type Event struct {
	At      time.Time `json:"at"`
	Level   string    `json:"level"`
	Target  string    `json:"target,omitempty"`
	Message string    `json:"message"`
}

const (
	maxEvents  = 100
	histLen    = 120 // looks, two minutes at one a second
	targetHist = 60
	// staleAfter: a scrape older than this is no base for a rate (it
	// would be an average over a spell nobody watched).
	staleAfter = 10 * time.Second
)

// wanted are the series the page reads from a metrics page.
func wanted(name string) bool {
	return strings.HasPrefix(name, "nacre_") || name == "process_cpu_seconds_total" || name == "process_resident_memory_bytes"
}

// collector is what the page remembers between looks (Server.look
// holds Server.tick while it runs).
type collector struct {
	fsname   string
	answered bool // the MGS answered the last look
	last     *pb.ClusterConfig
	seen     bool                   // states holds a first look
	states   map[string]tstate      // by target key
	leaders  map[string]uint64      // replica leading each replicated group, 0: none
	prev     map[string]*obs.Scrape // by metrics URL
	events   []Event                // oldest first
	hist     []Point
	opsHist  map[string][]float64 // by target key
}

type tstate struct {
	name  string
	state string
	addr  string
}

func newCollector() collector {
	return collector{states: map[string]tstate{}, leaders: map[string]uint64{}, prev: map[string]*obs.Scrape{}, opsHist: map[string][]float64{}}
}

// KindName is a target kind as status output names it: mgs, mdt, ost.
func KindName(k pb.TargetKind) string {
	switch k {
	case pb.TargetKind_TARGET_MGS:
		return "mgs"
	case pb.TargetKind_TARGET_MDT:
		return "mdt"
	case pb.TargetKind_TARGET_OST:
		return "ost"
	}
	return "unknown"
}

// GroupName is a target's name without its replica: nacre-MDT0000.
func GroupName(fsname string, t *pb.TargetInfo) string {
	switch t.Kind {
	case pb.TargetKind_TARGET_MDT:
		return fmt.Sprintf("%s-MDT%04x", fsname, t.Index)
	case pb.TargetKind_TARGET_OST:
		return fmt.Sprintf("%s-OST%04x", fsname, t.Index)
	}
	return "MGS"
}

func targetName(fsname string, t *pb.TargetInfo) string {
	n := GroupName(fsname, t)
	if t.ReplicaId != 0 {
		n += fmt.Sprintf(" r%d", t.ReplicaId)
	}
	return n
}

func targetKey(t *pb.TargetInfo) string {
	return fmt.Sprintf("%d/%d/%d", t.Kind, t.Index, t.ReplicaId)
}

func (c *collector) event(at time.Time, level, target, format string, args ...any) {
	c.events = append(c.events, Event{At: at, Level: level, Target: target, Message: fmt.Sprintf(format, args...)})
	if len(c.events) > maxEvents {
		c.events = c.events[len(c.events)-maxEvents:]
	}
}

// update takes one look's answers (cfg, or err if the MGS gave none;
// scrapes by metrics URL, nil when nobody watches) and returns the
// document.
func (c *collector) update(now time.Time, cfg *pb.ClusterConfig, err error, scrapes map[string]scrapeResult) *Cluster {
	doc := &Cluster{At: now, History: []Point{}, Lfsck: []Check{}, Events: []Event{}}
	if err != nil {
		if c.answered {
			c.event(now, "critical", "MGS", "the MGS does not answer: %v", err)
		}
		c.answered = false
		doc.Error = err.Error()
		cfg = c.last // show what it said last
	} else {
		if !c.answered && c.last != nil {
			c.event(now, "notice", "MGS", "the MGS answers again")
		}
		c.answered = true
		c.last = cfg
		c.fsname = cfg.Fsname
		c.noteStates(now, cfg)
	}
	doc.Fsname = c.fsname
	if cfg != nil {
		c.fill(now, doc, cfg, scrapes)
	}
	for i := len(c.events) - 1; i >= 0; i-- {
		doc.Events = append(doc.Events, c.events[i])
	}
	doc.History = append(doc.History, c.hist...)
	return doc
}

// noteStates records as events what changed since the last look: targets
// down or back, joined or gone, and which replica leads each group.
func (c *collector) noteStates(now time.Time, cfg *pb.ClusterConfig) {
	first := !c.seen
	c.seen = true
	cur := map[string]tstate{}
	leaders := map[string]uint64{}
	grouped := map[string]bool{}
	for _, t := range cfg.Targets {
		if t.Kind == pb.TargetKind_TARGET_MGS && t.ReplicaId == 0 {
			// The MGS that answers, listed until replicas of its own
			// register: no news.
			continue
		}
		k := targetKey(t)
		st := tstate{name: targetName(cfg.Fsname, t), state: t.State, addr: t.Addr}
		cur[k] = st
		old, known := c.states[k]
		switch {
		case first && t.State == "down":
			c.event(now, "critical", st.name, "%s is down (at %s)", st.name, t.Addr)
		case first:
		case !known:
			c.event(now, "notice", st.name, "%s joined, at %s", st.name, t.Addr)
			if t.State == "down" {
				c.event(now, "critical", st.name, "%s is down (at %s)", st.name, t.Addr)
			}
		case old.state != "down" && t.State == "down":
			heard := ""
			if t.LastHeardNs != 0 {
				heard = fmt.Sprintf("; last heard %.1f s ago", now.Sub(time.Unix(0, t.LastHeardNs)).Seconds())
			}
			c.event(now, "critical", st.name, "%s is down (at %s%s)", st.name, t.Addr, heard)
		case old.state == "down" && t.State != "down":
			c.event(now, "notice", st.name, "%s is up again (at %s, pid %d)", st.name, t.Addr, t.Pid)
		case old.addr != t.Addr:
			c.event(now, "notice", st.name, "%s moved from %s to %s", st.name, old.addr, t.Addr)
		}
		if t.ReplicaId != 0 && t.Role != "learner" && t.Role != "not a member" {
			g := GroupName(cfg.Fsname, t)
			grouped[g] = true
			if t.Leader && t.State != "down" {
				leaders[g] = t.ReplicaId
			}
		}
	}
	for k, old := range c.states {
		if _, ok := cur[k]; !ok {
			c.event(now, "notice", old.name, "%s left the registry", old.name)
		}
	}
	groups := make([]string, 0, len(grouped))
	for g := range grouped {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		was, had := c.leaders[g]
		is := leaders[g]
		switch {
		case had && was == is:
		case is == 0 && (had || first):
			c.event(now, "critical", g, "%s has no leader: it answers nothing until a majority of its replicas elects one", g)
		case is != 0 && !first:
			c.event(now, "notice", g, "%s is led by replica %d", g, is)
		}
		leaders[g] = is // 0 kept: a group known to have no leader
	}
	c.states, c.leaders = cur, leaders
}

// fill puts the targets into doc, with their figures from scrapes.
func (c *collector) fill(now time.Time, doc *Cluster, cfg *pb.ClusterConfig, scrapes map[string]scrapeResult) {
	doc.Scraped = scrapes != nil
	var totals Totals
	rated := false
	keep := map[string]bool{}
	for _, t := range cfg.Targets {
		ts := Target{Name: targetName(cfg.Fsname, t), Kind: KindName(t.Kind), Index: t.Index, ReplicaID: t.ReplicaId,
			State: t.State, Addr: t.Addr, Host: t.Host, Pid: t.Pid}
		if t.Unheard && t.State == "up" {
			ts.State = "up?"
		}
		if t.ReplicaId != 0 {
			switch {
			case t.Leader && t.State != "down":
				ts.Role = "leader"
			case t.Role == "learner" || t.Role == "not a member":
				ts.Role = t.Role
			default:
				ts.Role = "follower"
			}
		}
		if s := t.Statfs; s != nil {
			ts.BytesTotal, ts.BytesUsed = s.BytesTotal, s.BytesTotal-s.BytesFree
			ts.InodesTotal, ts.InodesUsed = s.InodesTotal, s.InodesTotal-s.InodesFree
		}
		key := targetKey(t)
		keep[key] = true
		if t.MetricsAddr != "" {
			ts.MetricsURL = "http://" + t.MetricsAddr + "/metrics"
			keep[ts.MetricsURL] = true
		}
		if r, ok := scrapes[ts.MetricsURL]; ok && ts.MetricsURL != "" {
			if r.err != nil {
				ts.ScrapeError = r.err.Error()
				delete(c.prev, ts.MetricsURL)
			} else {
				p := c.prev[ts.MetricsURL]
				if p != nil && (r.sc.At.Sub(p.At) <= 0 || r.sc.At.Sub(p.At) >= staleAfter) {
					p = nil
				}
				if p != nil {
					ts.Rates = rates(ts.Kind, p, r.sc)
					doc.Interval = math.Max(doc.Interval, round(r.sc.At.Sub(p.At).Seconds(), 3))
					rated = true
					totals.CPU += ts.Rates.CPUCores
					totals.Read += ts.Rates.Read
					totals.Written += ts.Rates.Written
					switch ts.Kind {
					case "mdt":
						totals.MDSOps += ts.Rates.Ops
					case "ost":
						totals.OSTOps += ts.Rates.Ops
					}
					h := append(c.opsHist[key], ts.Rates.Ops)
					if len(h) > targetHist {
						h = h[len(h)-targetHist:]
					}
					c.opsHist[key] = h
				}
				c.prev[ts.MetricsURL] = r.sc
				doc.Lfsck = append(doc.Lfsck, checks(ts.Name, p, r.sc)...)
			}
		}
		ts.OpsHistory = append([]float64(nil), c.opsHist[key]...)
		doc.Targets = append(doc.Targets, ts)
	}
	for k := range c.opsHist {
		if !keep[k] {
			delete(c.opsHist, k)
		}
	}
	for u := range c.prev {
		if !keep[u] {
			delete(c.prev, u)
		}
	}
	sort.SliceStable(doc.Targets, func(i, j int) bool {
		a, b := doc.Targets[i], doc.Targets[j]
		if a.Kind != b.Kind {
			return order(a.Kind) < order(b.Kind)
		}
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.ReplicaID < b.ReplicaID
	})
	for g, r := range c.leaders {
		if r == 0 {
			doc.NoLeader = append(doc.NoLeader, g)
		}
	}
	sort.Strings(doc.NoLeader)
	if rated {
		totals.MDSOps, totals.OSTOps = round(totals.MDSOps, 1), round(totals.OSTOps, 1)
		totals.Read, totals.Written, totals.CPU = round(totals.Read, 1), round(totals.Written, 1), round(totals.CPU, 3)
		doc.Totals = &totals
		c.hist = append(c.hist, Point{T: now.UnixMilli(), Totals: totals})
		if len(c.hist) > histLen {
			c.hist = c.hist[len(c.hist)-histLen:]
		}
	}
}

func order(kind string) int {
	switch kind {
	case "mgs":
		return 0
	case "mdt":
		return 1
	}
	return 2
}

// opSeries is the operation counter of each kind of target.
var opSeries = map[string]string{"mdt": "nacre_mds_ops_total", "ost": "nacre_ost_ops_total"}

// rates are a target's figures per second between scrapes a and b.
func rates(kind string, a, b *obs.Scrape) *Rates {
	dt := b.At.Sub(a.At).Seconds()
	per := func(name string, match map[string]string) float64 {
		return round(math.Max(b.Sum(name, match)-a.Sum(name, match), 0)/dt, 1)
	}
	r := &Rates{
		CPUCores: round(math.Max(b.Sum("process_cpu_seconds_total", nil)-a.Sum("process_cpu_seconds_total", nil), 0)/dt, 3),
		RSSBytes: b.Sum("process_resident_memory_bytes", nil),
		Read:     per("nacre_ost_read_bytes_total", nil),
		Written:  per("nacre_ost_write_bytes_total", nil),
		NetIn:    per("nacre_net_received_bytes_total", nil),
		NetOut:   per("nacre_net_sent_bytes_total", nil),
		InFlight: b.Sum("nacre_rpc_inflight", nil),
	}
	if s, ok := opSeries[kind]; ok {
		for _, op := range b.LabelValues(s, "op") {
			v := per(s, map[string]string{"op": op})
			r.Ops += v
			if v > 0 {
				r.TopOps = append(r.TopOps, OpRate{op, v})
			}
		}
		r.Ops = round(r.Ops, 1)
		sort.Slice(r.TopOps, func(i, j int) bool { return r.TopOps[i].Rate > r.TopOps[j].Rate })
		if len(r.TopOps) > 3 {
			r.TopOps = r.TopOps[:3]
		}
	}
	return r
}

// checks are the checker's components on a target whose metrics page b
// shows them (MDTs), with their scan rate since a (nil: none yet). A
// component that never ran there is left out.
func checks(target string, a, b *obs.Scrape) []Check {
	var out []Check
	for _, comp := range b.LabelValues("nacre_lfsck_running", "component") {
		m := map[string]string{"component": comp}
		ch := Check{Target: target, Component: comp, Running: b.Sum("nacre_lfsck_running", m) == 1,
			Phase: int(b.Sum("nacre_lfsck_phase", m)), Position: b.Sum("nacre_lfsck_position", m),
			Checked: b.Sum("nacre_lfsck_checked_total", m), Inconsistent: b.Sum("nacre_lfsck_inconsistent_total", m),
			Repaired: b.Sum("nacre_lfsck_repaired_total", m), Failed: b.Sum("nacre_lfsck_failed_total", m)}
		if a != nil {
			if dt := b.At.Sub(a.At).Seconds(); dt > 0 {
				ch.CheckedPerSec = round(math.Max(ch.Checked-a.Sum("nacre_lfsck_checked_total", m), 0)/dt, 1)
			}
		}
		if ch.Running || ch.Checked > 0 {
			out = append(out, ch)
		}
	}
	return out
}

func round(v float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(v*p) / p
}
