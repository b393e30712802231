package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/grpcx"
	"nacre/internal/pki"
)

// checkReplicaAddr refuses an address a replica cannot have.
func checkReplicaAddr(addr string) error {
	host, err := grpcx.CheckHostPort(addr)
	if err == nil && host == "" {
		err = errors.New("no host")
	}
	if err != nil {
		return fmt.Errorf("--addr %q: want HOST:PORT, the new replica's --listen address (%v)", addr, err)
	}
	return nil
}

// addToGroup adds replica id, serving at addr (started to join), to the
// group: as a learner, then as a voter once it has caught up. An id that
// is already a member is refused (the leader would only change its
// address and lose it), except a learner at its own address, which is
// promoted (or, with learner, left alone).
func addToGroup(ctx context.Context, e Env, g ReplicaGroup, id uint64, addr string, learner bool, timeout time.Duration) error {
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
	addrs, _, err := replicaAddrs(ctx, e.MGS, g, e.TLS)
	if nr := (*noReplicaError)(nil); errors.As(err, &nr) {
		return err // before saying it is adding
	}
	if err == nil {
		if lv, _, err := leaderView(ctx, addrs, e.TLS); err == nil {
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
			if err := checkJoiner(ctx, lv, name, id, addr, addrs[id], e.TLS); err != nil {
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
	for try := 0; try < 3 && err != nil && errno.CodeOf(err) == errno.Unavailable && ctx.Err() == nil; try++ {
		fmt.Fprintf(e.Out, "the leader of %s went away during the add (%v); asking the new one to finish it...\n", name, err.Error())
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
func checkJoiner(ctx context.Context, lv *pb.RaftMembersReply, name string, id uint64, addr, registered string, creds *pki.Creds) error {
	m, err := membersOf(ctx, addr, creds)
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

// ReplicaAddOptions are the options of `nacre replica add`.
type ReplicaAddOptions struct {
	Target string // the group: mgs or mdtN
	// ID is the new replica's id; with a Host, 0 takes the next unused
	// one.
	ID uint64
	// Addr is the new replica's address (its --listen); a Host picks one.
	Addr    string
	Learner bool          // keep it a learner (no vote)
	Timeout time.Duration // how long it may take to catch up
	// Host, if set, formats and starts the new replica (--dir); else it
	// was started on its machine.
	Host ReplicaHost
	JSON bool // print the change as a ReplicaChange (messages go to standard error)
}

// ReplicaAdd is `nacre replica add`: it adds a replica to a group (made
// and started by o.Host, if given), which catches up by snapshot and then
// votes.
func ReplicaAdd(ctx context.Context, e Env, o ReplicaAddOptions) error {
	g, err := ParseGroup(o.Target)
	if err != nil {
		return err
	}
	doc := forJSON(&e, o.JSON)
	id, err := addReplica(ctx, e, g, o)
	if err != nil || !o.JSON {
		return err
	}
	return PrintReplicaChange(ctx, doc, g, ReplicaChange{Action: "add", Replica: id})
}

// addReplica adds the replica o describes to g, making it first on
// o.Host, and returns its id.
func addReplica(ctx context.Context, e Env, g ReplicaGroup, o ReplicaAddOptions) (uint64, error) {
	id, addr := o.ID, o.Addr
	if o.Host != nil {
		peers, next, removed, err := groupPeers(ctx, e, g)
		if err != nil {
			return 0, err
		}
		if id, err = newReplicaID(g, id, next, removed, o.Host.RetiredIDs(g.Name), peers); err != nil {
			return 0, err
		}
		d, a, pid, err := o.Host.NewReplica(g.Name, id, peers)
		if err != nil {
			return 0, err
		}
		addr = a
		fmt.Fprintf(e.Out, "formatted %s and started it (pid %d, %s)\n", d, pid, addr)
	}
	if id == 0 || addr == "" {
		return 0, fmt.Errorf("give --id and --addr of the new replica (or --dir of a local cluster)")
	}
	err := addToGroup(ctx, e, g, id, addr, o.Learner, o.Timeout)
	if err == nil {
		syncMGS(e, g, o.Host)
	}
	if err != nil && o.Host != nil && errno.ReasonOf(err) == errno.LearnerKept {
		// The same command with --dir would make another replica.
		err = fmt.Errorf("%w\n(with --dir, promote this one with: nacre replica add --target %s --id %d --addr %s)", err, o.Target, id, addr)
	}
	return id, err
}

// newReplicaID is the id of a replica a host makes for g: asked, or (0)
// the next unused one. Ids are never reused: the group refuses one it
// removed for good, and one retired on the host (whose directory is kept)
// is passed over too; a member's id is refused before a directory is
// formatted for it. next is the group's next unused id, removed the ids
// it removed, retired the host's, peers its members.
func newReplicaID(g ReplicaGroup, asked, next uint64, removed, retired []uint64, peers map[uint64]string) (uint64, error) {
	for _, r := range retired {
		next = max(next, r+1)
	}
	id := asked
	if id == 0 {
		id = next
	}
	if slices.Contains(removed, id) {
		return 0, fmt.Errorf("replica id %d was removed from %s, and ids are never reused: leave --id out for the next unused one (%d)", id, strings.ToUpper(g.Name), next)
	}
	if a, ok := peers[id]; ok {
		return 0, fmt.Errorf("replica %d is already a member of %s at %s; to move it, use nacre replica replace (to promote a learner, give --id and --addr without --dir)", id, strings.ToUpper(g.Name), a)
	}
	return id, nil
}
