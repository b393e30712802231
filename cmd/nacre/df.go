package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newDfCommand is `nacre df`.
func newDfCommand(g *globals) *cobra.Command {
	var f struct {
		json bool
		dir  string
	}
	cmd := &cobra.Command{Use: "df [--json] [--dir DIR] [MOUNTPOINT]", Short: "Show space and inodes per target", GroupID: "fs", Args: cobra.MaximumNArgs(1),
		Long: `Show space and inodes per target of the file system of --mgs (or of the
local cluster in --dir), or of the Nacre mount that MOUNTPOINT (any path
on it) is on, as lfs df does.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			e := g.env(cmd)
			if f.dir != "" && len(args) == 1 {
				return fmt.Errorf("df: give --dir %s or the mount point %s, not both", f.dir, args[0])
			}
			if err := mgsOfDir(cmd, &e, f.dir); err != nil {
				return err
			}
			if len(args) == 1 {
				mgs, err := e.MountMGS(args[0])
				if err != nil {
					return err
				}
				e.MGS = mgs
			}
			return cli.Df(cmd.Context(), e, f.json)
		}}
	cmd.Flags().BoolVar(&f.json, "json", false, "print JSON")
	addClusterDirFlag(cmd, &f.dir)
	return cmd
}
