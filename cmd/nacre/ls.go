package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newLsCommand is `nacre ls`.
func newLsCommand(g *globals) *cobra.Command {
	var f cli.LsOptions
	cmd := &cobra.Command{Use: "ls [-l] [-n] [--json] [PATH]", Short: "List a directory (default: the current one on a Nacre mount, else /)", GroupID: "fs", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := ""
			if len(args) == 1 {
				p = args[0]
			}
			return cli.Ls(cmd.Context(), g.env(cmd), p, f)
		}}
	cmd.Flags().BoolVarP(&f.Long, "long", "l", false, "long listing: owners and groups by name where this machine knows them")
	cmd.Flags().BoolVarP(&f.Numeric, "numeric-uid-gid", "n", false, "long listing with owners and groups by number")
	cmd.Flags().BoolVar(&f.JSON, "json", false, "print JSON: an array of {name, type, mode, nlink, size, uid, gid, user, group, mtime, fid}")
	return cmd
}
