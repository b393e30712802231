package mds

import (
	"context"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/raftgroup"
)

// Fault points of the reply path, for the tests of exactly-once
// (test/itest/exactlyonce_*_test.go). The first two are hit in Mutate
// after the command committed and the state machine applied it, before
// the client has its answer, which is where a lost reply or a failover
// makes a client retry a request that was already executed; the third
// where Mutate answers a retry from the reply cache.
const (
	// FaultReplyStepDown: when it fires (any action but delay and crash,
	// which act as usual), the leader hands its leadership to another
	// replica and waits until that one leads, then goes on answering.
	// Armed with FaultReplyDrop, the client's retry lands on the new
	// leader.
	FaultReplyStepDown = "mds.reply.stepdown"
	// FaultReplyDrop: when it fires as an error, the reply is dropped:
	// the client gets Unavailable (or, from a replica that no longer
	// leads, the redirect to the new leader), as after a connection lost
	// at that point, and retries with the same request id. crash kills
	// the server before it answers; delay holds the reply back. The
	// dropped reply is logged ("fault point: reply dropped", with its
	// index, time and object), so that a test can compare it with the
	// answer the retry got.
	FaultReplyDrop = "mds.reply.drop"
	// FaultReplyPrecheckSkip: when it fires as an error, Mutate does not
	// look the request up in the reply cache before proposing it, as a
	// new leader that has not applied the request's entry yet: the
	// command goes into the log a second time and apply must answer it
	// from the reply cache.
	FaultReplyPrecheckSkip = "mds.reply.precheck.skip"
)

// replyFaults runs the reply path's fault points for a mutation whose
// command was applied with reply r.
func (s *Server) replyFaults(ctx context.Context, op string, cmd *pb.Command, r *pb.Reply) error {
	if fault.Hit(FaultReplyStepDown) != nil {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := s.group.TransferLeadership(tctx, 0)
		cancel()
		s.log.Warn("fault point: leadership handed over before replying", "point", FaultReplyStepDown, "op", op,
			"client", cmd.ClientId, "request", cmd.RequestId, "leader", s.group.Leader(), "err", err)
	}
	if err := fault.Hit(FaultReplyDrop); err != nil {
		args := []any{"point", FaultReplyDrop, "op", op, "client", cmd.ClientId, "request", cmd.RequestId,
			"index", r.Index, "time_ns", r.TimeNs, "errno", r.Errno}
		if ino := r.Inode; ino != nil {
			args = append(args, "fid", fid.FromPB(ino.Fid).String(), "mode", ino.Mode, "nlink", ino.Nlink, "ctime_ns", ino.CtimeNs)
		}
		s.log.Warn("fault point: reply dropped", args...)
		if !s.group.IsLeader() {
			return s.groupErr(&raftgroup.NotLeaderError{Leader: s.group.Leader()})
		}
		return errno.Errorf(errno.Unavailable, "%s: reply to request %d of client %#x dropped: %v", s.id.Label(), cmd.RequestId, cmd.ClientId, err)
	}
	return nil
}
