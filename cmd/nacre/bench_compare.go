package main

import (
	"fmt"
	"nacre/internal/bench"
	"nacre/internal/cli"
	"nacre/internal/layout"
	"strings"

	"github.com/spf13/cobra"
)

// newBenchCompareCommand is `nacre bench compare`.
func newBenchCompareCommand() *cobra.Command {
	var o struct {
		a, b, bench, size, block, pattern, mode, plot string
		rounds, workers, items                        int
		shared, json                                  bool
	}
	cmd := &cobra.Command{
		Use:   "compare --a TARGET --b TARGET [--bench md|io] [--rounds N] [benchmark options] [--plot FILE.png]",
		Short: "Run one benchmark against two targets in alternation and print the ratios with their spread",
		Long: `Targets are path:DIR (a mounted file system: a Nacre mount, the local disk,
MooseFS ...) or mgs:HOST:PORT (a Nacre cluster through the client library).
The targets run alternately (A B, B A, ...) for --rounds rounds so that drift
on a noisy machine hits both alike; the table shows each figure's median and
the median, smallest and largest ratio A/B.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := bench.ParseTarget(o.a)
			if err != nil {
				return fmt.Errorf("--a: %w", err)
			}
			b, err := bench.ParseTarget(o.b)
			if err != nil {
				return fmt.Errorf("--b: %w", err)
			}
			size, err := layout.ParseSize(o.size)
			if err != nil {
				return err
			}
			block, err := layout.ParseSize(o.block)
			if err != nil {
				return err
			}
			co := bench.CompareOptions{A: a, B: b, Rounds: o.rounds, Bench: o.bench,
				MD: bench.MDOptions{Workers: o.workers, Items: o.items, SharedDir: o.shared},
				IO: bench.IOOptions{Workers: o.workers, Size: size, Block: block, Patterns: strings.Split(o.pattern, ","), Modes: strings.Split(o.mode, ",")}}
			if !o.json {
				co.Progress = cmd.ErrOrStderr()
			}
			co.Timeline = o.plot != ""
			r, err := bench.RunCompare(cmd.Context(), co)
			if err != nil {
				return err
			}
			if o.plot != "" {
				unit := "ops"
				if o.bench == "io" {
					unit = "bytes"
				}
				if _, err := bench.WritePlot(o.plot, fmt.Sprintf("nacre bench compare: %s vs %s", r.A, r.B), unit, r.Points); err != nil {
					return err
				}
			}
			if o.json {
				return cli.JSON(cmd.OutOrStdout(), r)
			}
			bench.PrintCompare(cmd.OutOrStdout(), r)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.a, "a", "", "first target (path:DIR or mgs:HOST:PORT)")
	f.StringVar(&o.b, "b", "", "second target")
	f.StringVar(&o.bench, "bench", "md", "benchmark: md or io")
	f.IntVar(&o.rounds, "rounds", 3, "rounds (each runs both targets)")
	f.IntVar(&o.workers, "workers", 1, "workers")
	f.IntVar(&o.items, "items", 1000, "md: items per worker")
	f.BoolVar(&o.shared, "shared-dir", false, "md: one shared directory")
	f.StringVar(&o.size, "size", "64M", "io: bytes per worker")
	f.StringVar(&o.block, "block", "1M", "io: bytes per request")
	f.StringVar(&o.pattern, "pattern", "seq", "io: seq, random or both")
	f.StringVar(&o.mode, "mode", "fpp", "io: fpp, shared or both")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.plot, "plot", "", "draw every run's per-second timeline, one after the other, to FILE.png")
	return cmd
}
