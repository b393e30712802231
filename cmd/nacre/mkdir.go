package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newMkdirCommand is `nacre mkdir`.
func newMkdirCommand(g *globals) *cobra.Command {
	var f struct {
		parents bool
		mode    string
		mdt     int
	}
	cmd := &cobra.Command{Use: "mkdir [-p] [-i MDT] PATH...", Short: "Make directories (-i: on another MDT, a remote directory)", GroupID: "fs", Args: cobra.MinimumNArgs(1),
		Long: `Make directories. With -i INDEX each directory named (not the parents -p
makes) is made on MDT INDEX, as Lustre's lfs mkdir -i: a remote directory
when its parent is on another MDT. Its files and subdirectories stay on
that MDT unless made remote again. -i -1 picks the MDT with the most free
inodes (the lowest index of those tied), for spreading users' or jobs'
trees over the MDTs.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var on *int
			if cmd.Flags().Changed("mdt-index") {
				if f.mdt < -1 || f.mdt > 0xffff {
					return fmt.Errorf("-i %d: an MDT index is 0 or more, or -1 for the MDT with the most free inodes (nacre df lists the MDTs)", f.mdt)
				}
				on = &f.mdt
			}
			m := -1 // 0777 less the umask, as mkdir(1)
			if cmd.Flags().Changed("mode") {
				v, err := strconv.ParseUint(f.mode, 8, 32)
				if err != nil || v > 0o7777 {
					return fmt.Errorf("--mode %q: want an octal mode such as 755", f.mode)
				}
				m = int(v)
			}
			return cli.Mkdir(cmd.Context(), g.env(cmd), args, f.parents, m, on)
		}}
	cmd.Flags().BoolVarP(&f.parents, "parents", "p", false, "make parents as needed, no error if existing")
	cmd.Flags().StringVarP(&f.mode, "mode", "m", "", "permission bits (octal; default 0777 less the umask, as mkdir)")
	cmd.Flags().IntVarP(&f.mdt, "mdt-index", "i", 0, "make each directory on this MDT (a remote directory if its parent is on another); -1: the MDT with the most free inodes")
	return cmd
}
