package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newMvCommand is `nacre mv`.
func newMvCommand(g *globals) *cobra.Command {
	return &cobra.Command{Use: "mv SOURCE DEST | mv SOURCE... DIRECTORY", Short: "Rename or move files or directories", GroupID: "fs", Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Mv(cmd.Context(), g.env(cmd), args)
		}}
}

// newLnCommand is `nacre ln`.
func newLnCommand(g *globals) *cobra.Command {
	var symbolic bool
	cmd := &cobra.Command{Use: "ln [-s] TARGET LINK | ln [-s] TARGET... DIRECTORY", Short: "Make hard links (or symbolic links with -s)", GroupID: "fs", Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Ln(cmd.Context(), g.env(cmd), args, symbolic)
		}}
	cmd.Flags().BoolVarP(&symbolic, "symbolic", "s", false, "make a symbolic link")
	return cmd
}
