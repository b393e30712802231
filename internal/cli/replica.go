package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/raftgroup"
	"nacre/internal/rpc"
)

// `nacre replica`: the replicas of the Raft groups (the MGS and each MDT),
// through each replica's RaftAdmin service (api/raftgroup.proto).

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

// ReplicaRow is one row of `nacre replica list --json`.
type ReplicaRow struct {
	Target    string `json:"target"`
	Replica   uint64 `json:"replica"`
	Addr      string `json:"addr"`
	Role      string `json:"role"`  // voter | learner | (not a member)
	State     string `json:"state"` // leader | follower | ... | down
	Term      uint64 `json:"term,omitempty"`
	Applied   uint64 `json:"applied,omitempty"`
	Match     uint64 `json:"match,omitempty"` // the leader's view
	Progress  string `json:"progress,omitempty"`
	SnapsSent uint64 `json:"snapshots_sent,omitempty"`
	SnapsRecv uint64 `json:"snapshots_received,omitempty"`
	Pid       int64  `json:"pid,omitempty"`
	Lease     bool   `json:"lease,omitempty"`
}

// replicaAddrs lists the replicas the MGS knows of a group, with pids.
func replicaAddrs(ctx context.Context, mgs string, g ReplicaGroup) (map[uint64]string, map[uint64]int64, error) {
	cc, err := Dial(mgs)
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
		return nil, nil, fmt.Errorf("the MGS knows no replica of %s", g.Name)
	}
	return addrs, pids, nil
}

func membersOf(ctx context.Context, addr string) (*pb.RaftMembersReply, error) {
	cc, err := Dial(addr)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return nacregrpc.NewRaftAdminClient(cc).Members(ctx, &pb.RaftMembersRequest{})
}

// leaderView finds the group's leader and its view of the members.
func leaderView(ctx context.Context, addrs map[uint64]string) (*pb.RaftMembersReply, string, error) {
	var lastErr error
	var best *pb.RaftMembersReply
	bestAddr := ""
	for _, a := range addrs {
		m, err := membersOf(ctx, a)
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

// ReplicaList prints the replicas of the MGS and of every MDT (or of
// one group).
func ReplicaList(ctx context.Context, e Env, only string, asJSON bool) error {
	rows, err := ReplicaRows(ctx, e, only)
	if err != nil {
		return err
	}
	if asJSON {
		return JSON(e.Out, rows)
	}
	t := newTable(e.Out)
	t.AppendHeader([]any{"GROUP", "REPLICA", "ADDRESS", "ROLE", "STATE", "TERM", "APPLIED", "MATCH", "SNAPSHOTS (SENT/RECEIVED)", "PID"})
	for _, r := range rows {
		state := r.State
		if r.Lease {
			state += " (lease)"
		}
		match := "-"
		if r.Progress != "" {
			match = fmt.Sprintf("%d (%s)", r.Match, r.Progress)
		}
		pid := "-"
		if r.Pid != 0 {
			pid = fmt.Sprint(r.Pid)
		}
		t.AppendRow([]any{r.Target, r.Replica, r.Addr, r.Role, state, r.Term, r.Applied, match, fmt.Sprintf("%d/%d", r.SnapsSent, r.SnapsRecv), pid})
	}
	t.Render()
	return nil
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

// ReplicaRows lists the replicas of every group, or of group only.
func ReplicaRows(ctx context.Context, e Env, only string) ([]ReplicaRow, error) {
	if e.MGS == "" {
		return nil, fmt.Errorf("no MGS address: pass --mgs HOST:PORT, --dir CLUSTER_DIR, or set NACRE_MGS")
	}
	st, err := GetStatus(ctx, e.MGS)
	if err != nil {
		return nil, err
	}
	groups := []ReplicaGroup{{Name: "mgs", Kind: pb.TargetKind_TARGET_MGS}}
	seen := map[uint32]bool{}
	for _, t := range st.Targets {
		if t.Kind == "mdt" && !seen[t.Index] {
			seen[t.Index] = true
			groups = append(groups, ReplicaGroup{Name: fmt.Sprintf("mdt%d", t.Index), Kind: pb.TargetKind_TARGET_MDT, Index: t.Index})
		}
	}
	if only != "" {
		g, err := ParseGroup(only)
		if err != nil {
			return nil, err
		}
		groups = []ReplicaGroup{g}
	}
	var rows []ReplicaRow
	for _, g := range groups {
		addrs, pids, err := replicaAddrs(ctx, e.MGS, g)
		if err != nil {
			return nil, err
		}
		lv, _, _ := leaderView(ctx, addrs)
		ids := make([]uint64, 0, len(addrs))
		for id := range addrs {
			ids = append(ids, id)
		}
		if lv != nil {
			for _, m := range lv.Members {
				if _, ok := addrs[m.Id]; !ok {
					addrs[m.Id] = m.Addr
					ids = append(ids, m.Id)
				}
			}
		}
		slices.Sort(ids)
		for _, id := range ids {
			r := ReplicaRow{Target: strings.ToUpper(g.Name), Replica: id, Addr: addrs[id], Role: "(not a member)", State: "down", Pid: pids[id]}
			if lv != nil {
				for _, m := range lv.Members {
					if m.Id == id {
						r.Role, r.Match, r.Progress = m.Role, m.Match, m.Progress
					}
				}
			} else {
				r.Role = "unknown"
			}
			if m, err := membersOf(ctx, addrs[id]); err == nil {
				r.State, r.Term, r.Applied, r.SnapsSent, r.SnapsRecv, r.Lease = m.State, m.Term, m.Applied, m.SnapshotsSent, m.SnapshotsReceived, m.Lease
				if lv == nil {
					// No leader to ask: the replica's own view of its role.
					r.Role = "(not a member)"
					for _, x := range m.Members {
						if x.Id == id {
							r.Role = x.Role
						}
					}
				}
			}
			rows = append(rows, r)
		}
	}
	return rows, nil
}

// checkReplicaAddr refuses an address a replica cannot have.
func checkReplicaAddr(addr string) error {
	host, err := rpc.CheckHostPort(addr)
	if err == nil && host == "" {
		err = errors.New("no host")
	}
	if err != nil {
		return fmt.Errorf("--addr %q: want HOST:PORT, the new replica's --listen address (%v)", addr, err)
	}
	return nil
}

// GroupPeers returns the members of a group and their addresses (for a
// new replica's identity) and the next unused replica id.
func GroupPeers(ctx context.Context, e Env, g ReplicaGroup) (peers map[uint64]string, next uint64, removed []uint64, err error) {
	addrs, _, err := replicaAddrs(ctx, e.MGS, g)
	if err != nil {
		return nil, 0, nil, err
	}
	lv, _, err := leaderView(ctx, addrs)
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
	addrs, _, err := replicaAddrs(ctx, e.MGS, g)
	if err != nil {
		return nil, err
	}
	_, addr, err := leaderView(ctx, addrs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", g.Name, err)
	}
	for hop := 0; hop < 5; hop++ {
		cc, err := Dial(addr)
		if err != nil {
			return nil, err
		}
		r, err := call(ctx, nacregrpc.NewRaftAdminClient(cc))
		cc.Close()
		if err == nil {
			return r, nil
		}
		if _, hint, ok := raftgroup.LeaderHint(err); ok && status.Code(err) == codes.Unavailable {
			if hint == "" {
				time.Sleep(500 * time.Millisecond)
				if _, hint, err = leaderView(ctx, addrs); err != nil {
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

// ReplicaAdd adds replica id, serving at addr (started to join), to the
// group: as a learner, then as a voter once it has caught up. An id that
// is already a member is refused (the leader would only change its
// address and lose it), except a learner at its own address, which is
// promoted (or, with learner, left alone).
func ReplicaAdd(ctx context.Context, e Env, g ReplicaGroup, id uint64, addr string, learner bool, timeout time.Duration) error {
	start := time.Now()
	name := strings.ToUpper(g.Name)
	doing := fmt.Sprintf("adding replica %d (%s) to %s: learner first, voter once it has caught up", id, addr, name)
	if learner {
		doing = fmt.Sprintf("adding replica %d (%s) to %s as a learner", id, addr, name)
	}
	if err := checkReplicaAddr(addr); err != nil {
		return err
	}
	// The servers refuse too; asking first keeps the message plain and
	// says nothing of adding when nothing will be added.
	addrs, _, err := replicaAddrs(ctx, e.MGS, g)
	if err != nil && strings.Contains(err.Error(), "knows no replica") {
		return err // before saying it is adding
	}
	if err == nil {
		if lv, _, err := leaderView(ctx, addrs); err == nil {
			if slices.Contains(lv.Removed, id) {
				return fmt.Errorf("replica id %d was removed from %s, and ids are never reused: give the new replica another --id (or leave it out with --dir)", id, name)
			}
			for _, m := range lv.Members {
				if m.Id != id && m.Addr == addr {
					return fmt.Errorf("%s is the address of replica %d of %s: give the new replica's own address (its --listen)", addr, m.Id, name)
				}
				if m.Id != id {
					continue
				}
				if m.Role != "learner" || (m.Addr != "" && m.Addr != addr) {
					return fmt.Errorf("replica %d is already a %s of %s at %s; to move it, use nacre replica replace", id, m.Role, name, m.Addr)
				}
				if learner {
					fmt.Fprintf(e.Out, "replica %d is already a learner of %s at %s\n", id, name, m.Addr)
					return nil
				}
				doing = fmt.Sprintf("replica %d (%s) is a learner of %s: promoting it to voter once it has caught up", id, addr, name)
			}
			if err := checkJoiner(ctx, lv, name, id, addr, addrs[id]); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(e.Out, "%s...\n", doing)
	add := func(ctx context.Context, c nacregrpc.RaftAdminClient) (*pb.RaftMembersReply, error) {
		return c.AddReplica(ctx, &pb.RaftAddRequest{Id: id, Addr: addr, Learner: learner, CatchUpTimeoutMs: uint32(timeout.Milliseconds())}, grpc.WaitForReady(true))
	}
	r, err := onLeader(ctx, e, g, add)
	// The leader died or stepped down during the add (the connection
	// broke: EOF, reset). An add of the same id and address is
	// idempotent: ask the new leader to finish it (it was left a learner).
	for try := 0; try < 3 && err != nil && status.Code(err) == codes.Unavailable && ctx.Err() == nil; try++ {
		fmt.Fprintf(e.Out, "the leader of %s went away during the add (%v); asking the new one to finish it...\n", name, status.Convert(err).Message())
		time.Sleep(time.Second)
		r, err = onLeader(ctx, e, g, add)
	}
	if err != nil {
		return refusal(err, "add replica %d to %s", id, g.Name)
	}
	fmt.Fprintf(e.Out, "replica %d is a %s of %s after %.1fs\n", id, roleOf(r, id), name, time.Since(start).Seconds())
	return nil
}

// checkJoiner asks the process at addr, if one answers there, which
// replica it is, and refuses one of another file system or group, or
// another replica id: raft would take it in under the id given, and it
// would install this group's state over its own (or, started as another
// group's replica, answer for that group).
func checkJoiner(ctx context.Context, lv *pb.RaftMembersReply, name string, id uint64, addr, registered string) error {
	m, err := membersOf(ctx, addr)
	if err != nil {
		if registered != "" && registered != addr {
			// A mistyped address: the add would make a learner that
			// never catches up, and the id could not be added again.
			return fmt.Errorf("nothing answers at %s, and replica %d of %s runs at %s (it registered with the MGS): give --addr %s",
				addr, id, name, registered, registered)
		}
		return nil // not running yet: the add leaves it a learner, and says so
	}
	what := m.Name
	if m.Fsname != "" {
		what = fmt.Sprintf("%s of file system %q", m.Name, m.Fsname)
	}
	switch {
	case lv.Fsname != "" && m.Fsname != "" && m.Fsname != lv.Fsname,
		m.Group != lv.Group:
		return fmt.Errorf("%s serves replica %d of %s, not a replica of %s of file system %q: give the address of the new replica's process (its --listen)",
			addr, m.Replica, what, name, lv.Fsname)
	case m.Replica != id:
		return fmt.Errorf("%s serves replica %d of %s, not replica %d: give --id %d, or the address of replica %d's process", addr, m.Replica, what, id, m.Replica, id)
	}
	return nil
}

// refusal turns an error of a RaftAdmin call into the CLI's error. A
// refusal (the replica is already a member, there is no such replica,
// the target is a single replica...) carries a message written for
// operators that names the replica, the group and the way out: it is
// returned as is, without the gRPC wrapping. Other errors are prefixed
// with what was being done.
func refusal(err error, format string, args ...any) error {
	switch status.Code(err) {
	case codes.AlreadyExists, codes.NotFound, codes.FailedPrecondition:
		return errors.New(status.Convert(err).Message())
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}

// ReplicaRemove removes replica id from the group and tells the MGS to
// forget it; member is false when it was only registered with the MGS
// (a leftover), which now forgot it.
func ReplicaRemove(ctx context.Context, e Env, g ReplicaGroup, id uint64) (member bool, err error) {
	if _, err := onLeader(ctx, e, g, func(ctx context.Context, c nacregrpc.RaftAdminClient) (*pb.RaftMembersReply, error) {
		return c.RemoveReplica(ctx, &pb.RaftRemoveRequest{Id: id})
	}); err != nil {
		// Not a member, but registered with the MGS: a replica left over
		// (an add that failed after it started, one removed while it was
		// down). Its registration kept `nacre up` from starting without
		// its directory and status listing it, and nothing else could
		// clear it.
		// A group of this one registration, with no leader: a replica
		// formatted for a group that does not exist (a mistyped --index)
		// registered, and status and df showed that group without a
		// leader for good. The MGS forgets it; a real target registers
		// again when it starts.
		if addrs, _, aerr := replicaAddrs(ctx, e.MGS, g); aerr == nil && len(addrs) == 1 && addrs[id] != "" && status.Code(err) != codes.NotFound {
			m, merr := membersOf(ctx, addrs[id])
			if merr == nil && m.Leader == 0 {
				return false, fmt.Errorf("replica %d is the only replica of %s the MGS knows, and it runs (at %s) with no leader: stop its process (nacre serve of its directory) and run this again; while it runs it registers again",
					id, strings.ToUpper(g.Name), addrs[id])
			}
			if merr != nil {
				if derr := deregister(ctx, e, g, id); derr != nil {
					return false, fmt.Errorf("%v; and the MGS did not forget its registration: %w", err, derr)
				}
				fmt.Fprintf(e.Out, "replica %d is the only replica of %s the MGS knows, and none leads: the MGS forgot its registration (%s); a target of that group registers again when it starts\n",
					id, strings.ToUpper(g.Name), addrs[id])
				return false, nil
			}
		}
		if status.Code(err) == codes.NotFound {
			if addrs, _, aerr := replicaAddrs(ctx, e.MGS, g); aerr == nil && addrs[id] != "" {
				if derr := deregister(ctx, e, g, id); derr != nil {
					return false, fmt.Errorf("%s; and the MGS did not forget its registration: %w", status.Convert(err).Message(), derr)
				}
				fmt.Fprintf(e.Out, "replica %d is not a member of %s; the MGS forgot its registration (%s)\n", id, strings.ToUpper(g.Name), addrs[id])
				return false, nil
			}
		}
		return false, refusal(err, "remove replica %d from %s", id, g.Name)
	}
	if err := deregister(ctx, e, g, id); err != nil {
		fmt.Fprintf(e.Err, "replica %d left %s, but the MGS did not forget it: %v\n", id, g.Name, err)
	}
	fmt.Fprintf(e.Out, "replica %d removed from %s\n", id, strings.ToUpper(g.Name))
	return true, nil
}

// deregister tells the MGS to forget replica id of g.
func deregister(ctx context.Context, e Env, g ReplicaGroup, id uint64) error {
	cc, err := Dial(e.MGS)
	if err != nil {
		return err
	}
	defer cc.Close()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = nacregrpc.NewMGSClient(cc).Deregister(dctx, &pb.DeregisterRequest{Kind: g.Kind, Index: g.Index, ReplicaId: id})
	return err
}

// ReplicaTransfer hands the group's leadership to replica to (0: the most
// up-to-date other voter).
func ReplicaTransfer(ctx context.Context, e Env, g ReplicaGroup, to uint64) (uint64, error) {
	// A replica the leader has not heard from lately (down) cannot take
	// over: say so at once, not after the whole wait.
	if addrs, _, aerr := replicaAddrs(ctx, e.MGS, g); aerr == nil && to != 0 {
		if lv, _, lerr := leaderView(ctx, addrs); lerr == nil {
			for _, m := range lv.Members {
				if m.Id == to && m.Role == "voter" && !m.Active && !m.Leader {
					return 0, fmt.Errorf("replica %d of %s has not been heard from lately (is its process running?): start it, or transfer to another replica",
						to, strings.ToUpper(g.Name))
				}
			}
		}
	}
	r, err := onLeader(ctx, e, g, func(ctx context.Context, c nacregrpc.RaftAdminClient) (*pb.RaftMembersReply, error) {
		return c.TransferLeader(ctx, &pb.RaftTransferRequest{To: to})
	})
	if err != nil {
		return 0, refusal(err, "transfer leadership of %s", g.Name)
	}
	fmt.Fprintf(e.Out, "replica %d leads %s\n", r.Leader, strings.ToUpper(g.Name))
	return r.Leader, nil
}

func roleOf(r *pb.RaftMembersReply, id uint64) string {
	for _, m := range r.Members {
		if m.Id == id {
			return m.Role
		}
	}
	return "member"
}
