package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"nacre/internal/localcluster"
	"nacre/internal/target"
)

type upFlags struct {
	dir, fsname  string
	osts, mdts   int
	replicas     int
	detach       bool
	mount        string
	allowMissing bool
	nodeCPU      string
	tls          bool
}

// newUpCommand is `nacre up` (localcluster.Run).
func newUpCommand(g *globals) *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{
		Use:     "up [--dir DIR] [--mdts N] [--osts N] [--replicas N] [--tls] [--mount DIR] [--allow-missing] [--node-cpu CORES|ROLE=CORES,...] [--detach]",
		Short:   "Format (when new) and start a local cluster: MGS, N MDTs, N OSTs",
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Before up writes anything: a write to a pipe whose reader is
			// gone (`nacre up | tee log`, and Ctrl-C ends tee too) fails
			// instead of killing the process with SIGPIPE, which left the
			// cluster and its mount running. The channel is never read: a
			// signal it has no room for is dropped. Notify rather than
			// Ignore, so that the processes up starts do not inherit an
			// ignored SIGPIPE.
			signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
			// Flags left at their defaults are not passed: the defaults
			// are for a new cluster, and an existing one keeps what it
			// has (Up notes a value given that it does not apply).
			o := localcluster.RunOptions{Options: localcluster.Options{Dir: f.dir, Out: cmd.OutOrStdout(), Mount: f.mount, AllowMissing: f.allowMissing,
				MountState: g.environ.mountState(), TLS: f.tls}, Detach: f.detach, Self: selfName(), Err: cmd.ErrOrStderr()}
			if cmd.Flags().Changed("osts") {
				if err := localcluster.CheckOSTs(f.osts); err != nil {
					return err
				}
				o.OSTs = f.osts
			}
			if cmd.Flags().Changed("mdts") {
				if err := localcluster.CheckMDTs(f.mdts); err != nil {
					return err
				}
				o.MDTs = f.mdts
			}
			if cmd.Flags().Changed("replicas") {
				if err := localcluster.CheckReplicas(f.replicas); err != nil {
					return err
				}
				o.Replicas = f.replicas
			}
			if cmd.Flags().Changed("fsname") {
				if err := target.CheckFsname(f.fsname); err != nil {
					return fmt.Errorf("--fsname: %w", err)
				}
				o.Fsname = f.fsname
			}
			if cmd.Flags().Changed("node-cpu") {
				n, err := localcluster.ParseNodeCPU(f.nodeCPU)
				if err != nil {
					return err
				}
				o.NodeCPU = n
			}
			return localcluster.Run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dir, "dir", localcluster.DefaultDir, "cluster directory")
	fl.StringVar(&f.fsname, "fsname", "nacre", "file system name for a new cluster")
	fl.IntVar(&f.osts, "osts", 2, "number of OSTs (a new cluster gets this many; an existing one grows to it)")
	fl.IntVar(&f.mdts, "mdts", 1, fmt.Sprintf("number of MDTs, at most %d (a new cluster gets this many: MDT0 holds the root, the others start empty; an existing one grows to it)", localcluster.MaxLocalMDTs))
	fl.IntVar(&f.replicas, "replicas", 1, "replicas of the MGS and of each MDT of a new cluster, each its own process: 1, or an odd number from 3 (3 for high availability)")
	fl.BoolVar(&f.tls, "tls", false, "a new cluster's links are TLS: a certificate authority in DIR/tls, node certificates, and admin credentials for this user in DIR/tls/admin (printed as NACRE_TLS_DIR)")
	fl.StringVar(&f.mount, "mount", "", "also mount the file system at this directory (unmounted by down or Ctrl-C)")
	fl.BoolVar(&f.allowMissing, "allow-missing", false, "start even if the directory of an OST (or MDT replica) the MGS knows is missing, or an OST fails to start (files with stripes on a missing OST fail until it is back)")
	fl.StringVar(&f.nodeCPU, "node-cpu", "", nodeCPUUsage)
	fl.BoolVar(&f.detach, "detach", false, "return once the cluster is ready; print NACRE_MGS=host:port last")
	return cmd
}

// nodeCPUUsage describes --node-cpu, of `nacre up` and of the benchmarks
// that start their own clusters.
const nodeCPUUsage = "CPU budget of each target process, in cores, in a cgroup of its own so that each behaves as a node of its own: CORES for every process, or per role, e.g. mds=0.6,ost=0.15,mgs=0.1 (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us; needs root and a writable cpu controller)"
