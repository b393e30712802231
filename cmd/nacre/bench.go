package main

import (
	"time"

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

func addStatsCommands(root *cobra.Command, g *globals) {
	var st struct {
		json     bool
		interval time.Duration
	}
	stats := &cobra.Command{
		Use:     "stats [--json] [TARGET]",
		Short:   "Per-target operation counts, rates and latencies, bytes and queue depths",
		GroupID: "admin",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			only := ""
			if len(args) == 1 {
				only = args[0]
			}
			return cli.Stats(cmd.Context(), g.env(cmd), only, st.interval, st.json)
		},
	}
	stats.Flags().BoolVar(&st.json, "json", false, "print JSON")
	stats.Flags().DurationVar(&st.interval, "interval", time.Second, "rates are measured over this interval")
	root.AddCommand(stats)

	var tp struct {
		interval time.Duration
		n        int
	}
	top := &cobra.Command{
		Use:     "top",
		Short:   "Live per-target rates in the terminal",
		GroupID: "admin",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Top(cmd.Context(), g.env(cmd), tp.interval, tp.n)
		},
	}
	top.Flags().DurationVar(&tp.interval, "interval", time.Second, "refresh interval")
	top.Flags().IntVarP(&tp.n, "iterations", "n", 0, "stop after N refreshes (0: until Ctrl-C)")
	root.AddCommand(top)
}
