package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	pb "nacre/api/nacrepb"
)

// ReplicaRow is one row of `nacre replica list --json`.
type ReplicaRow struct {
	Target    string `json:"target"`
	Replica   uint64 `json:"replica"`
	Addr      string `json:"addr"`
	Role      string `json:"role"`  // voter | learner | (not a member)
	State     string `json:"state"` // leader | follower | ... | down
	Term      uint64 `json:"term,omitempty"`
	Applied   uint64 `json:"applied,omitempty"`
	Match     uint64 `json:"match,omitempty"` // the leader's view
	Progress  string `json:"progress,omitempty"`
	SnapsSent uint64 `json:"snapshots_sent,omitempty"`
	SnapsRecv uint64 `json:"snapshots_received,omitempty"`
	Pid       int64  `json:"pid,omitempty"`
	Lease     bool   `json:"lease,omitempty"`
}

// ReplicaList prints the replicas of the MGS and of every MDT (or of
// one group).
func ReplicaList(ctx context.Context, e Env, only string, asJSON bool) error {
	rows, err := ReplicaRows(ctx, e, only)
	if err != nil {
		return err
	}
	if asJSON {
		return JSON(e.Out, rows)
	}
	t := newTable(e.Out)
	t.AppendHeader([]any{"GROUP", "REPLICA", "ADDRESS", "ROLE", "STATE", "TERM", "APPLIED", "MATCH", "SNAPSHOTS (SENT/RECEIVED)", "PID"})
	for _, r := range rows {
		state := r.State
		if r.Lease {
			state += " (lease)"
		}
		match := "-"
		if r.Progress != "" {
			match = fmt.Sprintf("%d (%s)", r.Match, r.Progress)
		}
		pid := "-"
		if r.Pid != 0 {
			pid = fmt.Sprint(r.Pid)
		}
		t.AppendRow([]any{r.Target, r.Replica, r.Addr, r.Role, state, r.Term, r.Applied, match, fmt.Sprintf("%d/%d", r.SnapsSent, r.SnapsRecv), pid})
	}
	t.Render()
	return nil
}

// ReplicaRows lists the replicas of every group, or of group only.
func ReplicaRows(ctx context.Context, e Env, only string) ([]ReplicaRow, error) {
	if e.MGS == "" {
		return nil, fmt.Errorf("no MGS address: pass --mgs HOST:PORT, --dir CLUSTER_DIR, or set NACRE_MGS")
	}
	st, err := GetStatus(ctx, e.MGS, e.TLS)
	if err != nil {
		return nil, err
	}
	groups := []ReplicaGroup{{Name: "mgs", Kind: pb.TargetKind_TARGET_MGS}}
	seen := map[uint32]bool{}
	for _, t := range st.Targets {
		if t.Kind == "mdt" && !seen[t.Index] {
			seen[t.Index] = true
			groups = append(groups, ReplicaGroup{Name: fmt.Sprintf("mdt%d", t.Index), Kind: pb.TargetKind_TARGET_MDT, Index: t.Index})
		}
	}
	if only != "" {
		g, err := ParseGroup(only)
		if err != nil {
			return nil, err
		}
		groups = []ReplicaGroup{g}
	}
	var rows []ReplicaRow
	for _, g := range groups {
		addrs, pids, err := replicaAddrs(ctx, e.MGS, g, e.TLS)
		if err != nil {
			return nil, err
		}
		lv, _, _ := leaderView(ctx, addrs, e.TLS)
		ids := make([]uint64, 0, len(addrs))
		for id := range addrs {
			ids = append(ids, id)
		}
		if lv != nil {
			for _, m := range lv.Members {
				if _, ok := addrs[m.Id]; !ok {
					addrs[m.Id] = m.Addr
					ids = append(ids, m.Id)
				}
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			r := ReplicaRow{Target: strings.ToUpper(g.Name), Replica: id, Addr: addrs[id], Role: "(not a member)", State: "down", Pid: pids[id]}
			if lv != nil {
				for _, m := range lv.Members {
					if m.Id == id {
						r.Role, r.Match, r.Progress = m.Role, m.Match, m.Progress
					}
				}
			} else {
				r.Role = "unknown"
			}
			if m, err := membersOf(ctx, addrs[id], e.TLS); err == nil {
				r.State, r.Term, r.Applied, r.SnapsSent, r.SnapsRecv, r.Lease = m.State, m.Term, m.Applied, m.SnapshotsSent, m.SnapshotsReceived, m.Lease
				if lv == nil {
					// No leader to ask: the replica's own view of its role.
					r.Role = "(not a member)"
					for _, x := range m.Members {
						if x.Id == id {
							r.Role = x.Role
						}
					}
				}
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}
