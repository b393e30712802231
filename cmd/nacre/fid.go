package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newPath2fidCommand is `nacre path2fid`.
func newPath2fidCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "path2fid [--json] PATH...", Short: "Print the FID of paths", GroupID: "fs", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Path2Fid(cmd.Context(), g.env(cmd), args, asJSON)
		}}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print JSON: {"path", "fid"} for one path, an array for several`)
	return cmd
}

// newFid2pathCommand is `nacre fid2path`.
func newFid2pathCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "fid2path [--json] [MOUNTPOINT] FID...", Short: "Print every path of FIDs (under MOUNTPOINT, or the mount the current directory is on)", GroupID: "fs",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Fid2Path(cmd.Context(), g.env(cmd), args, asJSON)
		}}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print JSON: {"fid", "paths": [...]} for one FID, an array for several`)
	return cmd
}
