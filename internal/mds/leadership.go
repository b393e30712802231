package mds

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/raftgroup"
)

// Reads and leadership in a replicated MDT.
//
// Every replica serves reads from its applied state after a linearizable
// barrier (raftgroup.Group.Read): the leader under its lease, with no
// network round, or with a ReadIndex heartbeat round when the lease is
// not valid; a follower asks the leader for its commit index (ReadIndex)
// and waits until it has applied that far. So a read on any replica sees
// every write acknowledged before it began (tested with porcupine in
// test/itest).
//
// A replica that cannot complete the barrier soon - it knows no leader,
// or it is cut off from the others - answers Unavailable with the leader
// hint, and the client tries another replica (internal/client,
// replicas.go) instead of waiting.

func (s *Server) linearRead(ctx context.Context) error {
	g := s.group
	if !g.IsLeader() && g.Leader() == 0 {
		return s.groupErr(raftgroup.NotLeaderError{})
	}
	rctx, cancel := context.WithTimeout(ctx, s.opts.readTimeout())
	defer cancel()
	err := g.Read(rctx)
	if err == nil {
		return nil
	}
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		// Cut off, or the leader is gone: let the client try elsewhere.
		if g.IsLeader() {
			return errno.Errorf(errno.Unavailable, "%s: leader cannot confirm its leadership (cut off from the other replicas?)", s.id.Label())
		}
		return s.groupErr(raftgroup.NotLeaderError{Leader: g.Leader(), Addr: g.LeaderAddr()})
	}
	return s.groupErr(err)
}

// leaderOnlyLDLM refuses client sessions on a replica that does not lead
// (with the leader hint): locks and open files live in the leader's
// memory, so every mounted client must hold its session there. A client
// whose session is refused, or ends with the process, reconnects to the
// leader (internal/client, session.go).
type leaderOnlyLDLM struct {
	nacregrpc.LDLMServer
	s *Server
}

func (l leaderOnlyLDLM) Session(st grpc.BidiStreamingServer[pb.SessionUp, pb.SessionDown]) error {
	g := l.s.group
	if !g.Replicated() {
		return l.LDLMServer.Session(st)
	}
	notLeader := func() error { return l.s.groupErr(raftgroup.NotLeaderError{Leader: g.Leader(), Addr: g.LeaderAddr()}) }
	if !g.IsLeader() {
		return notLeader()
	}
	// End the session when this replica stops leading (cut off, or
	// leadership handed over), so that the client moves it to the new
	// leader: returning ends the stream, and the session's goroutine then
	// fails its next receive and cleans up.
	done := make(chan error, 1)
	go func() { done <- l.LDLMServer.Session(st) }()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-t.C:
			if !g.IsLeader() {
				return notLeader()
			}
		}
	}
}
