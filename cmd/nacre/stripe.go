package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newSetstripeCommand is `nacre setstripe`.
func newSetstripeCommand(g *globals) *cobra.Command {
	var s stripeFlags
	cmd := &cobra.Command{Use: "setstripe -c COUNT -S SIZE [-i OST] PATH",
		Short: "Set a directory's default layout, or create a file (or relayout an empty one) with a layout", GroupID: "fs", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			so, err := s.opts(cmd)
			if err != nil {
				return err
			}
			return cli.SetStripe(cmd.Context(), g.env(cmd), args[0], so)
		}}
	s.add(cmd)
	return cmd
}

// newGetstripeCommand is `nacre getstripe`.
func newGetstripeCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "getstripe [--json] PATH", Short: "Show a file's layout (or a directory's default)", GroupID: "fs", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.GetStripe(cmd.Context(), g.env(cmd), args[0], asJSON)
		}}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: stripe_count, stripe_size, objects [{ost, id}]")
	return cmd
}

// newGetdirstripeCommand is `nacre getdirstripe`.
func newGetdirstripeCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{Use: "getdirstripe [--json] DIR", Short: "Show which MDT holds a directory's entries (lfs getdirstripe)", GroupID: "fs", Args: cobra.ExactArgs(1),
		Long: `Show which MDT holds a directory's entries, as Lustre's lfs getdirstripe:
a directory that is not striped has stripe_count 0 and stripe_index the
MDT that holds it (nacre mkdir -i makes one on another MDT).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.GetDirStripe(cmd.Context(), g.env(cmd), args[0], asJSON)
		}}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON: stripe_count, stripe_index, hash, stripes [{mdt, fid}]")
	return cmd
}
