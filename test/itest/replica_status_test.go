package itest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"nacre/internal/cli"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// statusLeaders runs `nacre status --json` and returns the replicas of
// group (e.g. "mdt0") that it marks as leader, by directory name, with
// their pids.
func statusLeaders(t *testing.T, cl *testcluster.Cluster, kind string, index uint32) (map[string]int64, error) {
	t.Helper()
	out, err := cl.Run("status", "--json")
	if err != nil {
		return nil, fmt.Errorf("status --json: %v\n%s", err, out)
	}
	var st cli.ClusterStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return nil, fmt.Errorf("status --json: %v\n%s", err, out)
	}
	leaders := map[string]int64{}
	for _, ts := range st.Targets {
		if ts.Kind == kind && ts.Index == index && ts.Leader {
			leaders[filepath.Base(ts.Dir)] = ts.Pid
		}
	}
	return leaders, nil
}

// checkStatusAfterKill: right after replica dead of mdt0 was killed,
// status --json never marks it as the leader, and within a few seconds it
// marks exactly one live replica, with its pid.
func checkStatusAfterKill(t *testing.T, cl *testcluster.Cluster, dead string) {
	t.Helper()
	var leaders map[string]int64
	var err error
	// Until a leader is marked, none may be.
	wait.Poll(10*time.Second, func() bool {
		leaders, err = statusLeaders(t, cl, "mdt", 0)
		return err != nil || len(leaders) != 0
	})
	if err != nil {
		t.Error(err)
		return
	}
	if _, ok := leaders[dead]; ok {
		t.Errorf("status --json marks the killed replica %s as the leader of mdt0: %v", dead, leaders)
		return
	}
	if len(leaders) != 1 {
		t.Errorf("status --json marks %d leaders of mdt0 after %s was killed: %v", len(leaders), dead, leaders)
		return
	}
	for name, pid := range leaders {
		if pid <= 0 {
			t.Errorf("status --json marks %s as the leader without a pid", name)
		}
	}
}
