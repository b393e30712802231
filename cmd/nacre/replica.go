package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/errno"
	"nacre/internal/localcluster"
	"nacre/internal/target"
)

// addReplicaCommands adds `nacre replica list|add|remove|replace|transfer`.
func addReplicaCommands(root *cobra.Command, g *globals) {
	top := &cobra.Command{
		Use:   "replica",
		Short: "Replicas of the MGS and the MDTs (Raft groups): list, add, remove, replace, transfer leadership",
		Long: `The MGS and every MDT can be Raft groups of several replicas, each its own
process (nacre up --replicas 3). These commands change a group online.

With --dir CLUSTER_DIR (a local cluster), add formats and starts the new
replica itself (in CLUSTER_DIR/mdt0-rN), and remove stops the old one and
moves its directory aside. Elsewhere, format and start the new replica on
its host first:

  nacre format --type mdt --index 0 --replica-id 4 --peers 1=h1:p,2=h2:p,3=h3:p --listen h4:p ...
  nacre serve --dir DIR
  nacre replica add --target mdt0 --id 4 --addr h4:p

A new replica joins as a learner (it does not vote) and receives a
snapshot, and becomes a voter once it has caught up.`,
		GroupID: "admin",
	}
	var dir string
	env := func(cmd *cobra.Command) (cli.Env, error) {
		e := g.env(cmd)
		if dir != "" {
			a, err := localcluster.MGSAddr(dir)
			if err != nil {
				return e, err
			}
			e.MGS = a
		}
		return e, nil
	}
	// envGroup is env plus the group named by --target.
	envGroup := func(cmd *cobra.Command, targetFlag string) (cli.Env, cli.ReplicaGroup, error) {
		e, err := env(cmd)
		if err != nil {
			return e, cli.ReplicaGroup{}, err
		}
		grp, err := cli.ParseGroup(targetFlag)
		return e, grp, err
	}
	top.PersistentFlags().StringVar(&dir, "dir", "", "local cluster directory (its MGS; add and remove manage the replica processes)")
	// asJSON: with --json the messages of a change go to standard error
	// and standard output gets one JSON document (cli.ReplicaChange).
	var asJSON bool
	jsonOut := func(cmd *cobra.Command, e *cli.Env) cli.Env {
		out := *e
		if asJSON {
			cmd.SetOut(cmd.ErrOrStderr())
			e.Out = cmd.ErrOrStderr()
		}
		return out
	}
	jsonFlag := func(c *cobra.Command) {
		c.Flags().BoolVar(&asJSON, "json", false, "print the change and the group's replicas after it as JSON (messages go to standard error)")
	}

	var list struct {
		target string
		json   bool
	}
	listCmd := &cobra.Command{
		Use:   "list [--target mgs|mdtN] [--json]",
		Short: "Show every replica: role, state, term, applied index, the leader's view of its log, snapshots",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := env(cmd)
			if err != nil {
				return err
			}
			return cli.ReplicaList(cmd.Context(), e, list.target, list.json)
		},
	}
	listCmd.Flags().StringVar(&list.target, "target", "", "one group: mgs or mdtN (default: all)")
	listCmd.Flags().BoolVar(&list.json, "json", false, "print JSON")

	var add struct {
		target, addr string
		id           uint64
		learner      bool
		timeout      time.Duration
	}
	// syncMGS records a changed MGS membership in the local cluster's
	// targets (--dir: the tool owns their identities).
	syncMGS := func(e cli.Env, grp cli.ReplicaGroup) {
		if dir == "" || grp.Kind != pb.TargetKind_TARGET_MGS {
			return
		}
		n, err := localcluster.SyncMGSNodes(dir)
		switch {
		case err != nil:
			fmt.Fprintf(e.Err, "the MGS replicas changed, but recording them in the targets of %s failed: %v\n", dir, err)
		case n > 0:
			fmt.Fprintf(e.Out, "recorded the MGS replicas in %d targets of %s (running targets use the new list from their next start)\n", n, dir)
		}
	}
	addOne := func(cmd *cobra.Command, e cli.Env, grp cli.ReplicaGroup) (uint64, error) {
		id, addr := add.id, add.addr
		if dir != "" {
			peers, next, removed, err := cli.GroupPeers(cmd.Context(), e, grp)
			if err != nil {
				return 0, err
			}
			for _, r := range localcluster.RemovedReplicaIDs(dir, grp.Name) {
				next = max(next, r+1) // ids are never reused
			}
			if id == 0 {
				id = next
			}
			if slices.Contains(removed, id) {
				return 0, fmt.Errorf("replica id %d was removed from %s, and ids are never reused: leave --id out for the next unused one (%d)", id, strings.ToUpper(grp.Name), next)
			}
			if a, ok := peers[id]; ok {
				// Refused before a directory is formatted for it.
				return 0, fmt.Errorf("replica %d is already a member of %s at %s; to move it, use nacre replica replace (to promote a learner, give --id and --addr without --dir)", id, strings.ToUpper(grp.Name), a)
			}
			d, a, pid, err := localcluster.NewReplica(dir, grp.Name, id, peers, "")
			if err != nil {
				return 0, err
			}
			addr = a
			fmt.Fprintf(cmd.OutOrStdout(), "formatted %s and started it (pid %d, %s)\n", d, pid, addr)
		}
		if id == 0 || addr == "" {
			return 0, fmt.Errorf("give --id and --addr of the new replica (or --dir of a local cluster)")
		}
		err := cli.ReplicaAdd(cmd.Context(), e, grp, id, addr, add.learner, add.timeout)
		if err == nil {
			syncMGS(e, grp)
		}
		if err != nil && dir != "" && errno.ReasonOf(err) == errno.LearnerKept {
			// The same command with --dir would make another replica.
			err = fmt.Errorf("%w\n(with --dir, promote this one with: nacre replica add --target %s --id %d --addr %s)", err, add.target, id, addr)
		}
		return id, err
	}
	addCmd := &cobra.Command{
		Use:   "add --target mgs|mdtN (--dir CLUSTER_DIR | --id N --addr HOST:PORT) [--learner] [--json]",
		Short: "Add a replica to a group (it catches up by snapshot, then votes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, grp, err := envGroup(cmd, add.target)
			if err != nil {
				return err
			}
			je := jsonOut(cmd, &e)
			id, err := addOne(cmd, e, grp)
			if err != nil || !asJSON {
				return err
			}
			return cli.PrintReplicaChange(cmd.Context(), je, grp, cli.ReplicaChange{Action: "add", Replica: id})
		},
	}
	jsonFlag(addCmd)
	addCmd.Flags().StringVar(&add.target, "target", "mdt0", "group: mgs or mdtN")
	addCmd.Flags().Uint64Var(&add.id, "id", 0, "replica id (never reused; default with --dir: the next unused one)")
	addCmd.Flags().StringVar(&add.addr, "addr", "", "the new replica's address (its --listen)")
	addCmd.Flags().BoolVar(&add.learner, "learner", false, "keep it a learner (no vote)")
	addCmd.Flags().DurationVar(&add.timeout, "timeout", time.Minute, "how long it may take to catch up")

	var rm struct {
		target string
		id     uint64
	}
	removeOne := func(cmd *cobra.Command, e cli.Env, grp cli.ReplicaGroup, id uint64) error {
		member, err := cli.ReplicaRemove(cmd.Context(), e, grp, id)
		if err != nil {
			return err
		}
		if dir != "" {
			to, err := localcluster.RetireReplica(dir, grp.Name, id)
			syncMGS(e, grp)
			switch {
			case errors.Is(err, fs.ErrNotExist):
				fmt.Fprintf(e.Out, "it has no directory in %s (it never ran from there)\n", dir)
			case err != nil:
				fmt.Fprintf(cmd.ErrOrStderr(), "replica %d is out of the group; its process or directory: %v\n", id, err)
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
	removeCmd := &cobra.Command{
		Use:   "remove --target mgs|mdtN --id N [--json]",
		Short: "Remove a replica from a group (a leader hands over first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, grp, err := envGroup(cmd, rm.target)
			if err != nil {
				return err
			}
			if rm.id == 0 {
				return fmt.Errorf("--id is required")
			}
			je := jsonOut(cmd, &e)
			if err := removeOne(cmd, e, grp, rm.id); err != nil || !asJSON {
				return err
			}
			return cli.PrintReplicaChange(cmd.Context(), je, grp, cli.ReplicaChange{Action: "remove", Replica: rm.id})
		},
	}
	jsonFlag(removeCmd)
	removeCmd.Flags().StringVar(&rm.target, "target", "mdt0", "group: mgs or mdtN")
	removeCmd.Flags().Uint64Var(&rm.id, "id", 0, "replica id")

	replaceCmd := &cobra.Command{
		Use:   "replace --target mgs|mdtN --id N (--dir CLUSTER_DIR | --new-id M --addr HOST:PORT) [--json]",
		Short: "Replace a replica: add a new one, then remove the old one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, grp, err := envGroup(cmd, rm.target)
			if err != nil {
				return err
			}
			if rm.id == 0 {
				return fmt.Errorf("--id (the replica to replace) is required")
			}
			if add.id == rm.id {
				return fmt.Errorf("--new-id %d is the replica to replace: the new replica needs a new id (ids are never reused)", add.id)
			}
			add.learner = false
			je := jsonOut(cmd, &e)
			// What remove would refuse is refused before anything is
			// added: afterwards the group would be left with the new
			// replica and the old one both voting.
			peers, _, _, err := cli.GroupPeers(cmd.Context(), e, grp)
			if err != nil {
				return err
			}
			if _, ok := peers[rm.id]; !ok {
				return fmt.Errorf("no replica %d in %s (replicas %s): nothing was added; `nacre replica list --target %s` shows the replicas",
					rm.id, strings.ToUpper(grp.Name), idList(peers), rm.target)
			}
			nid, err := addOne(cmd, e, grp)
			if err != nil {
				return err
			}
			if err := removeOne(cmd, e, grp, rm.id); err != nil {
				now := "both"
				if peers, _, _, perr := cli.GroupPeers(cmd.Context(), e, grp); perr == nil {
					now = "replicas " + idList(peers)
				}
				dirFlag := ""
				if dir != "" {
					dirFlag = " --dir " + dir
				}
				return fmt.Errorf("the replace is half done: replica %d was added to %s and votes, but replica %d was not removed: %w\n"+
					"%s has %s now. To finish the replace: nacre replica remove --target %s --id %d%s; "+
					"to undo it: nacre replica remove --target %s --id %d%s",
					nid, strings.ToUpper(grp.Name), rm.id, err, strings.ToUpper(grp.Name), now, rm.target, rm.id, dirFlag, rm.target, nid, dirFlag)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "replica %d replaced by replica %d\n", rm.id, nid)
			if !asJSON {
				return nil
			}
			return cli.PrintReplicaChange(cmd.Context(), je, grp, cli.ReplicaChange{Action: "replace", Replica: rm.id, NewReplica: nid})
		},
	}
	jsonFlag(replaceCmd)
	replaceCmd.Flags().StringVar(&rm.target, "target", "mdt0", "group: mgs or mdtN")
	replaceCmd.Flags().Uint64Var(&rm.id, "id", 0, "replica to replace")
	replaceCmd.Flags().Uint64Var(&add.id, "new-id", 0, "the new replica's id (default with --dir: the next unused one)")
	replaceCmd.Flags().StringVar(&add.addr, "addr", "", "the new replica's address")
	replaceCmd.Flags().DurationVar(&add.timeout, "timeout", time.Minute, "how long the new replica may take to catch up")

	var tr struct {
		target string
		to     uint64
	}
	transferCmd := &cobra.Command{
		Use:   "transfer --target mgs|mdtN [--to N] [--json]",
		Short: "Hand a group's leadership to another replica (before maintenance)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, grp, err := envGroup(cmd, tr.target)
			if err != nil {
				return err
			}
			je := jsonOut(cmd, &e)
			leader, err := cli.ReplicaTransfer(cmd.Context(), e, grp, tr.to)
			if err != nil || !asJSON {
				return err
			}
			return cli.PrintReplicaChange(cmd.Context(), je, grp, cli.ReplicaChange{Action: "transfer", Leader: leader})
		},
	}
	jsonFlag(transferCmd)
	transferCmd.Flags().StringVar(&tr.target, "target", "mdt0", "group: mgs or mdtN")
	transferCmd.Flags().Uint64Var(&tr.to, "to", 0, "replica to lead (default: the most up-to-date one)")

	top.AddCommand(listCmd, addCmd, removeCmd, replaceCmd, transferCmd)
	root.AddCommand(top)
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

// setReplica fills the replica fields of a new identity from the format
// flags --replica-id, --peers (ID=HOST:PORT,...) and --created. Replicas
// of one MDT must start identical, and the root directory's times come
// from the creation time: every replica gets the same one.
func setReplica(id *target.Identity, rid uint64, peers, created string) error {
	if rid == 0 && peers == "" {
		if created != "" {
			return fmt.Errorf("--created goes with --replica-id and --peers")
		}
		return nil
	}
	id.Created = time.Unix(0, 0).UTC()
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			return fmt.Errorf("--created %q: %v (want RFC 3339, e.g. 2026-11-21T00:00:00Z)", created, err)
		}
		id.Created = t.UTC()
	}
	if rid == 0 || peers == "" {
		return fmt.Errorf("--replica-id and --peers go together")
	}
	if id.Kind == target.OST {
		return fmt.Errorf("OSTs are not replicated")
	}
	id.ReplicaID, id.Peers = rid, map[uint64]string{}
	byAddr := map[string]uint64{}
	for _, p := range strings.Split(peers, ",") {
		k, a, ok := strings.Cut(strings.TrimSpace(p), "=")
		n, err := strconv.ParseUint(k, 10, 64)
		if !ok || err != nil || n == 0 || a == "" {
			return fmt.Errorf("--peers %q: want ID=HOST:PORT,...", peers)
		}
		if _, dup := id.Peers[n]; dup {
			return fmt.Errorf("--peers %q names replica %d twice: each replica once, with its --listen address", peers, n)
		}
		if o, dup := byAddr[a]; dup {
			return fmt.Errorf("--peers %q gives replicas %d and %d the same address %s: each replica is its own process with its own address", peers, o, n, a)
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "0" {
			return fmt.Errorf("--peers %q: replica %d's address %s must be HOST:PORT with a fixed port (the others dial it)", peers, n, a)
		}
		id.Peers[n], byAddr[a] = a, n
	}
	if _, self := id.Peers[rid]; self && len(id.Peers) == 2 {
		return fmt.Errorf("--peers names 2 replicas: two replicas survive no failure (a majority of 2 is 2); use 3 (or 5)")
	}
	if a, self := id.Peers[rid]; self && a != id.Listen {
		return fmt.Errorf("--peers gives replica %d the address %s but --listen is %s", rid, a, id.Listen)
	}
	return nil
}
