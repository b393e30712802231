package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	"nacre/api/nacrepb"
	"nacre/internal/errno"
)

// The RaftAdmin service (api/services.proto) over the groups registered
// with a GRPCTransport, and the one place that turns "not the leader" into
// the typed refusal clients follow (errno.NotLeader).

// GroupErr turns a group's error into what a service answers: a
// NotLeaderError becomes errno.NotLeader with the leader it names (who
// names the group, e.g. "MDT0000"), ErrStopped and ErrProposalDropped
// become Unavailable, and errors that have a code (errno.CodeOf: context
// errors too) keep it.
func GroupErr(who string, err error) error {
	var nl *NotLeaderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nl):
		return errno.NotLeader(who, nl.Leader, nl.Addr)
	case errno.CodeOf(err) != errno.Unknown:
		return err
	default:
		return errno.Errorf(errno.Unavailable, "%s: %v", who, err)
	}
}

// adminService implements nacregrpc.RaftAdminServer for the groups of t.
type adminService struct {
	nacregrpc.UnimplementedRaftAdminServer
	t *GRPCTransport
}

func (a adminService) group(id uint64) (*Group, error) {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	if id == 0 {
		if len(a.t.groups) != 1 {
			return nil, errno.Errorf(errno.InvalidArgument, "this process hosts %d raft groups: name one", len(a.t.groups))
		}
		for gid := range a.t.groups {
			id = gid
		}
	}
	ge := a.t.groups[id]
	if ge == nil {
		return nil, errno.Errorf(errno.NotFound, "raft group %d is not hosted here", id)
	}
	h, ok := ge.h.(handler)
	if !ok {
		return nil, errno.Errorf(errno.Unimplemented, "raft group %d has no admin interface", id)
	}
	return h.g, nil
}

// who names a replica in messages: "MDT0000 replica 2", "MGS replica 1".
func who(g *Group) string { return fmt.Sprintf("%s replica %d", g.name(), g.id) }

// Members implements RaftAdmin.
func (a adminService) Members(ctx context.Context, r *nacrepb.RaftMembersRequest) (*nacrepb.RaftMembersReply, error) {
	g, err := a.group(r.Group)
	if err != nil {
		return nil, err
	}
	return Members(g), nil
}

// Members describes g for the RaftAdmin service and `nacre replica list`.
func Members(g *Group) *nacrepb.RaftMembersReply {
	st := g.Status()
	out := &nacrepb.RaftMembersReply{
		Group: st.GroupID, Replica: st.ID, State: st.State, Leader: st.Leader, Term: st.Term,
		Commit: st.Commit, Applied: st.Applied, FirstIndex: st.FirstIndex, LastIndex: st.LastIndex,
		SnapshotsSent: st.Stats.SnapshotsSent, SnapshotsReceived: st.Stats.SnapshotsRecv, Lease: st.Lease,
		Fsname: g.cfg.Fsname, Name: g.name(),
	}
	add := func(id uint64, role string) {
		m := &nacrepb.RaftMember{Id: id, Addr: g.peerAddr(id), Role: role, Leader: id == st.Leader}
		if pr, ok := st.Progress[id]; ok {
			m.Match, m.Progress, m.Active = pr.Match, pr.State, pr.RecentActive || id == st.ID
		}
		out.Members = append(out.Members, m)
	}
	for _, id := range st.Voters {
		add(id, "voter")
	}
	for _, id := range st.Learners {
		add(id, "learner")
	}
	out.Removed = g.removedIDs()
	return out
}

// AddReplica implements RaftAdmin.
func (a adminService) AddReplica(ctx context.Context, r *nacrepb.RaftAddRequest) (*nacrepb.RaftMembersReply, error) {
	g, err := a.group(r.Group)
	if err != nil {
		return nil, err
	}
	if r.Id == 0 || r.Addr == "" {
		return nil, errno.New(errno.InvalidArgument, "add replica: need its id and address")
	}
	d := time.Duration(r.CatchUpTimeoutMs) * time.Millisecond
	if d <= 0 {
		d = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := g.AddReplica(ctx, r.Id, r.Addr, r.Learner); err != nil {
		return nil, adminErr(g, err)
	}
	return Members(g), nil
}

// RemoveReplica implements RaftAdmin.
func (a adminService) RemoveReplica(ctx context.Context, r *nacrepb.RaftRemoveRequest) (*nacrepb.RaftMembersReply, error) {
	g, err := a.group(r.Group)
	if err != nil {
		return nil, err
	}
	if err := g.checkLeader(); err != nil {
		return nil, adminErr(g, err)
	}
	st := g.Status()
	role := roleIn(st, r.Id)
	if role == "" {
		return nil, adminErr(g, g.notMember(st, r.Id))
	}
	if role == "voter" && len(st.Voters) == 1 {
		return nil, errno.Errorf(errno.FailedPrecondition, "replica %d is the group's only voter; add another replica first", r.Id)
	}
	if r.Id == g.id {
		// Hand over first: the new leader removes this replica, and the
		// caller follows the redirect.
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := g.TransferLeadership(tctx, 0)
		cancel()
		if err != nil {
			return nil, adminErr(g, err)
		}
		return nil, adminErr(g, g.notLeader())
	}
	if err := g.RemovePeer(ctx, r.Id); err != nil {
		return nil, adminErr(g, err)
	}
	return Members(g), nil
}

// TransferLeader implements RaftAdmin.
func (a adminService) TransferLeader(ctx context.Context, r *nacrepb.RaftTransferRequest) (*nacrepb.RaftMembersReply, error) {
	g, err := a.group(r.Group)
	if err != nil {
		return nil, err
	}
	if err := g.checkLeader(); err != nil {
		if g.Leader() == r.To && r.To != 0 {
			return Members(g), nil
		}
		return nil, adminErr(g, err)
	}
	if r.To == g.id {
		return Members(g), nil // it leads already
	}
	if r.To != 0 {
		// Raft ignores a transfer to a replica it does not know or to a
		// learner: refuse at once rather than time out.
		if err := g.checkMember(r.To, true); err != nil {
			return nil, adminErr(g, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := g.TransferLeadership(ctx, r.To); err != nil {
		return nil, adminErr(g, err)
	}
	return Members(g), nil
}

func adminErr(g *Group, err error) error {
	// Membership refusals name the group and the replica themselves.
	var me *memberError
	if errors.As(err, &me) {
		code := errno.FailedPrecondition
		switch {
		case errors.Is(err, ErrAlreadyMember):
			code = errno.AlreadyExists
		case errors.Is(err, ErrNotMember):
			code = errno.NotFound
		}
		return errno.New(code, me.Error())
	}
	if errors.Is(err, ErrMembershipBusy) {
		return errno.Errorf(errno.Aborted, "%s: %v", who(g), err)
	}
	if errors.Is(err, ErrTransferFailed) {
		return errno.Errorf(errno.DeadlineExceeded, "%s: %v", who(g), err)
	}
	return GroupErr(who(g), err)
}

// soloAdmin is the RaftAdmin service of a single-replica group, which has
// no transport to reach other replicas: Members describes it (so that
// `nacre replica list` shows its term and applied index), and membership
// changes are refused with the reason instead of "unknown service".
type soloAdmin struct {
	nacregrpc.UnimplementedRaftAdminServer
	g *Group
}

// RegisterSoloAdmin serves RaftAdmin on srv for g, a group formatted as a
// single replica. Call it before srv.Serve.
func RegisterSoloAdmin(srv *grpc.Server, g *Group) {
	nacregrpc.RegisterRaftAdminServer(srv, soloAdmin{g: g})
}

func (a soloAdmin) refuse(what string) error {
	return errno.Errorf(errno.FailedPrecondition,
		"%s: cannot %s: this target runs as a single replica (formatted without --peers), with no Raft transport to other replicas; "+
			"a replicated target is formatted with --replica-id and --peers on every replica, or started with nacre up --replicas 3",
		who(a.g), what)
}

// Members implements RaftAdmin.
func (a soloAdmin) Members(context.Context, *nacrepb.RaftMembersRequest) (*nacrepb.RaftMembersReply, error) {
	return Members(a.g), nil
}

// AddReplica implements RaftAdmin.
func (a soloAdmin) AddReplica(context.Context, *nacrepb.RaftAddRequest) (*nacrepb.RaftMembersReply, error) {
	return nil, a.refuse("add a replica")
}

// RemoveReplica implements RaftAdmin.
func (a soloAdmin) RemoveReplica(context.Context, *nacrepb.RaftRemoveRequest) (*nacrepb.RaftMembersReply, error) {
	return nil, a.refuse("remove a replica")
}

// TransferLeader implements RaftAdmin.
func (a soloAdmin) TransferLeader(context.Context, *nacrepb.RaftTransferRequest) (*nacrepb.RaftMembersReply, error) {
	return nil, a.refuse("hand over leadership")
}
