package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/pki"
)

// `nacre replica`: the replicas of the Raft groups (the MGS and each MDT),
// through each replica's RaftAdmin service (api/services.proto).

// ReplicaGroup names a group: "mgs" or "mdtN".
type ReplicaGroup struct {
	Name  string
	Kind  pb.TargetKind
	Index uint32
}

// ParseGroup reads "mgs", "mdt0", "MDT0000".
func ParseGroup(s string) (ReplicaGroup, error) {
	l := strings.ToLower(s)
	switch {
	case l == "mgs":
		return ReplicaGroup{Name: "mgs", Kind: pb.TargetKind_TARGET_MGS}, nil
	case strings.HasPrefix(l, "mdt"):
		var i uint32
		if _, err := fmt.Sscanf(l, "mdt%x", &i); err != nil {
			return ReplicaGroup{}, fmt.Errorf("--target %q: give mgs or mdtN", s)
		}
		if len(l) < 7 { // mdt0, mdt12: decimal
			fmt.Sscanf(l, "mdt%d", &i)
		}
		return ReplicaGroup{Name: fmt.Sprintf("mdt%d", i), Kind: pb.TargetKind_TARGET_MDT, Index: i}, nil
	}
	return ReplicaGroup{}, fmt.Errorf("--target %q: give mgs or mdtN", s)
}

// replicaAddrs lists the replicas the MGS knows of a group, with pids.
func replicaAddrs(ctx context.Context, mgs string, g ReplicaGroup, creds *pki.Creds) (map[uint64]string, map[uint64]int64, error) {
	cc, err := Dial(mgs, creds)
	if err != nil {
		return nil, nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg, err := nacregrpc.NewMGSClient(cc).GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil {
		return nil, nil, fmt.Errorf("MGS at %s: %w", mgs, err)
	}
	addrs, pids := map[uint64]string{}, map[uint64]int64{}
	for _, t := range cfg.Targets {
		if t.Kind != g.Kind || (g.Kind == pb.TargetKind_TARGET_MDT && t.Index != g.Index) {
			continue
		}
		rid := t.ReplicaId
		if rid == 0 {
			rid = 1 // an unreplicated target is replica 1 of its group
		}
		addrs[rid], pids[rid] = t.Addr, t.Pid
	}
	if g.Kind == pb.TargetKind_TARGET_MGS && len(addrs) == 0 {
		for i, a := range strings.Split(mgs, ",") {
			addrs[uint64(i+1)] = a
		}
	}
	if len(addrs) == 0 {
		return nil, nil, &noReplicaError{g.Name}
	}
	return addrs, pids, nil
}

func membersOf(ctx context.Context, addr string, creds *pki.Creds) (*pb.RaftMembersReply, error) {
	cc, err := Dial(addr, creds)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return nacregrpc.NewRaftAdminClient(cc).Members(ctx, &pb.RaftMembersRequest{})
}

// leaderView finds the group's leader and its view of the members.
func leaderView(ctx context.Context, addrs map[uint64]string, creds *pki.Creds) (*pb.RaftMembersReply, string, error) {
	var lastErr error
	var best *pb.RaftMembersReply
	bestAddr := ""
	for _, a := range addrs {
		m, err := membersOf(ctx, a, creds)
		if err != nil {
			lastErr = err
			continue
		}
		if m.State == "leader" && (best == nil || m.Term > best.Term) {
			best, bestAddr = m, a
		}
	}
	if best == nil {
		if lastErr == nil {
			lastErr = fmt.Errorf("no replica says it leads (an election may be under way)")
		}
		return nil, "", lastErr
	}
	return best, bestAddr, nil
}

// ReplicaChange is what `nacre replica add|remove|replace|transfer --json`
// prints: the change and the group's replicas after it (as replica list
// --json shows them).
type ReplicaChange struct {
	Action     string       `json:"action"`
	Target     string       `json:"target"`
	Replica    uint64       `json:"replica,omitempty"`     // added, removed, or replaced
	NewReplica uint64       `json:"new_replica,omitempty"` // replace: the replica that took its place
	Leader     uint64       `json:"leader,omitempty"`      // transfer: the replica that leads now
	Replicas   []ReplicaRow `json:"replicas"`
}

// PrintReplicaChange prints c as JSON, with the group's replicas as they
// are now.
func PrintReplicaChange(ctx context.Context, e Env, g ReplicaGroup, c ReplicaChange) error {
	rows, err := ReplicaRows(ctx, e, g.Name)
	if err != nil {
		return fmt.Errorf("%s done, but listing the replicas of %s failed: %w", c.Action, g.Name, err)
	}
	c.Target, c.Replicas = strings.ToUpper(g.Name), rows
	return JSON(e.Out, c)
}

// groupPeers returns the members of a group and their addresses (for a
// new replica's identity), the next unused replica id, and the ids the
// group removed.
func groupPeers(ctx context.Context, e Env, g ReplicaGroup) (peers map[uint64]string, next uint64, removed []uint64, err error) {
	addrs, _, err := replicaAddrs(ctx, e.MGS, g, e.TLS)
	if err != nil {
		return nil, 0, nil, err
	}
	lv, _, err := leaderView(ctx, addrs, e.TLS)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("%s: %w", g.Name, err)
	}
	peers = map[uint64]string{}
	next = 1
	for id := range addrs {
		next = max(next, id+1)
	}
	for _, m := range lv.Members {
		peers[m.Id] = m.Addr
		next = max(next, m.Id+1)
	}
	// Nor an id the group removed (a learner that never ran leaves no
	// directory or registration behind): the group refuses it for good.
	for _, id := range lv.Removed {
		next = max(next, id+1)
	}
	return peers, next, lv.Removed, nil
}

// onLeader runs an admin call on the group's leader, following redirects.
func onLeader(ctx context.Context, e Env, g ReplicaGroup, call func(ctx context.Context, c nacregrpc.RaftAdminClient) (*pb.RaftMembersReply, error)) (*pb.RaftMembersReply, error) {
	addrs, _, err := replicaAddrs(ctx, e.MGS, g, e.TLS)
	if err != nil {
		return nil, err
	}
	_, addr, err := leaderView(ctx, addrs, e.TLS)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.Name, err)
	}
	for hop := 0; hop < 5; hop++ {
		cc, err := Dial(addr, e.TLS)
		if err != nil {
			return nil, err
		}
		r, err := call(ctx, nacregrpc.NewRaftAdminClient(cc))
		cc.Close()
		if err == nil {
			return r, nil
		}
		if leader, ok := errno.LeaderOf(err); ok {
			hint := leader.Addr
			if hint == "" {
				time.Sleep(500 * time.Millisecond)
				if _, hint, err = leaderView(ctx, addrs, e.TLS); err != nil {
					return nil, err
				}
			}
			addr = hint
			continue
		}
		return nil, err
	}
	return nil, fmt.Errorf("%s: the leader keeps moving; try again", g.Name)
}

// refusal turns an error of a RaftAdmin call into the CLI's error. A
// refusal (the replica is already a member, there is no such replica,
// the target is a single replica...) carries a message written for
// operators that names the replica, the group and the way out: it is
// returned as it is, code and all. Other errors are prefixed with what
// was being done.
func refusal(err error, format string, args ...any) error {
	switch errno.CodeOf(err) {
	case errno.AlreadyExists, errno.NotFound, errno.FailedPrecondition:
		return err
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

func roleOf(r *pb.RaftMembersReply, id uint64) string {
	for _, m := range r.Members {
		if m.Id == id {
			return m.Role
		}
	}
	return "member"
}

// ReplicaHost is where the commands start and retire the processes of a
// group's replicas themselves (--dir: a local cluster directory,
// localcluster.ReplicaHost). Without one, the operator formats and starts
// a new replica on its machine, and stops a removed one.
type ReplicaHost interface {
	// Dir names the host in messages and in the commands they suggest
	// (--dir DIR).
	Dir() string
	// RetiredIDs are the ids of the replicas of group (mgs, mdtN)
	// retired here: their directories are kept aside.
	RetiredIDs(group string) []uint64
	// NewReplica formats replica id of group, to join the members
	// peers, and starts it; it returns its directory, address and pid.
	NewReplica(group string, id uint64, peers map[uint64]string) (dir, addr string, pid int, err error)
	// Retire stops replica id of group and moves its directory aside,
	// returning where to (an error satisfying errors.Is(err,
	// fs.ErrNotExist) if it has no directory here).
	Retire(group string, id uint64) (to string, err error)
	// SyncMGS records the MGS replicas as they are now in the host's
	// other targets and returns how many it changed.
	SyncMGS() (int, error)
}

// syncMGS records a changed MGS membership in the host's targets (the
// host owns their identities).
func syncMGS(e Env, g ReplicaGroup, host ReplicaHost) {
	if host == nil || g.Kind != pb.TargetKind_TARGET_MGS {
		return
	}
	n, err := host.SyncMGS()
	switch {
	case err != nil:
		fmt.Fprintf(e.Stderr(), "the MGS replicas changed, but recording them in the targets of %s failed: %v\n", host.Dir(), err)
	case n > 0:
		fmt.Fprintf(e.Out, "recorded the MGS replicas in %d targets of %s (running targets use the new list from their next start)\n", n, host.Dir())
	}
}

// idList is "1, 2, 3": the ids of peers, in order.
func idList(peers map[uint64]string) string {
	ids := make([]uint64, 0, len(peers))
	for id := range peers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatUint(id, 10)
	}
	return strings.Join(s, ", ")
}

// forJSON is e for a change made with --json: its messages go to
// standard error, and the returned Env writes the one JSON document
// (ReplicaChange) to standard output.
func forJSON(e *Env, asJSON bool) Env {
	doc := *e
	if asJSON {
		e.Out = e.Stderr()
	}
	return doc
}

// noReplicaError: the MGS lists no replica of a group.
type noReplicaError struct{ group string }

func (e *noReplicaError) Error() string { return "the MGS knows no replica of " + e.group }
