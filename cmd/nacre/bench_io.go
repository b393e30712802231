package main

import (
	"fmt"
	"nacre/internal/bench"
	"nacre/internal/cli"
	"nacre/internal/layout"
	"strings"

	"github.com/spf13/cobra"
)

// newBenchIOCommand is `nacre bench io`.
func newBenchIOCommand(g *globals) *cobra.Command {
	var o struct {
		workers                                    int
		size, block, pattern, mode, counts, ssizes string
		path, plot                                 string
		json, drop                                 bool
	}
	cmd := &cobra.Command{
		Use:   "io [--workers N] [--size 256M] [--block 1M] [--pattern seq,random] [--mode fpp,shared] [--stripe-count 1,2,-1] [--stripe-size 1M] [--path DIR]",
		Short: "IOR/bonnie-like sequential and random write and read, file per worker or shared, per-OST throughput",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			size, err := layout.ParseSize(o.size)
			if err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			block, err := layout.ParseSize(o.block)
			if err != nil {
				return fmt.Errorf("--block: %w", err)
			}
			io := bench.IOOptions{MGS: g.mgs, TLS: g.creds, FollowerReads: g.environ.followerReads(), Path: o.path, Workers: o.workers, Size: size, Block: block,
				Patterns: strings.Split(o.pattern, ","), Modes: strings.Split(o.mode, ","), DropCaches: o.drop}
			if o.counts != "" {
				if io.StripeCounts, err = parseInts(o.counts); err != nil {
					return fmt.Errorf("--stripe-count: %w", err)
				}
			}
			if o.ssizes != "" {
				if io.StripeSizes, err = parseSizes(o.ssizes); err != nil {
					return fmt.Errorf("--stripe-size: %w", err)
				}
			}
			if o.path != "" && !cmd.Flags().Changed("mgs") {
				io.MGS = ""
			}
			if !o.json {
				io.Progress = cmd.ErrOrStderr()
			}
			if o.plot != "" {
				io.Timeline = &bench.Timeline{MGS: io.MGS, Unit: "bytes"}
			}
			r, err := bench.RunIO(cmd.Context(), io)
			if err != nil {
				return err
			}
			if o.plot != "" {
				if _, err := bench.WritePlot(o.plot, "nacre bench io: "+r.Target, "bytes", io.Timeline.Points()); err != nil {
					return err
				}
			}
			if o.json {
				return cli.JSON(cmd.OutOrStdout(), r)
			}
			bench.PrintIO(cmd.OutOrStdout(), r)
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.workers, "workers", 1, "concurrent workers")
	f.StringVar(&o.size, "size", "256M", "bytes per worker")
	f.StringVar(&o.block, "block", "1M", "bytes per request")
	f.StringVar(&o.pattern, "pattern", "seq", "seq, random or seq,random")
	f.StringVar(&o.mode, "mode", "fpp", "fpp (a file per worker), shared (one file), or fpp,shared")
	f.StringVar(&o.counts, "stripe-count", "", "stripe counts to try, e.g. 1,2,-1 (client library)")
	f.StringVar(&o.ssizes, "stripe-size", "", "stripe sizes to try, e.g. 64K,1M,4M (client library)")
	f.StringVar(&o.path, "path", "", "run with system calls in this directory of a mounted file system")
	f.BoolVar(&o.drop, "drop-caches", false, "drop the page cache before each read phase (root)")
	f.BoolVar(&o.json, "json", false, "print JSON")
	f.StringVar(&o.plot, "plot", "", "draw the per-second timeline to FILE.png")
	return cmd
}
