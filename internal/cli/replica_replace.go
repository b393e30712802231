package cli

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// ReplicaReplaceOptions are the options of `nacre replica replace`.
type ReplicaReplaceOptions struct {
	Target string // the group: mgs or mdtN
	ID     uint64 // the replica to replace
	// NewID and Addr are the new replica's id and address; with a Host,
	// NewID 0 takes the next unused id and the host picks the address.
	NewID   uint64
	Addr    string
	Timeout time.Duration // how long the new replica may take to catch up
	Host    ReplicaHost   // as for ReplicaAdd and ReplicaRemove
	JSON    bool          // print the change as a ReplicaChange (messages go to standard error)
}

// ReplicaReplace is `nacre replica replace`: it adds a new replica, then
// removes the old one. What the remove would refuse is refused before
// anything is added: afterwards the group would be left with the new
// replica and the old one both voting.
func ReplicaReplace(ctx context.Context, e Env, o ReplicaReplaceOptions) error {
	g, err := ParseGroup(o.Target)
	if err != nil {
		return err
	}
	if o.ID == 0 {
		return fmt.Errorf("--id (the replica to replace) is required")
	}
	if o.NewID == o.ID {
		return fmt.Errorf("--new-id %d is the replica to replace: the new replica needs a new id (ids are never reused)", o.NewID)
	}
	doc := forJSON(&e, o.JSON)
	peers, _, _, err := groupPeers(ctx, e, g)
	if err != nil {
		return err
	}
	if _, ok := peers[o.ID]; !ok {
		return fmt.Errorf("no replica %d in %s (replicas %s): nothing was added; `nacre replica list --target %s` shows the replicas",
			o.ID, strings.ToUpper(g.Name), idList(peers), o.Target)
	}
	nid, err := addReplica(ctx, e, g, ReplicaAddOptions{Target: o.Target, ID: o.NewID, Addr: o.Addr, Timeout: o.Timeout, Host: o.Host})
	if err != nil {
		return err
	}
	if err := removeReplica(ctx, e, g, o.ID, o.Host); err != nil {
		now := "both"
		if peers, _, _, perr := groupPeers(ctx, e, g); perr == nil {
			now = "replicas " + idList(peers)
		}
		dirFlag := ""
		if o.Host != nil {
			dirFlag = " --dir " + o.Host.Dir()
		}
		return fmt.Errorf("the replace is half done: replica %d was added to %s and votes, but replica %d was not removed: %w\n"+
			"%s has %s now. To finish the replace: nacre replica remove --target %s --id %d%s; "+
			"to undo it: nacre replica remove --target %s --id %d%s",
			nid, strings.ToUpper(g.Name), o.ID, err, strings.ToUpper(g.Name), now, o.Target, o.ID, dirFlag, o.Target, nid, dirFlag)
	}
	fmt.Fprintf(e.Out, "replica %d replaced by replica %d\n", o.ID, nid)
	if !o.JSON {
		return nil
	}
	return PrintReplicaChange(ctx, doc, g, ReplicaChange{Action: "replace", Replica: o.ID, NewReplica: nid})
}
