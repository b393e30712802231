package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
)

// removeFromGroup removes replica id from the group and tells the MGS to
// forget it; member is false when it was only registered with the MGS
// (a leftover), which now forgot it.
func removeFromGroup(ctx context.Context, e Env, g ReplicaGroup, id uint64) (member bool, err error) {
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
		if addrs, _, aerr := replicaAddrs(ctx, e.MGS, g, e.TLS); aerr == nil && len(addrs) == 1 && addrs[id] != "" && errno.CodeOf(err) != errno.NotFound {
			m, merr := membersOf(ctx, addrs[id], e.TLS)
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
		if errno.CodeOf(err) == errno.NotFound {
			if addrs, _, aerr := replicaAddrs(ctx, e.MGS, g, e.TLS); aerr == nil && addrs[id] != "" {
				if derr := deregister(ctx, e, g, id); derr != nil {
					return false, fmt.Errorf("%s; and the MGS did not forget its registration: %w", err.Error(), derr)
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
	cc, err := Dial(e.MGS, e.TLS)
	if err != nil {
		return err
	}
	defer cc.Close()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = nacregrpc.NewMGSClient(cc).Deregister(dctx, &pb.DeregisterRequest{Kind: g.Kind, Index: g.Index, ReplicaId: id})
	return err
}

// ReplicaRemoveOptions are the options of `nacre replica remove`.
type ReplicaRemoveOptions struct {
	Target string // the group: mgs or mdtN
	ID     uint64 // the replica to remove
	// Host, if set, stops the replica and moves its directory aside
	// (--dir).
	Host ReplicaHost
	JSON bool // print the change as a ReplicaChange (messages go to standard error)
}

// ReplicaRemove is `nacre replica remove`: it removes a replica from its
// group (a leader hands over first) and, with o.Host, retires it there.
func ReplicaRemove(ctx context.Context, e Env, o ReplicaRemoveOptions) error {
	g, err := ParseGroup(o.Target)
	if err != nil {
		return err
	}
	if o.ID == 0 {
		return fmt.Errorf("--id is required")
	}
	doc := forJSON(&e, o.JSON)
	if err := removeReplica(ctx, e, g, o.ID, o.Host); err != nil || !o.JSON {
		return err
	}
	return PrintReplicaChange(ctx, doc, g, ReplicaChange{Action: "remove", Replica: o.ID})
}

// removeReplica removes replica id from g and retires it on h, or says
// what is left to do.
func removeReplica(ctx context.Context, e Env, g ReplicaGroup, id uint64, h ReplicaHost) error {
	member, err := removeFromGroup(ctx, e, g, id)
	if err != nil {
		return err
	}
	if h != nil {
		to, err := h.Retire(g.Name, id)
		syncMGS(e, g, h)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(e.Out, "it has no directory in %s (it never ran from there)\n", h.Dir())
		case err != nil:
			fmt.Fprintf(e.Stderr(), "replica %d is out of the group; its process or directory: %v\n", id, err)
		default:
			fmt.Fprintf(e.Out, "stopped it and moved its directory to %s\n", to)
		}
		return nil
	}
	if !member {
		fmt.Fprintf(e.Out, "if its process still runs, stop it, and delete its target directory (or keep it elsewhere for the record)\n")
		return nil
	}
	fmt.Fprintf(e.Out, "its process stops by itself within seconds; then delete its target directory (or keep it elsewhere for the record)\n")
	return nil
}
