package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
	"nacre/internal/localcluster"
)

type statusFlags struct {
	json bool
	dir  string
}

// newStatusCommand is `nacre status` (cli.Status; with --dir and the MGS
// down, localcluster.StatusFailed says what runs here).
func newStatusCommand(g *globals) *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:     "status [--json] [--dir DIR]",
		Short:   "Show every target: address, state, last heard, space, pid, metrics URL",
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, f.dir); err != nil {
				return err
			}
			err := cli.Status(cmd.Context(), e, f.json)
			if err != nil && f.dir != "" {
				return localcluster.StatusFailed(cmd.OutOrStdout(), f.dir, e.MGS, err, f.json, selfName())
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	addClusterDirFlag(cmd, &f.dir)
	return cmd
}
