package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/localcluster"
)

// newDownCommand is `nacre down` (localcluster.Shutdown).
func newDownCommand(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down [--dir DIR]",
		Short: "Unmount the local cluster's Nacre mounts on this machine and stop its processes",
		Long: `Stop the processes of the local cluster in DIR (SIGTERM, then SIGKILL after
10 s). First every Nacre mount of its file system on this machine is
unmounted, as with nacre umount, while the servers can still take what the
mount writes back. A busy mount (files open on it) is not forced: if it is
still mounted once the servers are stopped, a warning names it and how to
free it. The mount made by nacre up --mount is always removed.

A nacre up that supervises the cluster (one run without --detach) sees its
targets gone and ends; down waits for it (at most 15 s), so that a nacre
up right after down is not refused.`,
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := localcluster.Shutdown(dir, g.environ.mountState(), cmd.OutOrStdout(), cmd.ErrOrStderr()); err != nil {
				return err
			}
			localcluster.AwaitUp(dir, cmd.OutOrStdout(), cmd.ErrOrStderr())
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", localcluster.DefaultDir, "cluster directory")
	return cmd
}
