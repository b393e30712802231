package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/cgroup"
	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/layout"
	"nacre/internal/pki"
	"nacre/internal/target/proc"
	"nacre/internal/webui"
)

// TargetStatus is one row of `nacre status --json`.
type TargetStatus struct {
	Name     string `json:"name"`
	Kind     string `json:"kind"`
	Index    uint32 `json:"index"`
	Addr     string `json:"addr"`
	DataAddr string `json:"data_addr,omitempty"`
	State    string `json:"state"`
	// NotHeardYet: the MGS has not heard from the target since it began
	// to lead (a restart, a failover); "up" is its grace of a few seconds,
	// not a heartbeat.
	NotHeardYet bool    `json:"not_heard_yet,omitempty"`
	LastHeard   string  `json:"last_heard,omitempty"`
	AgeSeconds  float64 `json:"last_heard_seconds_ago"`
	BytesTotal  uint64  `json:"bytes_total"`
	BytesUsed   uint64  `json:"bytes_used"`
	BytesAvail  uint64  `json:"bytes_avail"`
	InodesTotal uint64  `json:"inodes_total"`
	InodesUsed  uint64  `json:"inodes_used"`
	Pid         int64   `json:"pid,omitempty"`
	PidAlive    *bool   `json:"pid_alive,omitempty"` // see local: absent for a target of another machine
	Host        string  `json:"host,omitempty"`
	MetricsURL  string  `json:"metrics_url,omitempty"`
	Leader      bool    `json:"leader"`
	ReplicaID   uint64  `json:"replica_id,omitempty"`
	// Role is a replica's role in its group as it last said: "voter",
	// "learner" or "not a member".
	Role string `json:"role,omitempty"`
	Dir  string `json:"dir,omitempty"`
	// Security is how the target's links are made: "tls"; "insecure",
	// without TLS on an address other than loopback (nacre serve
	// --insecure); absent, without TLS on loopback.
	Security string `json:"security,omitempty"`
	// Recovering says what an MDT recovering after a power cut has
	// gathered from its clients and when it serves again (absent: it is
	// not recovering).
	Recovering string `json:"recovering,omitempty"`
	// CPUBudget is the CPU quota of a local target's live process, in
	// cores, and Cgroup the cgroup that sets it (absent: none; `nacre up
	// --node-cpu`); CPUSeconds is the CPU (user and system) the process
	// has used since it started (absent for a target of another machine
	// or a dead one).
	CPUBudget  float64  `json:"cpu_budget_cores,omitempty"`
	Cgroup     string   `json:"cgroup,omitempty"`
	CPUSeconds *float64 `json:"cpu_seconds,omitempty"`
}

// ClusterStatus is `nacre status --json`.
type ClusterStatus struct {
	Fsname  string         `json:"fsname"`
	MGS     string         `json:"mgs"`
	Targets []TargetStatus `json:"targets"`
	// NoLeader names the replicated targets none of whose replicas leads
	// ("nacre-MDT0000: no leader (2 of 3 replicas down)").
	NoLeader []string `json:"no_leader,omitempty"`
	// WebURL is the MGS's live page of the cluster (internal/webui), on
	// the metrics listener of the MGS (of its leading replica when it is
	// replicated). It is absent, and WebUnserved says why, when that
	// listener is not on a loopback address: the page is served there
	// only.
	WebURL      string `json:"web_url,omitempty"`
	WebUnserved string `json:"web_unserved,omitempty"`
}

// local reports whether a target runs on this machine, so that its pid
// means a process here: the host name it registered with is this one's.
// For such a target GetStatus sets PidAlive
// (is the recorded pid a running target process?) and, when it is not,
// the state to "down" at once, without waiting for the MGS to miss the
// target's heartbeats; the pid is kept.
func local(ts TargetStatus, host string) bool {
	// A directory that is gone (moved away, its device not mounted) is
	// still this machine's: whether its process runs is told by the
	// process (proc.Serves), not by the MGS, which shows a target it
	// knows as up for a while after the MGS starts.
	return ts.Pid > 0 && ts.Host != "" && ts.Host == host
}

// targetAlive reports whether pid is a running target process: it
// exists, is not a zombie, and runs `serve --dir` of the target's directory
// when the MGS knows it, or at least `serve` (a pid reused by another
// program, or by another target after a reboot, is not the target).
func targetAlive(pid int, dir string) bool {
	if dir != "" {
		return proc.Serves(pid, dir)
	}
	if pid <= 0 || !proc.Running(pid) {
		return false
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		return slices.Contains(strings.Split(string(b), "\x00"), "serve")
	}
	return true
}

// GetStatus asks the MGS for every target (no client connections to the
// targets, so it works while they are down).
func GetStatus(ctx context.Context, mgs string, creds *pki.Creds) (*ClusterStatus, error) {
	if mgs == "" {
		return nil, fmt.Errorf("no MGS address: pass --mgs HOST:PORT, --dir CLUSTER_DIR, or set NACRE_MGS")
	}
	if err := client.CheckMGSAddr(mgs); err != nil {
		return nil, err
	}
	cc, err := Dial(mgs, creds)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cfg, err := nacregrpc.NewMGSClient(cc).GetConfig(ctx, &pb.GetConfigRequest{})
	if errno.CodeOf(err) == errno.Unimplemented {
		return nil, client.NotAnMGS(mgs, err)
	}
	// An MGS that refuses this client (another protocol version) answers:
	// "does not answer (is the cluster up?)" would send the admin after a
	// cluster that runs.
	if errno.CodeOf(err) == errno.FailedPrecondition {
		return nil, fmt.Errorf("MGS at %s refused this client: %w", mgs, err)
	}
	if err != nil {
		if why := mgsWithoutLeader(mgs, creds); why != "" {
			return nil, fmt.Errorf("the MGS answers no request: %s (%w)", why, err)
		}
		return nil, client.Unreachable("MGS at "+mgs+" does not answer", err, "is the cluster up?")
	}
	st := &ClusterStatus{Fsname: cfg.Fsname, MGS: mgs}
	now := time.Unix(0, cfg.NowNs)
	host, _ := os.Hostname()
	cpu, _ := cgroup.Find(cgroup.Options{}) // nil: no budgets to read
	st.WebURL, st.WebUnserved = webURL(cfg.Targets)
	for _, t := range cfg.Targets {
		ts := TargetStatus{Name: webui.GroupName(cfg.Fsname, t), Kind: webui.KindName(t.Kind), Index: t.Index, Addr: t.Addr, DataAddr: t.DataAddr,
			State: t.State, Pid: t.Pid, Host: t.Host, Leader: t.Leader || (t.Kind == pb.TargetKind_TARGET_MGS && t.ReplicaId == 0), ReplicaID: t.ReplicaId, Dir: t.Dir, Role: t.Role, Security: t.Security, Recovering: t.Recovering}
		ts.NotHeardYet = t.Unheard
		if t.LastHeardNs != 0 && !t.Unheard {
			lh := time.Unix(0, t.LastHeardNs)
			ts.LastHeard = lh.Format(time.RFC3339)
			ts.AgeSeconds = now.Sub(lh).Seconds()
		}
		if t.MetricsAddr != "" {
			ts.MetricsURL = "http://" + t.MetricsAddr + "/metrics"
		}
		if local(ts, host) {
			alive := targetAlive(int(ts.Pid), ts.Dir)
			ts.PidAlive = &alive
			if !alive {
				// The MGS notices only after missing heartbeats.
				ts.State = "down"
			} else {
				readCPU(&ts, cpu)
			}
		}
		if ts.State == "down" {
			// A dead replica leads nothing, whatever the MGS last heard
			// from it; its group elects another within seconds.
			ts.Leader = false
		}
		if s := t.Statfs; s != nil {
			ts.BytesTotal, ts.BytesAvail = s.BytesTotal, s.BytesAvail
			ts.BytesUsed = s.BytesTotal - s.BytesFree
			ts.InodesTotal, ts.InodesUsed = s.InodesTotal, s.InodesTotal-s.InodesFree
		}
		st.Targets = append(st.Targets, ts)
	}
	sort.SliceStable(st.Targets, func(i, j int) bool {
		a, b := st.Targets[i], st.Targets[j]
		if a.Kind != b.Kind {
			return order(a.Kind) < order(b.Kind)
		}
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		return a.ReplicaID < b.ReplicaID
	})
	for _, g := range leaderless(st.Targets) {
		st.NoLeader = append(st.NoLeader, g.name+": "+g.state())
	}
	return st, nil
}

// webURL is the address of the MGS's web page, or why it has none: on
// the replica that leads, else one that is up (each serves the page).
func webURL(targets []*pb.TargetInfo) (url, unserved string) {
	var pick *pb.TargetInfo
	for _, t := range targets {
		if t.Kind != pb.TargetKind_TARGET_MGS {
			continue
		}
		if pick == nil || (t.Leader && t.State == "up") || (t.State == "up" && pick.State != "up") {
			pick = t
		}
	}
	if pick == nil {
		return "", "the MGS is not among the targets it lists"
	}
	u, err := webui.URL(pick.MetricsAddr)
	if err != nil {
		return "", err.Error()
	}
	return u, ""
}

// readCPU fills in the CPU budget of a local target's live process
// from its cgroup in h (nil: none), and the CPU it has used.
func readCPU(ts *TargetStatus, h *cgroup.Hierarchy) {
	pid := int(ts.Pid)
	if used, err := cgroup.ProcessCPU(pid); err == nil {
		secs := used.Seconds()
		ts.CPUSeconds = &secs
	}
	if h == nil {
		return
	}
	if g, err := h.GroupOf(pid); err == nil {
		if cores, err := g.Budget(); err == nil && cores > 0 {
			ts.CPUBudget, ts.Cgroup = cores, g.Dir
		}
	}
}

func order(k string) int {
	switch k {
	case "mgs":
		return 0
	case "mdt":
		return 1
	}
	return 2
}

// Status prints the cluster's targets; web, the address of its web page
// alone.
func Status(ctx context.Context, e Env, asJSON, web bool) error {
	st, err := GetStatus(ctx, e.MGS, e.TLS)
	if err != nil {
		return err
	}
	if web {
		return printWebURL(e, st, asJSON)
	}
	if asJSON {
		return JSON(e.Out, st)
	}
	fmt.Fprintf(e.Out, "file system %q, MGS %s\n", st.Fsname, st.MGS)
	t := newTable(e.Out)
	t.AppendHeader([]any{"TARGET", "ADDRESS", "STATE", "LAST HEARD", "SPACE USED", "INODES USED", "PID", "CPU USED", "CPU BUDGET", "METRICS"})
	for _, ts := range st.Targets {
		state := ts.State
		dead := ts.PidAlive != nil && !*ts.PidAlive
		switch {
		case ts.Leader && (ts.Kind == "mdt" || ts.ReplicaID != 0) && !dead:
			state += " (leader)"
		case ts.Role == "learner" || ts.Role == "not a member":
			state += " (" + ts.Role + ")"
		}
		if ts.Recovering != "" {
			state += " (recovering)"
		}
		name := ts.Name
		if ts.ReplicaID != 0 {
			name += fmt.Sprintf(" r%d", ts.ReplicaID) // a replica of a Raft group
		}
		heard := "-"
		switch {
		case ts.NotHeardYet && ts.State == "up":
			heard = "not yet"
			state = "up?" // the MGS's grace after it started leading
		case ts.LastHeard != "":
			heard = fmt.Sprintf("%.1fs ago", ts.AgeSeconds)
		}
		space, inodes := "-", "-"
		if ts.BytesTotal > 0 {
			space = fmt.Sprintf("%s / %s", layout.FormatSize(ts.BytesUsed), layout.FormatSize(ts.BytesTotal))
		}
		if ts.InodesTotal > 0 {
			inodes = fmt.Sprintf("%d / %d", ts.InodesUsed, ts.InodesTotal)
		}
		addr := ts.Addr
		if ts.DataAddr != "" {
			addr += " data " + ts.DataAddr
		}
		pid := "-"
		if ts.Pid != 0 {
			pid = fmt.Sprint(ts.Pid)
			if dead {
				pid += " (dead)"
			}
		}
		used, budget := "-", "-"
		if ts.CPUSeconds != nil {
			used = fmt.Sprintf("%.2fs", *ts.CPUSeconds)
		}
		if ts.CPUBudget > 0 {
			budget = strconv.FormatFloat(ts.CPUBudget, 'f', -1, 64) + " core"
		}
		t.AppendRow([]any{name, addr, state, heard, space, inodes, pid, used, budget, ts.MetricsURL})
	}
	t.Render()
	for _, ts := range st.Targets {
		if ts.Recovering != "" {
			fmt.Fprintf(e.Out, "%s is recovering after a restart that lost its log's unsynced tail: clients give back the changes they kept (%s); it answers nothing until then\n", ts.Name, ts.Recovering)
		}
		if ts.Security == "insecure" {
			fmt.Fprintf(e.Out, "warning: %s serves without TLS on %s (nacre serve --insecure): any process that reaches it can claim any user and use the admin services\n", ts.Name, ts.Addr)
		}
	}
	for _, g := range leaderless(st.Targets) {
		if g.quorum() {
			// Right after its leader died: the others elect one.
			fmt.Fprintf(e.Out, "%s: %s: a majority of its replicas runs, so it elects a leader within seconds; look again\n", g.name, g.state())
			continue
		}
		fmt.Fprintf(e.Out, "%s: %s: it answers nothing until a majority of its replicas runs (start them: nacre up, or nacre serve on their machines)\n",
			g.name, g.state())
	}
	return nil
}

// WebJSON is `nacre status --web --json`.
type WebJSON struct {
	WebURL string `json:"web_url"`
}

// printWebURL prints the page's address, a line a script can take whole;
// an MGS that does not serve the page is an error that says why.
func printWebURL(e Env, st *ClusterStatus, asJSON bool) error {
	if st.WebURL == "" {
		return fmt.Errorf("no web page: %s", st.WebUnserved)
	}
	if asJSON {
		return JSON(e.Out, WebJSON{WebURL: st.WebURL})
	}
	_, err := fmt.Fprintln(e.Out, st.WebURL)
	return err
}

// leaderlessGroup is a replicated target none of whose replicas leads:
// it answers nothing until a majority of them runs again.
type leaderlessGroup struct {
	name, kind     string
	replicas, down int
}

// quorum reports whether a majority of the replicas runs (an election is
// under way).
func (g leaderlessGroup) quorum() bool { return 2*(g.replicas-g.down) > g.replicas }

func (g leaderlessGroup) state() string {
	return fmt.Sprintf("no leader (%d of %d replicas down)", g.down, g.replicas)
}

// leaderless lists the replicated targets (not the MGS) that have no
// leader.
func leaderless(targets []TargetStatus) []leaderlessGroup {
	type key struct {
		kind  string
		index uint32
	}
	groups := map[key]*leaderlessGroup{}
	led := map[key]bool{}
	var order []key
	for _, ts := range targets {
		if ts.ReplicaID == 0 || ts.Kind == "mgs" || ts.Role == "learner" || ts.Role == "not a member" {
			continue // learners and leftovers have no vote: they make no quorum
		}
		k := key{ts.Kind, ts.Index}
		g := groups[k]
		if g == nil {
			g = &leaderlessGroup{name: ts.Name, kind: ts.Kind}
			groups[k] = g
			order = append(order, k)
		}
		g.replicas++
		dead := ts.PidAlive != nil && !*ts.PidAlive
		if ts.State != "up" || dead {
			g.down++
		} else if ts.Leader {
			led[k] = true
		}
	}
	var out []leaderlessGroup
	for _, k := range order {
		if !led[k] {
			out = append(out, *groups[k])
		}
	}
	return out
}

// mgsWithoutLeader tells, for an MGS that did not answer a request, if
// its replicas run but have no leader: a replicated MGS whose majority is
// down answers nothing, which "does not answer (is the cluster up?)" hid
// ("" if no replica answers, or one leads).
func mgsWithoutLeader(mgs string, creds *pki.Creds) string {
	addrs := strings.Split(mgs, ",")
	up, voters := 0, 0
	for _, a := range addrs {
		m, err := membersOf(context.Background(), strings.TrimSpace(a), creds)
		if err != nil {
			continue
		}
		if m.Leader != 0 {
			return ""
		}
		up++
		n := 0
		for _, mm := range m.Members {
			if mm.Role == "voter" {
				n++
			}
		}
		voters = max(voters, n)
	}
	if up == 0 {
		return ""
	}
	if voters == 0 {
		voters = len(addrs)
	}
	return fmt.Sprintf("its replicas have no leader (%d of %d answer; a leader needs a majority: start the others)", up, voters)
}
