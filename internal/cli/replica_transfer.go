package cli

import (
	"context"
	"fmt"
	"strings"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
)

// transferLeadership hands the group's leadership to replica to (0: the
// most up-to-date other voter) and returns the replica that leads.
func transferLeadership(ctx context.Context, e Env, g ReplicaGroup, to uint64) (uint64, error) {
	// A replica the leader has not heard from lately (down) cannot take
	// over: say so at once, not after the whole wait.
	if addrs, _, aerr := replicaAddrs(ctx, e.MGS, g, e.TLS); aerr == nil && to != 0 {
		if lv, _, lerr := leaderView(ctx, addrs, e.TLS); lerr == nil {
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

// ReplicaTransferOptions are the options of `nacre replica transfer`.
type ReplicaTransferOptions struct {
	Target string // the group: mgs or mdtN
	To     uint64 // the replica to lead (0: the most up-to-date one)
	JSON   bool   // print the change as a ReplicaChange (messages go to standard error)
}

// ReplicaTransfer is `nacre replica transfer`: it hands a group's
// leadership to another replica (before maintenance).
func ReplicaTransfer(ctx context.Context, e Env, o ReplicaTransferOptions) error {
	g, err := ParseGroup(o.Target)
	if err != nil {
		return err
	}
	doc := forJSON(&e, o.JSON)
	leader, err := transferLeadership(ctx, e, g, o.To)
	if err != nil || !o.JSON {
		return err
	}
	return PrintReplicaChange(ctx, doc, g, ReplicaChange{Action: "transfer", Leader: leader})
}
