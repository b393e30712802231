package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/lfsck/admin"
)

func mdtCommand(g *globals) *cobra.Command {
	top := &cobra.Command{Use: "mdt", Short: "MDT maintenance: file-level backup and restore", GroupID: "admin"}
	var dir, file string
	var force bool
	backup := &cobra.Command{
		Use:   "backup --dir MDTDIR --out FILE [--force]",
		Short: "Back up a stopped MDT, file by file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin.Backup(g.env(cmd), dir, file, force)
		},
	}
	backup.Flags().StringVar(&dir, "dir", "", "the MDT's target directory")
	backup.Flags().StringVar(&file, "out", "", "the backup file to write")
	backup.Flags().BoolVar(&force, "force", false, "back up a store that fails its checks (lost data): the backup may be incomplete")
	backup.MarkFlagRequired("dir")
	backup.MarkFlagRequired("out")
	restore := &cobra.Command{
		Use:   "restore --dir MDTDIR --from FILE",
		Short: "Restore a backup into a stopped MDT (new local keys; the OI is rebuilt at start)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin.Restore(g.env(cmd), dir, file, force)
		},
	}
	restore.Flags().StringVar(&dir, "dir", "", "the MDT's target directory")
	restore.Flags().StringVar(&file, "from", "", "the backup file")
	restore.Flags().BoolVar(&force, "force", false, "restore a backup of another MDT (another uuid) over one that holds files")
	restore.MarkFlagRequired("dir")
	restore.MarkFlagRequired("from")
	top.AddCommand(backup, restore)
	return top
}
