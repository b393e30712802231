package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"nacre/internal/bench"
	"nacre/internal/cli"
)

func addBenchCommands(root *cobra.Command, g *globals) {
	benchCmd := &cobra.Command{Use: "bench", Short: "Benchmarks (md: metadata)", GroupID: "admin"}
	var md struct {
		workers, items, stripes int
		shared, json            bool
	}
	mdCmd := &cobra.Command{
		Use:   "md [--workers N] [--items N] [--shared-dir] [--json]",
		Short: "mdtest-style file create, stat and remove through the client library",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if g.mgs == "" {
				return fmt.Errorf("no MGS address: pass --mgs HOST:PORT or set NACRE_MGS")
			}
			o := bench.MDOptions{MGS: g.mgs, Workers: md.workers, Items: md.items, SharedDir: md.shared, StripeCount: md.stripes}
			if !md.json {
				o.Progress = cmd.ErrOrStderr()
			}
			r, err := bench.RunMD(cmd.Context(), o)
			if err != nil {
				return err
			}
			if md.json {
				return cli.JSON(cmd.OutOrStdout(), r)
			}
			bench.PrintMD(cmd.OutOrStdout(), r)
			return nil
		},
	}
	mdCmd.Flags().IntVar(&md.workers, "workers", 1, "concurrent workers (each its own client, like mdtest ranks)")
	mdCmd.Flags().IntVar(&md.items, "items", 1000, "files per worker")
	mdCmd.Flags().BoolVar(&md.shared, "shared-dir", false, "all workers in one directory (default: one each)")
	mdCmd.Flags().IntVar(&md.stripes, "stripe-count", 0, "stripe count of the files (0: file system default)")
	mdCmd.Flags().BoolVar(&md.json, "json", false, "print JSON")
	benchCmd.AddCommand(mdCmd)
	root.AddCommand(benchCmd)
}
