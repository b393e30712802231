package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"nacre/internal/deploy"
)

// newInstallCommand is `nacre install --systemd`: the units that start a
// host's targets at boot and its mounts after them (internal/deploy).
func newInstallCommand(g *globals) *cobra.Command {
	var o deploy.Options
	var systemd bool
	cmd := &cobra.Command{
		Use:   "install --systemd [--unit-dir DIR] [--bin PATH] [--env-dir DIR]",
		Short: "Write the systemd units that start this host's targets and mounts at boot",
		Long: `Write two systemd template units into --unit-dir (default
/etc/systemd/system), instantiated by the escaped path of a target
directory or a mount point:

  nacre-target@.service  runs nacre serve --dir PATH; starts after the
                         network and before remote-fs-pre.target
  nacre-mount@.service   runs nacre mount PATH (ready when it returns);
                         starts before remote-fs.target, after the
                         host's own targets

Settings that are not paths go in --env-dir (default /etc/nacre):
nacre.env for every unit (NACRE_MGS=HOST:PORT, NACRE_TLS_DIR=DIR), and
mount-INSTANCE.env for one mount (NACRE_MOUNT_OPTIONS="-o allow_other").

Then, for example:
  systemctl daemon-reload
  systemctl enable --now nacre-target@$(systemd-escape --path /srv/nacre/mdt0).service
  systemctl enable --now nacre-mount@$(systemd-escape --path /mnt/nacre).service`,
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !systemd {
				return fmt.Errorf("say what to install: --systemd (the only kind there is)")
			}
			if o.Bin == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("find this binary (give --bin PATH): %w", err)
				}
				if o.Bin, err = filepath.EvalSymlinks(exe); err != nil {
					return fmt.Errorf("find this binary (give --bin PATH): %w", err)
				}
			}
			paths, err := deploy.WriteSystemd(o)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, p := range paths {
				fmt.Fprintf(w, "wrote %s\n", p)
			}
			fmt.Fprintf(w, "Then: systemctl daemon-reload; systemctl enable --now %s (and %s)\n",
				deploy.Instance(deploy.TargetUnit, "/srv/nacre/mdt0"), deploy.Instance(deploy.MountUnit, "/mnt/nacre"))
			return nil
		},
	}
	cmd.Flags().BoolVar(&systemd, "systemd", false, "write the systemd units")
	cmd.Flags().StringVar(&o.UnitDir, "unit-dir", "", "where the units go (default /etc/systemd/system)")
	cmd.Flags().StringVar(&o.Bin, "bin", "", "the nacre binary the units run, an absolute path (default: this one)")
	cmd.Flags().StringVar(&o.EnvDir, "env-dir", "", "where the units read their environment files (default /etc/nacre)")
	return cmd
}
