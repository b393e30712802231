package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newPutCommand is `nacre put`.
func newPutCommand(g *globals) *cobra.Command {
	var s stripeFlags
	cmd := &cobra.Command{Use: "put LOCAL PATH", Short: "Copy a local file (- for standard input) into the file system", GroupID: "fs", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			so, err := s.opts(cmd)
			if err != nil {
				return err
			}
			return cli.Put(cmd.Context(), g.env(cmd), args[0], args[1], so)
		}}
	s.add(cmd)
	return cmd
}
