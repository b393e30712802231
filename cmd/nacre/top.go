package main

import (
	"time"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newTopCommand is `nacre top`.
func newTopCommand(g *globals) *cobra.Command {
	var tp struct {
		interval time.Duration
		n        int
		dir      string
	}
	cmd := &cobra.Command{
		Use:     "top [--dir DIR]",
		Short:   "Live per-target rates in the terminal",
		GroupID: "admin",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, tp.dir); err != nil {
				return err
			}
			return cli.Top(cmd.Context(), e, tp.interval, tp.n)
		},
	}
	cmd.Flags().DurationVar(&tp.interval, "interval", time.Second, "refresh interval (at least 100ms)")
	cmd.Flags().IntVarP(&tp.n, "iterations", "n", 0, "stop after N refreshes (0: until Ctrl-C)")
	addClusterDirFlag(cmd, &tp.dir)
	return cmd
}
