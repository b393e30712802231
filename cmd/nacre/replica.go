package main

import (
	"time"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
	"nacre/internal/localcluster"
)

// newReplicaCommand is `nacre replica list|add|remove|replace|transfer`
// (internal/cli, with localcluster.ReplicaHost for --dir).
func newReplicaCommand(g *globals) *cobra.Command {
	top := &cobra.Command{
		Use:   "replica",
		Short: "Replicas of the MGS and the MDTs (Raft groups): list, add, remove, replace, transfer leadership",
		Long: `The MGS and every MDT can be Raft groups of several replicas, each its own
process (nacre up --replicas 3). These commands change a group online.

With --dir CLUSTER_DIR (a local cluster), add formats and starts the new
replica itself (in CLUSTER_DIR/mdtI-rN for --target mdtI, mgs-rN for mgs),
and remove stops the old one and moves its directory aside. Elsewhere,
format and start the new replica on its host first:

  nacre format --type mdt --index 0 --replica-id 4 --peers 1=h1:p,2=h2:p,3=h3:p --listen h4:p ...
  nacre serve --dir DIR
  nacre replica add --target mdt0 --id 4 --addr h4:p

A new replica joins as a learner (it does not vote) and receives a
snapshot, and becomes a voter once it has caught up.`,
		GroupID: "admin",
	}
	top.PersistentFlags().String("dir", "", "local cluster directory (its MGS; add and remove manage the replica processes)")
	top.AddCommand(newReplicaListCommand(g), newReplicaAddCommand(g), newReplicaRemoveCommand(g), newReplicaReplaceCommand(g), newReplicaTransferCommand(g))
	return top
}

// localcluster.ReplicaHost makes the replicas of --dir.
var _ cli.ReplicaHost = localcluster.ReplicaHost{}

// replicaEnv is the environment of a replica command: with --dir, the
// MGS of that local cluster, and the host that makes and retires its
// replicas (nil without --dir).
func replicaEnv(cmd *cobra.Command, g *globals) (cli.Env, cli.ReplicaHost, error) {
	e := g.env(cmd)
	dir, _ := cmd.Flags().GetString("dir")
	if dir == "" {
		return e, nil, nil
	}
	a, err := localcluster.MGSAddr(dir)
	if err != nil {
		return e, nil, err
	}
	e.MGS = a
	return e, localcluster.ReplicaHost{ClusterDir: dir}, nil
}

// replicaJSONFlag is --json of a change: the change and the group's
// replicas after it, as one JSON document (cli.ReplicaChange).
func replicaJSONFlag(c *cobra.Command, p *bool) {
	c.Flags().BoolVar(p, "json", false, "print the change and the group's replicas after it as JSON (messages go to standard error)")
}

func newReplicaListCommand(g *globals) *cobra.Command {
	var f struct {
		target string
		json   bool
	}
	cmd := &cobra.Command{
		Use:   "list [--target mgs|mdtN] [--json]",
		Short: "Show every replica: role, state, term, applied index, the leader's view of its log, snapshots",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, _, err := replicaEnv(cmd, g)
			if err != nil {
				return err
			}
			return cli.ReplicaList(cmd.Context(), e, f.target, f.json)
		},
	}
	cmd.Flags().StringVar(&f.target, "target", "", "one group: mgs or mdtN (default: all)")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	return cmd
}

func newReplicaAddCommand(g *globals) *cobra.Command {
	var o cli.ReplicaAddOptions
	cmd := &cobra.Command{
		Use:   "add --target mgs|mdtN (--dir CLUSTER_DIR | --id N --addr HOST:PORT) [--learner] [--json]",
		Short: "Add a replica to a group (it catches up by snapshot, then votes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, host, err := replicaEnv(cmd, g)
			if err != nil {
				return err
			}
			o.Host = host
			return cli.ReplicaAdd(cmd.Context(), e, o)
		},
	}
	replicaJSONFlag(cmd, &o.JSON)
	cmd.Flags().StringVar(&o.Target, "target", "mdt0", "group: mgs or mdtN")
	cmd.Flags().Uint64Var(&o.ID, "id", 0, "replica id (never reused; default with --dir: the next unused one)")
	cmd.Flags().StringVar(&o.Addr, "addr", "", "the new replica's address (its --listen)")
	cmd.Flags().BoolVar(&o.Learner, "learner", false, "keep it a learner (no vote)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", time.Minute, "how long it may take to catch up")
	return cmd
}

func newReplicaRemoveCommand(g *globals) *cobra.Command {
	var o cli.ReplicaRemoveOptions
	cmd := &cobra.Command{
		Use:   "remove --target mgs|mdtN --id N [--json]",
		Short: "Remove a replica from a group (a leader hands over first)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, host, err := replicaEnv(cmd, g)
			if err != nil {
				return err
			}
			o.Host = host
			return cli.ReplicaRemove(cmd.Context(), e, o)
		},
	}
	replicaJSONFlag(cmd, &o.JSON)
	cmd.Flags().StringVar(&o.Target, "target", "mdt0", "group: mgs or mdtN")
	cmd.Flags().Uint64Var(&o.ID, "id", 0, "replica id")
	return cmd
}

func newReplicaReplaceCommand(g *globals) *cobra.Command {
	var o cli.ReplicaReplaceOptions
	cmd := &cobra.Command{
		Use:   "replace --target mgs|mdtN --id N (--dir CLUSTER_DIR | --new-id M --addr HOST:PORT) [--json]",
		Short: "Replace a replica: add a new one, then remove the old one",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, host, err := replicaEnv(cmd, g)
			if err != nil {
				return err
			}
			o.Host = host
			return cli.ReplicaReplace(cmd.Context(), e, o)
		},
	}
	replicaJSONFlag(cmd, &o.JSON)
	cmd.Flags().StringVar(&o.Target, "target", "mdt0", "group: mgs or mdtN")
	cmd.Flags().Uint64Var(&o.ID, "id", 0, "replica to replace")
	cmd.Flags().Uint64Var(&o.NewID, "new-id", 0, "the new replica's id (default with --dir: the next unused one)")
	cmd.Flags().StringVar(&o.Addr, "addr", "", "the new replica's address")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", time.Minute, "how long the new replica may take to catch up")
	return cmd
}

func newReplicaTransferCommand(g *globals) *cobra.Command {
	var o cli.ReplicaTransferOptions
	cmd := &cobra.Command{
		Use:   "transfer --target mgs|mdtN [--to N] [--json]",
		Short: "Hand a group's leadership to another replica (before maintenance)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, _, err := replicaEnv(cmd, g)
			if err != nil {
				return err
			}
			return cli.ReplicaTransfer(cmd.Context(), e, o)
		},
	}
	replicaJSONFlag(cmd, &o.JSON)
	cmd.Flags().StringVar(&o.Target, "target", "mdt0", "group: mgs or mdtN")
	cmd.Flags().Uint64Var(&o.To, "to", 0, "replica to lead (default: the most up-to-date one)")
	return cmd
}
