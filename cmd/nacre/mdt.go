package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/lfsck/admin"
)

// newMdtCommand is `nacre mdt`: backup and restore of a stopped MDT
// (internal/lfsck/admin).
func newMdtCommand(g *globals) *cobra.Command {
	top := &cobra.Command{Use: "mdt", Short: "MDT maintenance: file-level backup and restore", GroupID: "admin"}
	top.AddCommand(newMdtBackupCommand(g), newMdtRestoreCommand(g))
	return top
}

func newMdtBackupCommand(g *globals) *cobra.Command {
	var f struct {
		dir, file string
		force     bool
	}
	backup := &cobra.Command{
		Use:   "backup --dir MDTDIR --out FILE [--force]",
		Short: "Back up a stopped MDT, file by file",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin.Backup(g.env(cmd), f.dir, f.file, f.force)
		},
	}
	backup.Flags().StringVar(&f.dir, "dir", "", "the MDT's target directory")
	backup.Flags().StringVar(&f.file, "out", "", "the backup file to write")
	backup.Flags().BoolVar(&f.force, "force", false, "back up a store that fails its checks (lost data): the backup may be incomplete")
	backup.MarkFlagRequired("dir")
	backup.MarkFlagRequired("out")
	return backup
}

func newMdtRestoreCommand(g *globals) *cobra.Command {
	var f struct {
		dir, file string
		force     bool
	}
	restore := &cobra.Command{
		Use:   "restore --dir MDTDIR --from FILE",
		Short: "Restore a backup into a stopped MDT (new local keys; the OI is rebuilt at start)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin.Restore(g.env(cmd), f.dir, f.file, f.force)
		},
	}
	restore.Flags().StringVar(&f.dir, "dir", "", "the MDT's target directory")
	restore.Flags().StringVar(&f.file, "from", "", "the backup file")
	restore.Flags().BoolVar(&f.force, "force", false, "restore a backup of another MDT (another uuid) over one that holds files")
	restore.MarkFlagRequired("dir")
	restore.MarkFlagRequired("from")
	return restore
}
