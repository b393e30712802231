package raftgroup

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestNotLeaderTextSaysWhenThereIsNoLeader: a replica that knows no
// leader says why there may be none, instead of "leader is replica 0 at "
// (which clients saw after 30 s without a quorum), and clients still read
// it as a not-the-leader answer with no hint.
func TestNotLeaderTextSaysWhenThereIsNoLeader(t *testing.T) {
	for _, c := range []struct {
		leader uint64
		addr   string
	}{{2, "127.0.0.1:4000"}, {0, ""}} {
		err := NotLeaderStatus("MDT0000", &NotLeaderError{Leader: c.leader, Addr: c.addr})
		if c.leader == 0 && (strings.Contains(err.Error(), "replica 0") || !strings.Contains(err.Error(), "too few replicas are up")) {
			t.Errorf("no leader known: %v", err)
		}
		id, addr, ok := LeaderHint(fmt.Errorf("wrapped: %w", err))
		if !ok || id != c.leader || addr != c.addr {
			t.Errorf("LeaderHint(%v) = %d, %q, %v; want %d, %q, true", err, id, addr, ok, c.leader, c.addr)
		}
	}
	if _, _, ok := LeaderHint(errors.New("connection refused")); ok {
		t.Error("LeaderHint of another error: ok")
	}
}
