package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"nacre/internal/client"
	"nacre/internal/pki"
	"nacre/internal/target"
)

type formatFlags struct {
	kind, dir, fsname, mgsnode, listen, data, metrics string
	index                                             uint32
	replica                                           uint64
	peers, created                                    string
	tlsDir                                            string
}

// newFormatCommand is `nacre format`.
func newFormatCommand(g *globals) *cobra.Command {
	var f formatFlags
	cmd := &cobra.Command{
		Use:     "format --type mgs|mdt|ost --dir DIR --fsname NAME [--index N] [--mgsnode HOST:PORT]",
		Short:   "Prepare a target directory (MGS, MDT n or OST n)",
		GroupID: "server",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mgsnode := f.mgsnode
			if mgsnode == "" {
				mgsnode = g.mgs
			}
			flags := cmd.Flags()
			id, err := target.FormatRequest{Type: f.kind, Dir: f.dir, Fsname: f.fsname, Index: f.index, IndexSet: flags.Changed("index"),
				MGSNode: mgsnode, MGSNodeSet: flags.Changed("mgsnode"), Listen: f.listen,
				DataListen: f.data, DataListenSet: flags.Changed("data-listen"), MetricsListen: f.metrics, MetricsListenSet: flags.Changed("metrics-listen"),
				ReplicaID: f.replica, Peers: f.peers, Created: f.created, CheckMGS: client.CheckMGSAddr}.Identity()
			if err != nil {
				return err
			}
			if err := target.Format(f.dir, id); err != nil {
				return err
			}
			if f.tlsDir != "" {
				ca, made, err := pki.InitCA(f.tlsDir, id.Fsname)
				if err != nil {
					return err
				}
				if made {
					fmt.Fprintf(cmd.OutOrStdout(), "made the cluster certificate authority in %s (keep ca-key.pem root's alone; give the other targets --tls-dir %s, or a copy of it)\n", f.tlsDir, f.tlsDir)
				}
				if err := target.Secure(f.dir, ca); err != nil {
					return err
				}
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
	fl := cmd.Flags()
	fl.StringVar(&f.kind, "type", "", "target type: mgs, mdt or ost")
	fl.StringVar(&f.dir, "dir", "", "target directory (new or empty)")
	fl.StringVar(&f.fsname, "fsname", "nacre", "file system name: 1 to 8 letters, digits, _ or -")
	fl.Uint32Var(&f.index, "index", 0, "MDT or OST index")
	fl.StringVar(&f.mgsnode, "mgsnode", "", "MGS address of the file system (MDT, OST; default --mgs)")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "gRPC listen address (port 0: pick one at first start and keep it)")
	// Their defaults follow --listen (target.FormatRequest), so the flags'
	// own are empty: the help printed "127.0.0.1:0" as well, which is
	// neither what they say nor what --listen 192.0.2.10:7001 gives.
	fl.StringVar(&f.data, "data-listen", "", "OST: data protocol, MDT: metadata requests; listen address (default: --listen's host, a port picked at first start)")
	fl.StringVar(&f.metrics, "metrics-listen", "", "Prometheus metrics listen address (default: --listen's host, a port picked at first start)")
	fl.Uint64Var(&f.replica, "replica-id", 0, "MGS, MDT: this replica's id in its Raft group (with --peers)")
	fl.StringVar(&f.peers, "peers", "", "MGS, MDT: the group's replicas as ID=HOST:PORT,... (their --listen); a replica not listed joins the group (nacre replica add)")
	fl.StringVar(&f.tlsDir, "tls-dir", "", "the cluster's certificate authority directory (ca.pem, ca-key.pem; made if absent): the target gets a node certificate in DIR/tls and serves only over TLS")
	fl.StringVar(&f.created, "created", "", "with --peers: the creation time, RFC 3339, the same for every replica of one MDT (the root directory's times; default: the Unix epoch)")
	return cmd
}
