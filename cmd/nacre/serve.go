package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"nacre/internal/obs"
	"nacre/internal/server"
)

type serveFlags struct {
	dir      string
	jsonLogs bool
}

// newServeCommand is `nacre serve`: the server options come from the
// environment (environ.serverOptions).
func newServeCommand(g *globals) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:     "serve --dir DIR",
		Short:   "Run the target in a target directory",
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.dir == "" {
				return fmt.Errorf("--dir is required")
			}
			log := obs.NewLogger(os.Stderr, f.jsonLogs, g.environ.logLevel())
			return server.Run(cmd.Context(), f.dir, g.environ.serverOptions(log))
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", "", "target directory")
	cmd.Flags().BoolVar(&f.jsonLogs, "json-logs", true, "log one JSON object per line")
	return cmd
}
