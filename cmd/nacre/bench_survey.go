package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"nacre/internal/bench"
	"nacre/internal/cli"
)

// newBenchSurveyCommand is `nacre bench survey`.
func newBenchSurveyCommand(g *globals) *cobra.Command {
	var sv struct {
		mdt     uint32
		threads string
		files   int
		json    bool
		plot    string
	}
	cmd := &cobra.Command{
		Use:   "survey [--mdt N] [--threads 1,2,4,...] [--files N] [--json] [--plot FILE.png]",
		Short: "mds-survey: drive one MDT directly with create, lookup, getattr, setattr, destroy at growing thread counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			threads, err := parseInts(sv.threads)
			if err != nil {
				return fmt.Errorf("--threads: %w", err)
			}
			o := bench.SurveyOptions{MGS: g.mgs, MDT: sv.mdt, Threads: threads, Files: sv.files}
			if !sv.json {
				o.Progress = cmd.ErrOrStderr()
			}
			if sv.plot != "" {
				o.Timeline = &bench.Timeline{MGS: g.mgs, Unit: "ops"}
			}
			r, err := bench.RunSurvey(cmd.Context(), o)
			if err != nil {
				return err
			}
			if sv.plot != "" {
				if _, err := bench.WritePlot(sv.plot, "nacre bench survey: "+r.Target, "ops", o.Timeline.Points()); err != nil {
					return err
				}
			}
			if sv.json {
				return cli.JSON(cmd.OutOrStdout(), r)
			}
			bench.PrintSurvey(cmd.OutOrStdout(), r)
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint32Var(&sv.mdt, "mdt", 0, "MDT index")
	f.StringVar(&sv.threads, "threads", "1,2,4,8,16,32,64", "thread counts to try")
	f.IntVar(&sv.files, "files", 10000, "files per thread count, split over the threads")
	f.BoolVar(&sv.json, "json", false, "print JSON")
	f.StringVar(&sv.plot, "plot", "", "draw the per-second timeline to FILE.png")
	return cmd
}
