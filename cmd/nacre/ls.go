package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newLsCommand is `nacre ls`.
func newLsCommand(g *globals) *cobra.Command {
	var f struct{ long, json bool }
	cmd := &cobra.Command{Use: "ls [-l] [--json] [PATH]", Short: "List a directory (default: the current one on a Nacre mount, else /)", GroupID: "fs", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := ""
			if len(args) == 1 {
				p = args[0]
			}
			return cli.Ls(cmd.Context(), g.env(cmd), p, f.long, f.json)
		}}
	cmd.Flags().BoolVarP(&f.long, "long", "l", false, "long listing")
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON: an array of {name, type, mode, nlink, size, uid, gid, mtime, fid}")
	return cmd
}
