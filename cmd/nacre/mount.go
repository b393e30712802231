package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fault"
	"nacre/internal/fusefs"
	"nacre/internal/obs"
)

type mountFlags struct {
	opts    []string
	fg      bool
	log     string
	readyFD int
}

// newMountCommand is `nacre mount`: without -f it starts this binary
// again with -f as the mount daemon (fusefs.StartDaemon), which runs
// fusefs.RunDaemon.
func newMountCommand(g *globals) *cobra.Command {
	var f mountFlags
	cmd := &cobra.Command{
		Use:   "mount [--mgs ADDR] MOUNTPOINT [-o OPTIONS] [-f]",
		Short: "Mount the file system through FUSE (in the background unless -f)",
		Long: `Mount the file system at MOUNTPOINT. The mount is served by a daemon that
goes to the background once the mount is ready (-f keeps it in the
foreground); stop it with ` + "`nacre umount MOUNTPOINT`" + `.

Options (-o, comma-separated):
  allow_other             let other users use the mount
  default_permissions     kernel checks permissions (default; no_default_permissions)
  acl                     POSIX ACLs, with default_permissions (default; noacl)
  ro                      read-only
  attr_timeout=S          attribute cache timeout in seconds (default 1)
  entry_timeout=S         name cache timeout (default 1; none without
                          default_permissions: each walk checks search
                          permission)
  negative_timeout=S      cache of missing names (default 0)
  max_background=N        kernel's asynchronous requests in flight (default 64)
  readahead_kb=N          readahead window (default 4096)
  fsname=NAME             device name shown by df and /proc/mounts
  debug                   log every FUSE request`,
		GroupID: "fs",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if g.mgs == "" {
				return fmt.Errorf("no MGS address: pass --mgs HOST:PORT or set NACRE_MGS")
			}
			dir, err := fusefs.MountPath(args[0])
			if err != nil {
				return err
			}
			mo := fusefs.DefaultMountOptions()
			for _, o := range f.opts {
				if err := fusefs.ParseOptions(&mo, o); err != nil {
					return err
				}
			}
			if err := fusefs.CheckMountPoint(dir, cmd.ErrOrStderr()); err != nil {
				return err
			}
			logPath := f.log
			if logPath == "" {
				logPath = filepath.Join(g.environ.mountState(), url.PathEscape(dir)+".log")
			}
			if !f.fg {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				args := []string{"mount", "--mgs", g.mgs, dir, "-f", "--log", logPath, "--ready-fd", "3"}
				if g.tlsDir != "" {
					abs, err := filepath.Abs(g.tlsDir)
					if err != nil {
						return err
					}
					args = append(args, "--tls-dir", abs)
				}
				for _, o := range f.opts {
					args = append(args, "-o", o)
				}
				// What the daemon waits for shows at a terminal.
				var notices io.Writer
				if cli.IsTerminal(cmd.ErrOrStderr()) {
					notices = cmd.ErrOrStderr()
				}
				return fusefs.StartDaemon(exe, args, logPath, notices)
			}
			return runMountDaemon(cmd, g, dir, mo, logPath, f.readyFD)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.opts, "options", "o", nil, "mount options, comma-separated (see above)")
	fl.BoolVarP(&f.fg, "foreground", "f", false, "stay in the foreground (log to stderr)")
	fl.StringVar(&f.log, "log", "", "daemon log file (default under "+g.environ.mountState()+")")
	fl.IntVar(&f.readyFD, "ready-fd", 0, "internal: report readiness on this file descriptor")
	fl.MarkHidden("ready-fd")
	return cmd
}

// runMountDaemon runs the mount daemon with its options from the
// environment: its log level, fault points (tests), follower reads, and
// how long I/O waits for an OST that is down.
func runMountDaemon(cmd *cobra.Command, g *globals, dir string, mo fusefs.MountOptions, logPath string, readyFD int) error {
	ready := fusefs.ReadyFD(readyFD)
	log := obs.NewLogger(os.Stderr, false, g.environ.logLevel()).With("mount", dir)
	// Fault points of the mount (tests), as the servers arm theirs.
	if err := fault.ArmList(g.environ.get("NACRE_FAULTS")); err != nil {
		return ready.Fail(err)
	}
	downAfter, err := g.environ.ostDownAfter()
	if err != nil {
		return ready.Fail(err)
	}
	return fusefs.RunDaemon(cmd.Context(), fusefs.DaemonOptions{Dir: dir, Mount: mo, Log: log, LogFile: logPath,
		Client:   client.Config{MGS: g.mgs, OSTDownAfter: downAfter, RefreshEvery: 30 * time.Second, FollowerReads: g.environ.followerReads(), TLS: g.creds},
		StateDir: g.environ.mountState(), Ready: ready, Out: cmd.OutOrStdout()})
}

// newUmountCommand is `nacre umount`.
func newUmountCommand(g *globals) *cobra.Command {
	var u fusefs.UmountOptions
	cmd := &cobra.Command{
		Use:   "umount [--lazy] [--force] MOUNTPOINT",
		Short: "Unmount a Nacre mount and wait for its daemon to finish",
		Long: `Unmount the Nacre mount at MOUNTPOINT and wait until its daemon has
flushed and exited. A busy mount is refused unless --lazy (detach it now;
it goes when its last file is closed) or --force (abort it: processes
using it get "transport endpoint is not connected"). A mount whose daemon
died is always freed.`,
		GroupID: "fs",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u.StateDir = g.environ.mountState()
			return fusefs.Umount(args[0], u)
		},
	}
	cmd.Flags().BoolVarP(&u.Lazy, "lazy", "l", false, "detach a busy mount now")
	cmd.Flags().BoolVarP(&u.Force, "force", "f", false, "abort the mount's connection first")
	return cmd
}
