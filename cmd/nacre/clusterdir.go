package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/localcluster"
	"nacre/internal/pki"
)

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
	if e.TLS == nil && localcluster.HasTLS(dir) {
		// The cluster's own admin credentials, as NACRE_TLS_DIR would
		// give them: --dir names a cluster of this machine and user.
		c, err := pki.Load(localcluster.AdminTLSDir(dir))
		if err != nil {
			return err
		}
		e.TLS = c
	}
	return nil
}
