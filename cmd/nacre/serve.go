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
	insecure bool
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
			o := g.environ.serverOptions(log)
			o.Insecure = f.insecure
			return server.Run(cmd.Context(), f.dir, o)
		},
	}
	cmd.Flags().StringVar(&f.dir, "dir", "", "target directory")
	cmd.Flags().BoolVar(&f.jsonLogs, "json-logs", true, "log one JSON object per line")
	cmd.Flags().BoolVar(&f.insecure, "insecure", false, "serve without TLS on an address other than loopback (refused otherwise): only on a network that only trusted nodes reach")
	return cmd
}
