package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"nacre/internal/bench"
	"nacre/internal/cli"
	"nacre/internal/layout"
)

func addBenchCommands(root *cobra.Command, g *globals) {
	benchCmd := &cobra.Command{Use: "bench", Short: "Benchmarks: md (metadata), survey, io, age, popd, compare, lfsck", GroupID: "admin"}
	var md struct {
		workers, items, stripes, depth, branch, iterations, wbytes, rbytes int
		shared, json, csv                                                  bool
		path, plot, phases                                                 string
		gap                                                                time.Duration
	}
	mdCmd := &cobra.Command{
		Use:   "md [--workers N] [--items N] [--shared-dir] [--path DIR] [--json|--csv] [--plot FILE.png]",
		Short: "mdtest-like directory and file create, stat, read and remove phases",
		Long: `Runs mdtest-like phases: dir_create, dir_stat, dir_remove, file_create,
file_stat, file_read, file_remove (and tree_create/tree_remove with --depth).
By default it drives the Nacre cluster of --mgs through the client library;
with --path it uses system calls in a directory of any mounted file system
(a Nacre mount, the local disk, MooseFS ...), for side-by-side figures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := bench.MDOptions{MGS: g.mgs, Path: md.path, Workers: md.workers, Items: md.items, SharedDir: md.shared,
				StripeCount: md.stripes, Depth: md.depth, Branch: md.branch, Iterations: md.iterations,
				WriteBytes: md.wbytes, ReadBytes: md.rbytes, PhaseGap: md.gap}
			if md.phases != "" {
				o.Phases = strings.Split(md.phases, ",")
			}
			if md.path != "" && !cmd.Flags().Changed("mgs") {
				o.MGS = "" // a path run samples servers only if asked
			}
			if !md.json && !md.csv {
				o.Progress = cmd.ErrOrStderr()
			}
			if md.plot != "" {
				o.Timeline = &bench.Timeline{MGS: o.MGS, Unit: "ops"}
			}
			r, err := bench.RunMD(cmd.Context(), o)
			if err != nil {
				return err
			}
			if md.plot != "" {
				if _, err := bench.WritePlot(md.plot, "nacre bench md: "+r.Target, "ops", o.Timeline.Points()); err != nil {
					return err
				}
			}
			switch {
			case md.json:
				return cli.JSON(cmd.OutOrStdout(), r)
			case md.csv:
				return bench.WriteMDCSV(cmd.OutOrStdout(), r)
			}
			bench.PrintMD(cmd.OutOrStdout(), r)
			return nil
		},
	}
	f := mdCmd.Flags()
	f.IntVar(&md.workers, "workers", 1, "concurrent workers (each its own client, like mdtest ranks)")
	f.IntVar(&md.items, "items", 1000, "files and directories per worker")
	f.BoolVar(&md.shared, "shared-dir", false, "all workers in one directory (default: one each)")
	f.StringVar(&md.path, "path", "", "run through system calls in this directory of a mounted file system")
	f.IntVar(&md.stripes, "stripe-count", 0, "stripe count of the files (0: file system default; client library only)")
	f.IntVar(&md.depth, "depth", 0, "directory tree depth per worker (mdtest -z)")
	f.IntVar(&md.branch, "branch", 1, "directory tree branching factor (mdtest -b)")
	f.IntVar(&md.iterations, "iterations", 1, "repeat the run; report mean, min, max and stddev")
	f.StringVar(&md.phases, "phases", "dir,file", "which phases: dir, file or dir,file; add ls for file_ls (what ls -l asks of each file: lstat, security.selinux, the access ACL), e.g. file,ls; link: --items hard links to one file per worker (link_create, link_stat, link_remove)")
	f.IntVar(&md.wbytes, "write-bytes", 0, "bytes written into each file at create (mdtest -w)")
	f.IntVar(&md.rbytes, "read-bytes", 0, "bytes read from each file in file_read (mdtest -e)")
	f.DurationVar(&md.gap, "gap", 0, "pause between phases (let FUSE attribute caches expire, e.g. 2s)")
	f.BoolVar(&md.json, "json", false, "print JSON")
	f.BoolVar(&md.csv, "csv", false, "print CSV")
	f.StringVar(&md.plot, "plot", "", "draw the per-second timeline (with server disk and network throughput) to FILE.png")
	benchCmd.AddCommand(mdCmd)
	benchCmd.AddCommand(surveyCommand(g))
	benchCmd.AddCommand(ioCommand(g))
	benchCmd.AddCommand(ageCommand(g))
	benchCmd.AddCommand(compareCommand())
	benchCmd.AddCommand(lfsckBenchCommands(g)...) // popd, lfsck (bench_lfsck.go)
	root.AddCommand(benchCmd)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a list of numbers like 1,2,4,8", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func surveyCommand(g *globals) *cobra.Command {
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

func addStatsCommands(root *cobra.Command, g *globals) {
	var st struct {
		json     bool
		interval time.Duration
		dir      string
	}
	stats := &cobra.Command{
		Use:     "stats [--json] [--dir DIR] [TARGET]",
		Short:   "Per-target operation counts, rates and latencies, bytes and queue depths",
		GroupID: "admin",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			only := ""
			if len(args) == 1 {
				only = args[0]
			}
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, st.dir); err != nil {
				return err
			}
			return cli.Stats(cmd.Context(), e, only, st.interval, st.json)
		},
	}
	stats.Flags().BoolVar(&st.json, "json", false, "print JSON")
	stats.Flags().DurationVar(&st.interval, "interval", time.Second, "rates are measured over this interval (at least 100ms)")
	addClusterDirFlag(stats, &st.dir)
	root.AddCommand(stats)

	var tp struct {
		interval time.Duration
		n        int
		dir      string
	}
	top := &cobra.Command{
		Use:     "top [--dir DIR]",
		Short:   "Live per-target rates in the terminal",
		GroupID: "admin",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, tp.dir); err != nil {
				return err
			}
			return cli.Top(cmd.Context(), e, tp.interval, tp.n)
		},
	}
	top.Flags().DurationVar(&tp.interval, "interval", time.Second, "refresh interval (at least 100ms)")
	top.Flags().IntVarP(&tp.n, "iterations", "n", 0, "stop after N refreshes (0: until Ctrl-C)")
	addClusterDirFlag(top, &tp.dir)
	root.AddCommand(top)
}

func parseSizes(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := layout.ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func ioCommand(g *globals) *cobra.Command {
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
			io := bench.IOOptions{MGS: g.mgs, Path: o.path, Workers: o.workers, Size: size, Block: block,
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

func ageCommand(g *globals) *cobra.Command {
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
			ao := bench.AgeOptions{MGS: g.mgs, Dest: o.dest, Local: o.local, Random: o.random, Files: o.files, MedianSize: median,
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

func compareCommand() *cobra.Command {
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
