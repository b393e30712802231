package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"nacre/internal/client"
	"nacre/internal/fault"
	"nacre/internal/fusefs"
	"nacre/internal/obs"
)

func addMountCommands(root *cobra.Command, g *globals) {
	var m struct {
		opts    []string
		fg      bool
		log     string
		readyFD int
	}
	mountCmd := &cobra.Command{
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
			for _, o := range m.opts {
				if err := fusefs.ParseOptions(&mo, o); err != nil {
					return err
				}
			}
			if _, ok := fusefs.FindMount(dir); ok {
				// A second mount would stack on the first, and one
				// umount would leave the path still mounted.
				if fusefs.MountDead(dir) {
					return fmt.Errorf("%s is a dead mount (its daemon is gone): unmount it first (nacre umount %s)", dir, dir)
				}
				return fmt.Errorf("%s is already a mount point: unmount it first (nacre umount %s)", dir, dir)
			}
			if st, err := os.Stat(dir); err != nil {
				return fmt.Errorf("mount point: %w", err)
			} else if !st.IsDir() {
				return fmt.Errorf("mount point %s is not a directory", dir)
			}
			if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
				// As mount(8) does, but say so: the files are not gone.
				fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s is not empty: what it holds is hidden while Nacre is mounted over it, and comes back at unmount\n", dir)
			}
			if m.log == "" {
				m.log = filepath.Join(g.environ.mountState(), url.PathEscape(dir)+".log")
			}
			if !m.fg {
				return mountBackground(cmd, g.mgs, dir, m.opts, m.log)
			}
			return mountForeground(cmd.Context(), cmd.OutOrStdout(), g.environ, g.mgs, dir, mo, m.log, m.readyFD)
		},
	}
	mountCmd.Flags().StringArrayVarP(&m.opts, "options", "o", nil, "mount options, comma-separated (see above)")
	mountCmd.Flags().BoolVarP(&m.fg, "foreground", "f", false, "stay in the foreground (log to stderr)")
	mountCmd.Flags().StringVar(&m.log, "log", "", "daemon log file (default under "+g.environ.mountState()+")")
	mountCmd.Flags().IntVar(&m.readyFD, "ready-fd", 0, "internal: report readiness on this file descriptor")
	mountCmd.Flags().MarkHidden("ready-fd")
	root.AddCommand(mountCmd)

	var u fusefs.UmountOptions
	umountCmd := &cobra.Command{
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
	umountCmd.Flags().BoolVarP(&u.Lazy, "lazy", "l", false, "detach a busy mount now")
	umountCmd.Flags().BoolVarP(&u.Force, "force", "f", false, "abort the mount's connection first")
	root.AddCommand(umountCmd)
}

// mountBackground starts the daemon (this binary with -f in a new
// session) and waits for it to report the mount ready or failed.
func mountBackground(cmd *cobra.Command, mgs, dir string, opts []string, logPath string) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	args := []string{"mount", "--mgs", mgs, dir, "-f", "--log", logPath, "--ready-fd", "3"}
	for _, o := range opts {
		args = append(args, "-o", o)
	}
	d := exec.Command(exe, args...)
	d.Stdin = nil
	d.Stdout, d.Stderr = logf, logf
	d.ExtraFiles = []*os.File{w}
	d.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := d.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	go d.Wait()
	msg, _ := io.ReadAll(io.LimitReader(r, 64<<10))
	if strings.TrimSpace(string(msg)) == "ok" {
		return nil
	}
	if len(msg) == 0 {
		msg = []byte("the mount daemon exited without a word; see " + logPath)
	}
	return fmt.Errorf("%s", strings.TrimSpace(string(msg)))
}

// mountForeground is the daemon: mount, serve until unmounted, flush.
func mountForeground(ctx context.Context, out io.Writer, env environ, mgs, dir string, mo fusefs.MountOptions, logPath string, readyFD int) error {
	var ready *os.File
	if readyFD > 0 {
		ready = os.NewFile(uintptr(readyFD), "ready")
	}
	fail := func(err error) error {
		if ready != nil {
			fmt.Fprintln(ready, err)
			ready.Close()
		}
		return err
	}
	log := obs.NewLogger(os.Stderr, false, env.logLevel()).With("mount", dir)
	mo.Log = log
	// Fault points of the mount (tests), as the servers arm theirs.
	if err := fault.ArmList(env.get("NACRE_FAULTS")); err != nil {
		return fail(err)
	}
	downAfter, err := env.ostDownAfter()
	if err != nil {
		return fail(err)
	}
	c, err := client.New(ctx, client.Config{MGS: mgs, Log: log, OSTDownAfter: downAfter, RefreshEvery: 30 * time.Second, FollowerReads: env.followerReads()})
	if err != nil {
		return fail(err)
	}
	defer c.Close()
	m, err := fusefs.MountFS(ctx, c, dir, mo)
	if err != nil {
		return fail(err)
	}
	pid := os.Getpid()
	state := env.mountState()
	if err := fusefs.WriteRecord(state, fusefs.Record{Dir: dir, MGS: mgs, Pid: pid, Log: logPath, Started: time.Now()}); err != nil {
		log.Warn("cannot record the mount (umount will not wait for this daemon)", "err", err)
	}
	defer fusefs.RemoveRecord(state, dir, pid)
	log.Info("mounted", "mgs", mgs, "fsname", c.Fsname(), "pid", pid)
	if ready != nil {
		fmt.Fprintln(ready, "ok")
		ready.Close()
	} else {
		fmt.Fprintf(out, "mounted %s (MGS %s) at %s, pid %d; stop with: nacre umount %s\n", c.Fsname(), mgs, dir, pid, dir)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			log.Info("signal: unmounting")
			if err := m.Unmount(true); err != nil {
				log.Warn("unmount", "err", err)
			}
		case <-done:
		}
	}()
	m.Wait()
	close(done)
	log.Info("unmounted")
	return nil
}
