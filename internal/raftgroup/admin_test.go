package raftgroup

import (
	"context"
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

// TestGroupErrKeepsCodesAndMakesTheRestUnavailable: what a group's call
// fails with reaches the service's caller with its code if it has one (a
// context error, a coded refusal), else as Unavailable naming the group.
func TestGroupErrKeepsCodesAndMakesTheRestUnavailable(t *testing.T) {
	for _, c := range []struct {
		err  error
		code errno.Code
	}{
		{fmt.Errorf("read index: %w", context.DeadlineExceeded), errno.DeadlineExceeded},
		{context.Canceled, errno.Canceled},
		{errno.New(errno.InvalidArgument, "bad"), errno.InvalidArgument},
		{ErrStopped, errno.Unavailable},
		{ErrProposalDropped, errno.Unavailable},
	} {
		got := GroupErr("MGS", c.err)
		if errno.CodeOf(got) != c.code {
			t.Errorf("GroupErr(%v) = %v, code %v; want %v", c.err, got, errno.CodeOf(got), c.code)
		}
		if c.code == errno.Unavailable && !strings.HasPrefix(got.Error(), "MGS: ") {
			t.Errorf("GroupErr(%v) = %q does not name the group", c.err, got)
		}
	}
	if GroupErr("MGS", nil) != nil {
		t.Error("GroupErr(nil) is an error")
	}
}
