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
	}
	cmd := &cobra.Command{Use: "mkdir [-p] PATH...", Short: "Make directories", GroupID: "fs", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m := -1 // 0777 less the umask, as mkdir(1)
			if cmd.Flags().Changed("mode") {
				v, err := strconv.ParseUint(f.mode, 8, 32)
				if err != nil || v > 0o7777 {
					return fmt.Errorf("--mode %q: want an octal mode such as 755", f.mode)
				}
				m = int(v)
			}
			return cli.Mkdir(cmd.Context(), g.env(cmd), args, f.parents, m)
		}}
	cmd.Flags().BoolVarP(&f.parents, "parents", "p", false, "make parents as needed, no error if existing")
	cmd.Flags().StringVarP(&f.mode, "mode", "m", "", "permission bits (octal; default 0777 less the umask, as mkdir)")
	return cmd
}
