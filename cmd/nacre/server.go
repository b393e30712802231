package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/localcluster"
	"nacre/internal/obs"
	"nacre/internal/server"
	"nacre/internal/target"
)

const defaultClusterDir = localcluster.DefaultDir

func addServerCommands(root *cobra.Command, g *globals) {
	// format
	var f struct {
		kind, dir, fsname, mgsnode, listen, data, metrics string
		index                                             uint32
		replica                                           uint64
		peers, created                                    string
	}
	format := &cobra.Command{
		Use:     "format --type mgs|mdt|ost --dir DIR --fsname NAME [--index N] [--mgsnode HOST:PORT]",
		Short:   "Prepare a target directory (MGS, MDT n or OST n)",
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			kind := target.Kind(f.kind)
			switch kind {
			case target.MGS, target.MDT, target.OST:
			default:
				return fmt.Errorf("--type %q: use mgs, mdt or ost", f.kind)
			}
			if f.dir == "" {
				return fmt.Errorf("--dir is required")
			}
			mgsnode := f.mgsnode
			if mgsnode == "" {
				mgsnode = g.mgs
			}
			if kind != target.MGS && mgsnode == "" {
				return fmt.Errorf("an %s needs the MGS address: --mgsnode HOST:PORT", kind)
			}
			if kind != target.MGS {
				// A bad address would be found only by the server, which
				// would then log its dial error many times a second.
				if err := client.CheckMGSAddr(mgsnode); err != nil {
					return fmt.Errorf("--mgsnode %s: %w", mgsnode, err)
				}
			}
			// The other addresses default to --listen's host: a target
			// formatted to be reached at 192.0.2.10 must not serve its
			// data or metadata requests on loopback only.
			if host, _, err := net.SplitHostPort(f.listen); err == nil {
				for _, a := range []struct {
					flag string
					v    *string
				}{{"data-listen", &f.data}, {"metrics-listen", &f.metrics}} {
					if !cmd.Flags().Changed(a.flag) {
						*a.v = net.JoinHostPort(host, "0")
					}
				}
			}
			for _, a := range []struct{ flag, v string }{{"listen", f.listen}, {"data-listen", f.data}} {
				if err := advertisable(a.v); err != nil {
					return fmt.Errorf("--%s %s: %w", a.flag, a.v, err)
				}
			}
			id := target.Identity{Fsname: f.fsname, Kind: kind, Index: f.index, MGSNode: mgsnode, Listen: f.listen, DataListen: f.data, MetricsListen: f.metrics}
			if err := setReplica(&id, f.replica, f.peers, f.created); err != nil { // replica.go
				return err
			}
			if kind == target.MGS {
				for _, f := range []string{"index", "mgsnode"} {
					if cmd.Flags().Changed(f) {
						return fmt.Errorf("--%s is not for an MGS (there is one per file system, and it is the MGS): leave it out", f)
					}
				}
				id.MGSNode = ""
				if id.Listen == "127.0.0.1:0" {
					return fmt.Errorf("the MGS needs a fixed address that clients can be told: --listen HOST:PORT")
				}
			}
			if err := target.Format(f.dir, id); err != nil {
				return err
			}
			// Describe what was written: Format fills in what id lacks
			// (format version, UUID) on its own copy.
			written, err := target.Load(f.dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "formatted %s in %s\n", written.Describe(), f.dir)
			return nil
		},
	}
	format.Flags().StringVar(&f.kind, "type", "", "target type: mgs, mdt or ost")
	format.Flags().StringVar(&f.dir, "dir", "", "target directory (new or empty)")
	format.Flags().StringVar(&f.fsname, "fsname", "nacre", "file system name: 1 to 8 letters, digits, _ or -")
	format.Flags().Uint32Var(&f.index, "index", 0, "MDT or OST index")
	format.Flags().StringVar(&f.mgsnode, "mgsnode", "", "MGS address of the file system (MDT, OST; default --mgs)")
	format.Flags().StringVar(&f.listen, "listen", "127.0.0.1:0", "gRPC listen address (port 0: pick one at first start and keep it)")
	format.Flags().StringVar(&f.data, "data-listen", "127.0.0.1:0", "OST: data protocol, MDT: metadata requests; listen address (default: --listen's host, a port picked at first start)")
	format.Flags().StringVar(&f.metrics, "metrics-listen", "127.0.0.1:0", "Prometheus metrics listen address (default: --listen's host, a port picked at first start)")
	format.Flags().Uint64Var(&f.replica, "replica-id", 0, "MGS, MDT: this replica's id in its Raft group (with --peers)")
	format.Flags().StringVar(&f.peers, "peers", "", "MGS, MDT: the group's replicas as ID=HOST:PORT,... (their --listen); a replica not listed joins the group (nacre replica add)")
	format.Flags().StringVar(&f.created, "created", "", "with --peers: the creation time, RFC 3339, the same for every replica of one MDT (the root directory's times; default: the Unix epoch)")
	root.AddCommand(format)

	// serve
	var serveDir string
	var jsonLogs bool
	serveCmd := &cobra.Command{
		Use:     "serve --dir DIR",
		Short:   "Run the target in a target directory",
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if serveDir == "" {
				return fmt.Errorf("--dir is required")
			}
			log := obs.NewLogger(os.Stderr, jsonLogs, g.environ.logLevel())
			return server.Run(cmd.Context(), serveDir, g.environ.serverOptions(log))
		},
	}
	serveCmd.Flags().StringVar(&serveDir, "dir", "", "target directory")
	serveCmd.Flags().BoolVar(&jsonLogs, "json-logs", true, "log one JSON object per line")
	root.AddCommand(serveCmd)

	// up
	var up struct {
		dir, fsname    string
		osts, replicas int
		detach         bool
		mount          string
		allowMissing   bool
	}
	upCmd := &cobra.Command{
		Use:     "up [--dir DIR] [--osts N] [--replicas N] [--mount DIR] [--allow-missing] [--detach]",
		Short:   "Format (when new) and start a local cluster: MGS, one MDT, N OSTs",
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			// Flags left at their defaults are not passed: the defaults
			// are for a new cluster, and an existing one keeps what it
			// has (Up notes a value given that it does not apply).
			o := localcluster.Options{Dir: up.dir, Out: out, Mount: up.mount, AllowMissing: up.allowMissing, MountState: g.environ.mountState()}
			if cmd.Flags().Changed("osts") {
				if up.osts < 1 {
					return fmt.Errorf("--osts %d: a cluster needs at least 1 OST (an existing cluster keeps the OSTs it has; a larger --osts adds OSTs)", up.osts)
				}
				o.OSTs = up.osts
			}
			if cmd.Flags().Changed("replicas") {
				if err := localcluster.CheckReplicas(up.replicas); err != nil {
					return err
				}
				o.Replicas = up.replicas
			}
			if cmd.Flags().Changed("fsname") {
				if err := target.CheckFsname(up.fsname); err != nil {
					return fmt.Errorf("--fsname: %w", err)
				}
				o.Fsname = up.fsname
			}
			start := time.Now()
			// A failed Up has stopped what it started, and only that.
			c, err := localcluster.Up(cmd.Context(), o)
			if err != nil {
				return err
			}
			nost := 0
			for _, t := range c.Targets {
				if len(t.Name) >= 3 && t.Name[:3] == "OST" {
					nost++
				}
			}
			mdt := "1 MDT"
			if n := localcluster.Replicas(c); n > 1 {
				mdt = fmt.Sprintf("1 MDT (MGS and MDT: %d replicas each)", n)
			}
			osts := "1 OST"
			if nost != 1 {
				osts = fmt.Sprintf("%d OSTs", nost)
			}
			fmt.Fprintf(out, "Nacre is up in %.1fs: MGS %s, %s, %s, data in %s\n", time.Since(start).Seconds(), c.MGS, mdt, osts, up.dir)
			self := selfName()
			fmt.Fprintf(out, "Try:\n  export NACRE_MGS=%s\n  %s status\n  %s put /etc/services /services && %s ls -l /\n", c.MGS, self, self, self)
			if up.detach {
				fmt.Fprintf(out, "Stop it with: %s down --dir %s\n", self, up.dir)
				fmt.Fprintf(out, "NACRE_MGS=%s\n", c.MGS)
				return nil
			}
			fmt.Fprintln(out, "Press Ctrl-C to stop the cluster.")
			// Also end when every target process has gone (`nacre down
			// --dir` from another terminal), instead of waiting for a
			// Ctrl-C with nothing left to stop.
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-cmd.Context().Done():
					fmt.Fprintln(out, "\nstopping...")
					return localcluster.Shutdown(up.dir, g.environ.mountState(), out, cmd.ErrOrStderr())
				case <-tick.C:
				}
				if localcluster.Running(up.dir) == 0 {
					fmt.Fprintf(out, "every target process of %s has exited (stopped by nacre down, or died: see their serve.log); nacre up ends\n", up.dir)
					// Unmount what is left of --mount.
					return localcluster.Shutdown(up.dir, g.environ.mountState(), io.Discard, cmd.ErrOrStderr())
				}
			}
		},
	}
	upCmd.Flags().StringVar(&up.dir, "dir", defaultClusterDir, "cluster directory")
	upCmd.Flags().StringVar(&up.fsname, "fsname", "nacre", "file system name for a new cluster")
	upCmd.Flags().IntVar(&up.osts, "osts", 2, "number of OSTs (a new cluster gets this many; an existing one grows to it)")
	upCmd.Flags().IntVar(&up.replicas, "replicas", 1, "replicas of the MGS and of each MDT of a new cluster, each its own process: 1, or an odd number from 3 (3 for high availability)")
	upCmd.Flags().StringVar(&up.mount, "mount", "", "also mount the file system at this directory (unmounted by down or Ctrl-C)")
	upCmd.Flags().BoolVar(&up.allowMissing, "allow-missing", false, "start even if the directory of an OST (or MDT replica) the MGS knows is missing, or an OST fails to start (files with stripes on a missing OST fail until it is back)")
	upCmd.Flags().BoolVar(&up.detach, "detach", false, "return once the cluster is ready; print NACRE_MGS=host:port last")
	root.AddCommand(upCmd)

	// down
	var downDir string
	downCmd := &cobra.Command{
		Use:   "down [--dir DIR]",
		Short: "Unmount the local cluster's Nacre mounts on this machine and stop its processes",
		Long: `Stop the processes of the local cluster in DIR (SIGTERM, then SIGKILL after
10 s). First every Nacre mount of its file system on this machine is
unmounted, as with nacre umount, while the servers can still take what the
mount writes back. A busy mount (files open on it) is not forced: if it is
still mounted once the servers are stopped, a warning names it and how to
free it. The mount made by nacre up --mount is always removed.`,
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return localcluster.Shutdown(downDir, g.environ.mountState(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	downCmd.Flags().StringVar(&downDir, "dir", defaultClusterDir, "cluster directory")
	root.AddCommand(downCmd)

	// status
	var st struct {
		json bool
		dir  string
	}
	statusCmd := &cobra.Command{
		Use:     "status [--json] [--dir DIR]",
		Short:   "Show every target: address, state, last heard, space, pid, metrics URL",
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e := g.env(cmd)
			if err := mgsOfDir(cmd, &e, st.dir); err != nil {
				return err
			}
			err := cli.Status(cmd.Context(), e, st.json)
			if err != nil && st.dir != "" && st.json {
				// Scripts get a document on standard output too: the
				// error and what runs here.
				procs, _ := localcluster.Processes(st.dir)
				doc := struct {
					Error     string                      `json:"error"`
					MGS       string                      `json:"mgs"`
					Processes []localcluster.ProcessState `json:"processes"`
				}{cli.ErrorMessage(err), e.MGS, procs}
				b, _ := json.MarshalIndent(doc, "", "  ")
				fmt.Fprintln(cmd.OutOrStdout(), string(b))
			}
			if err != nil && st.dir != "" {
				// With the MGS down (after a power cut, say) what runs
				// here is still worth knowing.
				err = fmt.Errorf("%w\n%s", err, localcluster.ProcessReport(st.dir, selfName()))
			}
			return err
		},
	}
	statusCmd.Flags().BoolVar(&st.json, "json", false, "print JSON")
	addClusterDirFlag(statusCmd, &st.dir)
	root.AddCommand(statusCmd)
}

// selfName is how to run this binary again in the hints printed for the
// user: "nacre" when that is what the PATH finds, else the path it was
// run by (scripts/up.sh runs bin/nacre, which is not on the PATH).
func selfName() string {
	return selfNameFor(os.Args[0], exec.LookPath, os.Executable)
}

func selfNameFor(arg0 string, lookPath func(string) (string, error), executable func() (string, error)) string {
	self, err := executable()
	if err != nil {
		return "nacre"
	}
	if p, err := lookPath("nacre"); err == nil {
		if a, err := filepath.EvalSymlinks(p); err == nil {
			if b, err := filepath.EvalSymlinks(self); err == nil && a == b {
				return "nacre"
			}
		}
	}
	if strings.Contains(arg0, "/") {
		return arg0
	}
	return self
}

// advertisable checks a listen address that other servers and clients are
// told (through the MGS): it must name this machine as they reach it.
func advertisable(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not HOST:PORT: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host == "" {
			host = "no host"
		}
		return fmt.Errorf("a target's addresses are given to clients and the other servers, "+
			"so listening on every interface (%s) cannot be advertised; give the address they reach this machine at", host)
	}
	return nil
}

// addClusterDirFlag gives cmd --dir DIR, the MGS of a local cluster
// directory, as an alternative to --mgs and NACRE_MGS: what the "no MGS
// address" message of the commands that ask the MGS (status, df, stats,
// top) offers.
func addClusterDirFlag(cmd *cobra.Command, dir *string) {
	cmd.Flags().StringVar(dir, "dir", "", "find the MGS of this local cluster directory (instead of --mgs)")
}

// mgsOfDir points e at the MGS of the local cluster in dir, if dir is
// given; with --mgs too it refuses (it went to dir's MGS without a word).
func mgsOfDir(cmd *cobra.Command, e *cli.Env, dir string) error {
	if dir == "" {
		return nil
	}
	addr, err := localcluster.MGSAddr(dir)
	if err != nil {
		return err
	}
	if f := cmd.Flags().Lookup("mgs"); f != nil && f.Changed && !client.SameMGS(f.Value.String(), addr) {
		return fmt.Errorf("%s: --mgs %s and --dir %s (whose MGS is %s) name two clusters: give one of them", cmd.Name(), f.Value.String(), dir, addr)
	}
	e.MGS = addr
	return nil
}
