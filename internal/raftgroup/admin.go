package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"nacre/api/nacregrpc"
	"nacre/api/nacrepb"
)

// The RaftAdmin service (api/raftgroup.proto) over the groups registered
// with a GRPCTransport, and the one spelling of "not the leader" that
// servers send and clients parse to follow a redirect.

// NotLeaderStatus turns err into a gRPC status: a NotLeaderError becomes
// Unavailable with the leader hint ("not the leader (leader is replica N
// at ADDR)", N = 0 when none is known), ErrStopped and ErrProposalDropped
// become Unavailable, context errors keep their codes. who prefixes the
// message (e.g. "MDT0000").
func NotLeaderStatus(who string, err error) error {
	var nl *NotLeaderError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &nl):
		return status.Errorf(codes.Unavailable, "%s: %s", who, NotLeaderText(nl.Leader, nl.Addr))
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return status.FromContextError(err).Err()
	case status.Code(err) != codes.Unknown:
		return err
	default:
		return status.Errorf(codes.Unavailable, "%s: %v", who, err)
	}
}

var leaderHint = regexp.MustCompile(`not the leader \((?:leader is replica (\d+) at ([^ )]*)|no leader)`)

// NotLeaderText is how a replica that does not lead says so, with the
// leader it knows (0: none) for clients to follow (LeaderHint reads it).
func NotLeaderText(leader uint64, addr string) string {
	if leader == 0 {
		return "not the leader (no leader: an election is under way, or too few replicas are up for one)"
	}
	return fmt.Sprintf("not the leader (leader is replica %d at %s)", leader, addr)
}

// LeaderHint reads the hint of a "not the leader" error (as
// NotLeaderStatus writes it, possibly wrapped): ok is false for any other
// error; id is 0 and addr empty when the replica knew no leader.
func LeaderHint(err error) (id uint64, addr string, ok bool) {
	if err == nil {
		return 0, "", false
	}
	msg := err.Error()
	if s, isStatus := status.FromError(err); isStatus {
		msg = s.Message()
	}
	m := leaderHint.FindStringSubmatch(msg)
	if m == nil {
		return 0, "", false
	}
	if m[1] == "" {
		return 0, "", true
	}
	id, _ = strconv.ParseUint(m[1], 10, 64)
	return id, m[2], true
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
			return nil, status.Errorf(codes.InvalidArgument, "this process hosts %d raft groups: name one", len(a.t.groups))
		}
		for gid := range a.t.groups {
			id = gid
		}
	}
	ge := a.t.groups[id]
	if ge == nil {
		return nil, status.Errorf(codes.NotFound, "raft group %d is not hosted here", id)
	}
	h, ok := ge.h.(handler)
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "raft group %d has no admin interface", id)
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
		return nil, status.Error(codes.InvalidArgument, "add replica: need its id and address")
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
		return nil, status.Errorf(codes.FailedPrecondition, "replica %d is the group's only voter; add another replica first", r.Id)
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
		code := codes.FailedPrecondition
		switch {
		case errors.Is(err, ErrAlreadyMember):
			code = codes.AlreadyExists
		case errors.Is(err, ErrNotMember):
			code = codes.NotFound
		}
		return status.Error(code, me.Error())
	}
	if errors.Is(err, ErrMembershipBusy) {
		return status.Errorf(codes.Aborted, "%s: %v", who(g), err)
	}
	if errors.Is(err, ErrTransferFailed) {
		return status.Errorf(codes.DeadlineExceeded, "%s: %v", who(g), err)
	}
	return NotLeaderStatus(who(g), err)
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
	return status.Errorf(codes.FailedPrecondition,
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
