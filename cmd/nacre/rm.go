package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newRmCommand is `nacre rm`.
func newRmCommand(g *globals) *cobra.Command {
	var o cli.RmOpts
	cmd := &cobra.Command{Use: "rm [-r] [-f] PATH...", Short: "Remove files (and directories with -r)", GroupID: "fs",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !o.Force { // rm -f with no operand is no error, as rm(1)
				return fmt.Errorf("rm: give the paths to remove")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return cli.Rm(cmd.Context(), g.env(cmd), args, o)
		}}
	cmd.Flags().BoolVarP(&o.Recursive, "recursive", "r", false, "remove directories and their contents")
	cmd.Flags().BoolVarP(&o.Force, "force", "f", false, "a path that does not exist is no error")
	return cmd
}
