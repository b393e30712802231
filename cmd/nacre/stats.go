package main

import (
	"time"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newStatsCommand is `nacre stats`.
func newStatsCommand(g *globals) *cobra.Command {
	var st struct {
		json     bool
		interval time.Duration
		dir      string
	}
	cmd := &cobra.Command{
		Use:     "stats [--json] [--dir DIR] [TARGET]",
		Short:   "Per-target operation counts, rates and latencies, bytes and queue depths",
		GroupID: "admin",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			only := ""
			if len(args) == 1 {
				only = args[0]
			}
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, st.dir); err != nil {
				return err
			}
			return cli.Stats(cmd.Context(), e, only, st.interval, st.json)
		},
	}
	cmd.Flags().BoolVar(&st.json, "json", false, "print JSON")
	cmd.Flags().DurationVar(&st.interval, "interval", time.Second, "rates are measured over this interval (at least 100ms)")
	addClusterDirFlag(cmd, &st.dir)
	return cmd
}
