package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newStatCommand is `nacre stat`.
func newStatCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "stat [--json] PATH...", Short: "Show files' attributes and FIDs", GroupID: "fs", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Stat(cmd.Context(), g.env(cmd), args, asJSON)
		}}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (an object for one path, an array for several)")
	return cmd
}
