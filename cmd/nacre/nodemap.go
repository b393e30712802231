package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newNodemapCommand is `nacre nodemap [set|remove]` (internal/cli).
func newNodemapCommand(g *globals) *cobra.Command {
	var f struct {
		dir  string
		json bool
	}
	top := &cobra.Command{
		Use:   "nodemap [--json] [--dir CLUSTER_DIR]",
		Short: "Identity mapping per client certificate (Lustre's nodemap): list, set, remove",
		Long: `A nodemap says how the MDSs treat the user and group ids that the requests
of one client certificate carry (its common name, as nacre cert add
--client NAME gave it; "*" is every client certificate without a nodemap
of its own):

  root squash    uid 0 and gid 0 become the squash ids (--squash-root;
                 Lustre's admin=0); without it root is root
  trusted        other ids are used as sent (--trusted)
  id maps        or they are mapped, CLIENT:FS (--uid-map, --gid-map), and
                 ids no pair names become the squash ids, or are refused
                 with EACCES (--deny-unknown)

The MDSs map every request's ids before any permission check and map the
owners in their replies back, so ls -l on the client shows its own ids. A
change takes effect on the MDSs within a few seconds. Node and admin
certificates are mapped only by a nodemap that names them. The nodemaps
live in the MGS's replicated configuration, and changing them needs an
admin certificate. A cluster without TLS has no certificate names and
refuses nodemaps: format it with TLS (nacre up --tls).

Without a subcommand: list the nodemaps.`,
		GroupID: "admin",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, f.dir); err != nil {
				return err
			}
			return cli.NodemapList(cmd.Context(), e, f.json)
		},
	}
	addClusterDirFlag(top, &f.dir)
	top.Flags().BoolVar(&f.json, "json", false, "print JSON")
	top.AddCommand(newNodemapSetCommand(g), newNodemapRemoveCommand(g))
	return top
}

func newNodemapSetCommand(g *globals) *cobra.Command {
	var o cli.NodemapSetOptions
	var dir string
	var squashUID, squashGID uint32
	cmd := &cobra.Command{
		Use:   "set --client NAME [--squash-root] [--squash-uid N] [--squash-gid N] [--trusted | --uid-map C:F,... --gid-map C:F,... [--deny-unknown]] [--json]",
		Short: "Set (add or replace) the nodemap of a client certificate",
		Long: `Set the nodemap of the client certificate NAME ("*": every client
certificate without its own), replacing the one it had: what the flags
give is the whole nodemap. Examples:

  nacre nodemap set --client alice --squash-root --trusted
      root on alice is 65534, every other id is used as sent
  nacre nodemap set --client lab --squash-root --uid-map 1000:5000 --gid-map 100:500 --deny-unknown
      uid 1000 on lab is 5000 on the file system (and shown as 1000 there),
      root is 65534, and a request from any unmapped uid or gid is refused`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, dir); err != nil {
				return err
			}
			if cmd.Flags().Changed("squash-uid") {
				o.SquashUID = &squashUID
			}
			if cmd.Flags().Changed("squash-gid") {
				o.SquashGID = &squashGID
			}
			return cli.NodemapSet(cmd.Context(), e, o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Client, "client", "", `the client certificate's name (its common name); "*" for every client certificate without its own`)
	fl.BoolVar(&o.SquashRoot, "squash-root", false, "uid 0 and gid 0 become the squash ids (Lustre's admin=0)")
	fl.Uint32Var(&squashUID, "squash-uid", 0, "the uid of a squashed root and of unmapped uids (default 65534)")
	fl.Uint32Var(&squashGID, "squash-gid", 0, "the gid of a squashed root and of unmapped gids (default 65534)")
	fl.BoolVar(&o.Trusted, "trusted", false, "use ids other than 0 as sent")
	fl.StringVar(&o.UIDMap, "uid-map", "", "map uids: CLIENT:FS pairs, comma-separated (like 1000:5000,1001:5001)")
	fl.StringVar(&o.GIDMap, "gid-map", "", "map gids: CLIENT:FS pairs, comma-separated")
	fl.BoolVar(&o.DenyUnknown, "deny-unknown", false, "refuse (EACCES) a request whose uid or gid no pair maps, instead of squashing it")
	fl.BoolVar(&o.JSON, "json", false, "print every nodemap after the change as JSON")
	addClusterDirFlag(cmd, &dir)
	cmd.MarkFlagRequired("client")
	return cmd
}

func newNodemapRemoveCommand(g *globals) *cobra.Command {
	var f struct {
		client, dir string
		json        bool
	}
	cmd := &cobra.Command{
		Use:   "remove --client NAME [--json]",
		Short: "Remove the nodemap of a client certificate (its ids are then used as sent, or by the \"*\" nodemap)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, f.dir); err != nil {
				return err
			}
			return cli.NodemapRemove(cmd.Context(), e, f.client, f.json)
		},
	}
	cmd.Flags().StringVar(&f.client, "client", "", "the client certificate's name")
	cmd.Flags().BoolVar(&f.json, "json", false, "print every nodemap after the change as JSON")
	addClusterDirFlag(cmd, &f.dir)
	cmd.MarkFlagRequired("client")
	return cmd
}
