package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
	"nacre/internal/localcluster"
)

type statusFlags struct {
	json, prometheus, web bool
	dir                   string
}

// newStatusCommand is `nacre status` (cli.Status; with --dir and the MGS
// down, localcluster.StatusFailed says what runs here; --prometheus:
// cli.StatusPrometheus).
func newStatusCommand(g *globals) *cobra.Command {
	var f statusFlags
	cmd := &cobra.Command{
		Use:     "status [--json | --prometheus] [--web] [--dir DIR]",
		Short:   "Show every target: address, state, last heard, space, pid, metrics URL",
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, f.dir); err != nil {
				return err
			}
			var err error
			if f.prometheus {
				err = cli.StatusPrometheus(cmd.Context(), e)
			} else {
				err = cli.Status(cmd.Context(), e, f.json, f.web)
			}
			if err != nil && f.dir != "" {
				return localcluster.StatusFailed(cmd.OutOrStdout(), f.dir, e.MGS, err, f.json, selfName())
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	cmd.Flags().BoolVar(&f.prometheus, "prometheus", false, "print a Prometheus scrape configuration (YAML) for the cluster's metrics")
	cmd.Flags().BoolVar(&f.web, "web", false, "print the address of the MGS's live web page of the cluster (served on loopback only)")
	cmd.MarkFlagsMutuallyExclusive("json", "prometheus")
	cmd.MarkFlagsMutuallyExclusive("web", "prometheus")
	addClusterDirFlag(cmd, &f.dir)
	return cmd
}
