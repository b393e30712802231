package raftgroup

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"nacre/internal/errno"
)

// TestNotLeaderSaysWhenThereIsNoLeader: a replica that knows no leader
// says why there may be none, instead of "leader is replica 0 at " (which
// clients saw after 30 s without a quorum), and clients still read it as
// a not-the-leader refusal, with no leader, through any wrapping.
func TestNotLeaderSaysWhenThereIsNoLeader(t *testing.T) {
	for _, c := range []struct {
		leader uint64
		addr   string
	}{{2, "127.0.0.1:4000"}, {0, ""}} {
		err := GroupErr("MDT0000", &NotLeaderError{Leader: c.leader, Addr: c.addr})
		if c.leader == 0 && (strings.Contains(err.Error(), "replica 0") || !strings.Contains(err.Error(), "too few replicas are up")) {
			t.Errorf("no leader known: %v", err)
		}
		if errno.CodeOf(err) != errno.Unavailable || !errno.Retryable(err) {
			t.Errorf("%v: code %v, want a retryable Unavailable", err, errno.CodeOf(err))
		}
		l, ok := errno.LeaderOf(fmt.Errorf("wrapped: %w", err))
		if !ok || l.ID != c.leader || l.Addr != c.addr {
			t.Errorf("LeaderOf(%v) = %+v, %v; want %d, %q, true", err, l, ok, c.leader, c.addr)
		}
	}
	if _, ok := errno.LeaderOf(errno.New(errno.Unavailable, "not the leader (leader is replica 2 at x)")); ok {
		t.Error("LeaderOf an error that only says it in words: ok")
	}
	if _, ok := errno.LeaderOf(errors.New("connection refused")); ok {
		t.Error("LeaderOf another error: ok")
	}
}
