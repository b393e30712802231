package cli

import (
	"strings"
	"testing"
)

// A replicated MDT whose replicas lead nowhere (two of three down) was
// missing from df, whose total said "up": it is a down row now, and
// status names it.
func TestDfAndStatusShowAnMDTWithoutLeader(t *testing.T) {
	rep := func(id uint64, state string, leader bool) TargetStatus {
		return TargetStatus{Name: "nacre-MDT0000", Kind: "mdt", Index: 0, ReplicaID: id, State: state, Leader: leader}
	}
	ost := TargetStatus{Name: "nacre-OST0000", Kind: "ost", State: "up", BytesTotal: 100, BytesAvail: 60, BytesUsed: 40}
	stuck := []TargetStatus{rep(1, "up", false), rep(2, "down", false), rep(3, "down", true), ost}
	df := dfTable("nacre", stuck)
	var row *DfRow
	for i := range df.Targets {
		if df.Targets[i].Name == "nacre-MDT0000" {
			if row != nil {
				t.Fatalf("MDT0000 listed twice: %+v", df.Targets)
			}
			row = &df.Targets[i]
		}
	}
	if row == nil || row.State != "no leader (2 of 3 replicas down)" {
		t.Fatalf("df rows %+v: want MDT0000 as no leader (2 of 3 replicas down)", df.Targets)
	}
	if df.Total.State != "1 down" || df.Total.BytesTotal != 100 {
		t.Errorf("df total %+v: want 1 down and the OST's bytes", df.Total)
	}
	if g := leaderless(stuck); len(g) != 1 || !strings.Contains(g[0].state(), "2 of 3") || g[0].quorum() {
		t.Errorf("leaderless: %+v", g)
	}
	// Right after a leader died: two of three run, an election is due.
	electing := []TargetStatus{rep(1, "up", false), rep(2, "down", false), rep(3, "up", false), ost}
	if g := leaderless(electing); len(g) != 1 || !g[0].quorum() {
		t.Errorf("a group whose majority runs: %+v, want it leaderless with a quorum", g)
	}
	led := []TargetStatus{rep(1, "up", false), rep(2, "down", false), rep(3, "up", true), ost}
	if g := leaderless(led); len(g) != 0 {
		t.Errorf("a group with a leader counted as leaderless: %+v", g)
	}
	if df := dfTable("nacre", led); df.Total.State != "up" || len(df.Targets) != 2 {
		t.Errorf("df with a leader: %+v", df)
	}
	// A learner and a leftover replica (no member) make no quorum: not
	// counted among the group's replicas ("4 of 5 down" for 2 of 3).
	learner, leftover := rep(4, "up", false), rep(5, "down", false)
	learner.Role, leftover.Role = "learner", "not a member"
	if g := leaderless(append(stuck, learner, leftover)); len(g) != 1 || g[0].state() != "no leader (2 of 3 replicas down)" {
		t.Errorf("leaderless with a learner and a leftover: %+v", g)
	}
}
