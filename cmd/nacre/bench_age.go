package main

import (
	"fmt"
	"nacre/internal/bench"
	"nacre/internal/cli"
	"nacre/internal/layout"

	"github.com/spf13/cobra"
)

// newBenchAgeCommand is `nacre bench age`.
func newBenchAgeCommand(g *globals) *cobra.Command {
	var o struct {
		dest, median, maxSize, ssize, plot string
		random, local, json                bool
		files, stripes, workers            int
		seed                               int64
		darshan                            []string
	}
	cmd := &cobra.Command{
		Use:   "age --dest PATH (--random --files N | --darshan LOG...)",
		Short: "Age a file system as seed 000 did: random trees, or the files of real Darshan logs",
		Long: `Fills --dest with files the way the LFSCK performance study aged Lustre:
--random --files N makes random trees (depth 1-10, 1-100 files per directory,
log-normal sizes around --median-size, capped at --max-size); --darshan LOG...
recreates the files of Darshan logs (sizes above the cap are reduced, the
metadata is kept; needs the PyPI package darshan). Files are striped over all
OSTs unless --stripe-count says otherwise. --dest is a path in the Nacre file
system of --mgs, or with --local a directory of any mounted file system.
An interrupted run continues where it stopped when run again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			median, err := layout.ParseSize(o.median)
			if err != nil {
				return fmt.Errorf("--median-size: %w", err)
			}
			capSize, err := layout.ParseSize(o.maxSize)
			if err != nil {
				return fmt.Errorf("--max-size: %w", err)
			}
			var ss uint64
			if o.ssize != "" {
				if ss, err = layout.ParseSize(o.ssize); err != nil {
					return fmt.Errorf("--stripe-size: %w", err)
				}
			}
			ao := bench.AgeOptions{MGS: g.mgs, FollowerReads: g.environ.followerReads(), Dest: o.dest, Local: o.local, Random: o.random, Files: o.files, MedianSize: median,
				Darshan: o.darshan, MaxSize: capSize, StripeCount: o.stripes, StripeSize: ss, Seed: o.seed, Workers: o.workers,
				Python: g.environ.get("NACRE_PYTHON")}
			if !o.json {
				ao.Progress = cmd.ErrOrStderr()
			}
			if o.plot != "" {
				ao.Timeline = &bench.Timeline{MGS: g.mgs, Unit: "files"}
			}
			r, err := bench.RunAge(cmd.Context(), ao)
			if err != nil {
				return err
			}
			if o.plot != "" {
				if _, err := bench.WritePlot(o.plot, "nacre bench age: "+r.Dest, "files", ao.Timeline.Points()); err != nil {
					return err
				}
			}
			if o.json {
				return cli.JSON(cmd.OutOrStdout(), r)
			}
			bench.PrintAge(cmd.OutOrStdout(), r)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dest, "dest", "", "directory to fill")
	f.BoolVar(&o.local, "local", false, "--dest is a directory of a mounted file system (not a Nacre path)")
	f.BoolVar(&o.random, "random", false, "random trees")
	f.IntVar(&o.files, "files", 0, "number of files (--random)")
	f.StringSliceVar(&o.darshan, "darshan", nil, "Darshan log files to recreate")
	f.StringVar(&o.median, "median-size", "32K", "median file size (--random)")
	f.StringVar(&o.maxSize, "max-size", "8M", "cap on file sizes (seed 000: 8 MiB)")
	f.IntVar(&o.stripes, "stripe-count", -1, "stripe count of the files (-1: all OSTs)")
	f.StringVar(&o.ssize, "stripe-size", "1M", "stripe size of the files")
	f.Int64Var(&o.seed, "seed", 1, "random seed (the same seed makes the same tree)")
	f.IntVar(&o.workers, "workers", 8, "files made concurrently")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.plot, "plot", "", "draw the per-second timeline to FILE.png")
	return cmd
}
