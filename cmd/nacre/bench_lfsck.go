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

// parseFileCounts reads --sizes: counts of files such as 100k,200k,1M.
func parseFileCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mult := 1
		switch {
		case strings.HasSuffix(f, "M"):
			mult, f = 1000000, strings.TrimSuffix(f, "M")
		case strings.HasSuffix(f, "k"), strings.HasSuffix(f, "K"):
			mult, f = 1000, f[:len(f)-1]
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil {
			return nil, fmt.Errorf("--sizes %q: %q is not a number of files; give counts such as 100k,200k,1M", s, f)
		}
		out = append(out, int(v*float64(mult)))
	}
	return out, nil
}

// newBenchPopdCommand is `nacre bench popd`.
func newBenchPopdCommand(g *globals) *cobra.Command {
	var pd bench.PopDOptions
	var popdPlot string
	cmd := &cobra.Command{
		Use:   "popd --files N [--dirs N] [--subdirs L] [--threads C] [--root NAME] [--stripe-count S] [--plot FILE.png]",
		Short: "Populate a PopD tree (seed 003): N subdirectories, L sub-subdirectories, C threads creating files",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pd.MGS = g.mgs
			pd.Progress = cmd.ErrOrStderr()
			if popdPlot != "" {
				pd.Timeline = &bench.Timeline{MGS: pd.MGS, Unit: "files"}
				pd.Timeline.Start(cmd.Context())
				pd.Timeline.SetPhase("create")
			}
			r, err := bench.PopD(cmd.Context(), pd)
			if pd.Timeline != nil {
				pd.Timeline.Stop()
			}
			if err != nil {
				return err
			}
			if popdPlot != "" {
				if _, err := bench.WritePlot(popdPlot, "nacre bench popd", "files", pd.Timeline.Points()); err != nil {
					return err
				}
			}
			return cli.JSON(cmd.OutOrStdout(), r)
		},
	}
	cmd.Flags().IntVar(&pd.Files, "files", 100000, "files to add")
	cmd.Flags().IntVar(&pd.Offset, "offset", 0, "files already in the tree (to grow it)")
	cmd.Flags().IntVar(&pd.Dirs, "dirs", 4, "N: subdirectories of the tree")
	cmd.Flags().IntVar(&pd.Subdirs, "subdirs", 4, "L: sub-subdirectories in each")
	cmd.Flags().IntVar(&pd.Threads, "threads", 8, "C: threads creating files")
	cmd.Flags().StringVar(&pd.Root, "root", "popd", "the tree's directory under /")
	cmd.Flags().IntVar(&pd.StripeCount, "stripe-count", 0, "stripe count of the files (-1: every OST)")
	cmd.Flags().StringVar(&popdPlot, "plot", "", "draw the per-second timeline (with server disk and network throughput) to FILE.png")
	return cmd
}

// newBenchLfsckCommand is `nacre bench lfsck`.
func newBenchLfsckCommand(g *globals) *cobra.Command {
	var lb struct {
		sizes, osts, plot, from, nodeCPU, mdts string
		json, load                             bool
	}
	var o bench.LfsckBenchOptions
	cmd := &cobra.Command{
		Use:   "lfsck [--sizes 100k,200k,...] [--osts 2,4,8 --ost-files N] [--mdts 1,4 --mdt-files N] [--node-cpu CORES|ROLE=CORES,...] [--load] [--json] [--plot DIR]",
		Short: "Checker benchmarks: scan speed as a PopD tree grows, 2/4/8 OSTs, create rate under the checker",
		Long: `Seed 003's unloaded test: grows a PopD tree on the cluster of --mgs to each
of --sizes and runs each component (namespace, scrub, layout, all) at full
speed; objects/s per component and size. With --interleave it builds a
tree per size instead, each on a local cluster of its own, and measures
them in --repeat rounds that visit every size in turn.

Seed 000's Table I (--osts): starts a local cluster per OST count, puts
--ost-files files striped over every OST, times the layout check.

Seed 003's test under load (--load): the create rate alone, with the
namespace check at full speed, and with speed limits of 1/5 to 4/5 of its
full speed under the same load, --load-seconds each.

Several MDTs (--mdts): starts a local cluster per MDT count, puts
--mdt-files files in a tree on every MDT, runs the namespace check on every
MDT at once; each MDT's objects/s, which should not fall as MDTs are added.

--node-cpu gives the target processes of the clusters it starts (--osts,
--mdts, --interleave) CPU budgets, each in a cgroup of its own, as nacre up
--node-cpu does: eight OSTs on two cores then behave as eight small nodes
instead of taking the MDT's core. The budgets are printed with the
results and recorded in each point's node_cpu.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if lb.from != "" {
				r, err := bench.MergeLfsckResults(strings.Split(lb.from, ","))
				if err != nil {
					return err
				}
				if lb.plot != "" {
					files, err := bench.WriteLfsckPlots(lb.plot, r)
					if err != nil {
						return err
					}
					for _, f := range files {
						fmt.Fprintln(cmd.ErrOrStderr(), "wrote", f)
					}
				}
				return cli.JSON(cmd.OutOrStdout(), r)
			}
			if o.Sizes, err = parseFileCounts(lb.sizes); err != nil {
				return err
			}
			if lb.osts != "" {
				for _, f := range strings.Split(lb.osts, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(f))
					if err != nil || n < 1 {
						return fmt.Errorf("--osts %q: give OST counts of 1 or more, such as 2,4,8", lb.osts)
					}
					o.OSTCounts = append(o.OSTCounts, n)
				}
			}
			if lb.mdts != "" {
				for _, f := range strings.Split(lb.mdts, ",") {
					n, err := strconv.Atoi(strings.TrimSpace(f))
					if err != nil {
						return fmt.Errorf("--mdts %q: give MDT counts such as 1,2,4", lb.mdts)
					}
					if err := localcluster.CheckMDTs(n); err != nil {
						return err
					}
					o.MDTCounts = append(o.MDTCounts, n)
				}
			}
			if cmd.Flags().Changed("node-cpu") {
				if o.NodeCPU, err = localcluster.ParseNodeCPU(lb.nodeCPU); err != nil {
					return err
				}
			}
			o.MGS, o.Load = g.mgs, lb.load
			if o.Binary == "" {
				if exe, err := os.Executable(); err == nil {
					o.Binary = exe
				}
			}
			o.Progress = cmd.ErrOrStderr()
			r, err := bench.RunLfsckBench(cmd.Context(), o)
			if r != nil && lb.plot != "" {
				files, perr := bench.WriteLfsckPlots(lb.plot, r)
				for _, f := range files {
					fmt.Fprintln(cmd.ErrOrStderr(), "wrote", f)
				}
				if err == nil {
					err = perr
				}
			}
			if r != nil && lb.json {
				cli.JSON(cmd.OutOrStdout(), r)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&lb.sizes, "sizes", "", "tree sizes in files, growing (e.g. 100k,200k,500k,1M,2M)")
	f.IntVar(&o.Dirs, "dirs", 16, "N: subdirectories of the PopD tree")
	f.IntVar(&o.Subdirs, "subdirs", 4, "L: sub-subdirectories in each")
	f.IntVar(&o.Threads, "threads", 8, "C: threads creating files")
	f.IntVar(&o.StripeCount, "stripe-count", 0, "stripe count of the scaling tree's files")
	f.StringVar(&lb.osts, "osts", "", "OST counts for Table I (e.g. 2,4,8): a local cluster each")
	f.IntVar(&o.OSTFiles, "ost-files", 100000, "files for the Table I runs")
	f.StringVar(&lb.mdts, "mdts", "", "MDT counts (e.g. 1,4): a local cluster each, --mdt-files files on every MDT, the namespace check on every MDT at once; each MDT's rate")
	f.IntVar(&o.MDTFiles, "mdt-files", 50000, "files on each MDT for the --mdts runs")
	f.IntVar(&o.OSTStripes, "ost-stripe-count", -1, "stripe count of the Table I files (-1: every OST, as seed 000)")
	f.StringVar(&o.ClusterDir, "cluster-dir", "", "where to put the Table I clusters (default: a temporary directory)")
	f.BoolVar(&o.OSTRestart, "ost-restart", false, "restart each Table I cluster after populating it, so that the runs read the stores' tables (as on a file system that has been up a while), not the memtables of the bulk load")
	f.StringVar(&lb.nodeCPU, "node-cpu", "", nodeCPUUsage+"; for the clusters this benchmark starts")
	f.IntVar(&o.Have, "have", 0, "files the scaling tree already holds (from an earlier run)")
	f.BoolVar(&o.Interleave, "interleave", false, "scaling: a tree and a local cluster per size, measured in rounds that visit every size in turn (--repeat rounds), so that the machine's drift does not land between sizes")
	f.IntVar(&o.Repeat, "repeat", 3, "runs per measurement; the median is kept")
	f.BoolVar(&lb.load, "load", false, "measure the create rate under the checker")
	f.Float64Var(&o.LoadSeconds, "load-seconds", 10, "seconds per load measurement")
	f.IntVar(&o.LoadRounds, "load-rounds", 3, "alternations of without / with the checker per setting")
	f.DurationVar(&o.Settle, "settle", 10*time.Second, "pause after populating (and one unmeasured run) before measuring, for the stores' compactions")
	f.BoolVar(&lb.json, "json", false, "print the results as JSON")
	f.StringVar(&lb.plot, "plot", "", "write PNG plots into this directory")
	f.StringVar(&lb.from, "from", "", "merge saved results (JSON files, comma separated) and only print and plot them")
	return cmd
}
