package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"nacre/internal/bench"
	"nacre/internal/cli"
	"nacre/internal/localcluster"
)

// newBenchMDCommand is `nacre bench md`.
func newBenchMDCommand(g *globals) *cobra.Command {
	var md struct {
		workers, items, stripes, depth, branch, iterations, wbytes, rbytes, spread int
		shared, json, csv, noCPU                                                   bool
		path, plot, phases, mdts, nodeCPU                                          string
		osts                                                                       int
		gap                                                                        time.Duration
	}
	cmd := &cobra.Command{
		Use:   "md [--workers N] [--items N] [--shared-dir] [--path DIR] [--json|--csv] [--plot FILE.png]",
		Short: "mdtest-like directory and file create, stat, read and remove phases",
		Long: `Runs mdtest-like phases: dir_create, dir_stat, dir_rename, dir_remove, file_create,
file_stat, file_read, file_remove (and tree_create/tree_remove with --depth).
By default it drives the Nacre cluster of --mgs through the client library;
with --path it uses system calls in a directory of any mounted file system
(a Nacre mount, the local disk, MooseFS ...), for side-by-side figures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := bench.MDOptions{MGS: g.mgs, TLS: g.creds, FollowerReads: g.environ.followerReads(), Path: md.path, Workers: md.workers, Items: md.items, SharedDir: md.shared,
				StripeCount: md.stripes, Depth: md.depth, Branch: md.branch, Iterations: md.iterations,
				WriteBytes: md.wbytes, ReadBytes: md.rbytes, PhaseGap: md.gap, SpreadMDTs: md.spread}
			if md.phases != "" {
				o.Phases = strings.Split(md.phases, ",")
			}
			if md.mdts != "" {
				return runMDScale(cmd, g, o, md.mdts, md.nodeCPU, md.osts, md.json)
			}
			if cmd.Flags().Changed("node-cpu") || cmd.Flags().Changed("osts") {
				return fmt.Errorf("--node-cpu and --osts are for the clusters --mdts starts; the cluster of --mgs runs with what `nacre up` gave it")
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
			if !md.noCPU {
				procs, err := bench.FindProcs(cmd.Context(), o.MGS, md.path, g.environ.mountState(), g.creds)
				if err != nil {
					return err
				}
				o.CPU = bench.NewCPUProbe(procs)
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
	f := cmd.Flags()
	f.IntVar(&md.workers, "workers", 1, "concurrent workers (each its own client, like mdtest ranks)")
	f.IntVar(&md.items, "items", 1000, "files and directories per worker")
	f.BoolVar(&md.shared, "shared-dir", false, "all workers in one directory (default: one each)")
	f.StringVar(&md.path, "path", "", "run through system calls in this directory of a mounted file system")
	f.IntVar(&md.stripes, "stripe-count", 0, "stripe count of the files (0: file system default; client library only)")
	f.IntVar(&md.depth, "depth", 0, "directory tree depth per worker (mdtest -z)")
	f.IntVar(&md.branch, "branch", 1, "directory tree branching factor (mdtest -b)")
	f.IntVar(&md.iterations, "iterations", 1, "repeat the run; report mean, min, max and stddev")
	f.StringVar(&md.phases, "phases", "dir,file", "which phases: dir, file or dir,file; add ls for file_ls (what ls -l asks of each file: lstat, security.selinux, the access ACL), e.g. file,ls; link: --items hard links to one file per worker (link_create, link_stat, link_remove)")
	f.StringVar(&md.mdts, "mdts", "", "compare MDT counts, e.g. 1,2,4: start a fresh local cluster of each count in turn and run there, worker i's directory on MDT i % N")
	f.StringVar(&md.nodeCPU, "node-cpu", "", "with --mdts: "+nodeCPUUsage)
	f.IntVar(&md.osts, "osts", 1, "with --mdts: OSTs of each cluster started")
	f.IntVar(&md.spread, "spread-mdts", 0, "put worker i's directory on MDT i % N (remote directories; client library only): N MDTs share the work")
	f.IntVar(&md.wbytes, "write-bytes", 0, "bytes written into each file at create (mdtest -w)")
	f.IntVar(&md.rbytes, "read-bytes", 0, "bytes read from each file in file_read (mdtest -e)")
	f.DurationVar(&md.gap, "gap", 0, "pause between phases (let FUSE attribute caches expire, e.g. 2s)")
	f.BoolVar(&md.noCPU, "no-cpu", false, "do not count the CPU per operation of the processes of this machine that serve the run (its targets, the mount daemon, the benchmark)")
	f.BoolVar(&md.json, "json", false, "print JSON")
	f.BoolVar(&md.csv, "csv", false, "print CSV")
	f.StringVar(&md.plot, "plot", "", "draw the per-second timeline (with server disk and network throughput) to FILE.png")
	return cmd
}

// runMDScale is bench md --mdts: the phases on a fresh cluster of each
// MDT count.
func runMDScale(cmd *cobra.Command, g *globals, md bench.MDOptions, list, nodeCPU string, osts int, asJSON bool) error {
	var counts []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("--mdts %q: want MDT counts separated by commas, e.g. 1,2,4", list)
		}
		if err := localcluster.CheckMDTs(n); err != nil {
			return err
		}
		counts = append(counts, n)
	}
	if err := localcluster.CheckOSTs(osts); err != nil {
		return err
	}
	o := bench.MDScaleOptions{MD: md, MDTCounts: counts, OSTs: osts}
	o.MD.CPU, o.MD.Timeline = nil, nil
	if nodeCPU != "" {
		n, err := localcluster.ParseNodeCPU(nodeCPU)
		if err != nil {
			return err
		}
		o.NodeCPU = n
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	o.Binary = exe
	if !asJSON {
		o.Progress = cmd.ErrOrStderr()
	}
	r, err := bench.RunMDScale(cmd.Context(), o)
	if err != nil {
		return err
	}
	if asJSON {
		return cli.JSON(cmd.OutOrStdout(), r)
	}
	bench.PrintMDScale(cmd.OutOrStdout(), r)
	return nil
}
