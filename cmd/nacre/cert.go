package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"nacre/internal/localcluster"
	"nacre/internal/nodemap"
	"nacre/internal/pki"
)

type certFlags struct {
	client, dir, ca, out string
	admin                bool
}

// newCertCommand is `nacre cert add`: client credentials from a
// cluster's certificate authority.
func newCertCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "cert",
		Short:   "Issue TLS credentials from the cluster's certificate authority",
		GroupID: "admin",
	}
	var f certFlags
	add := &cobra.Command{
		Use:   "add --client NAME [--admin] [--dir CLUSTER | --ca CA_DIR --out DIR]",
		Short: "Issue a client certificate (with the admin role if --admin)",
		Long: `Issue a client certificate from the cluster's certificate authority:
of the local cluster in --dir (into CLUSTER/tls/clients/NAME), or of the
CA directory --ca (into --out). A command or mount uses it with
--tls-dir DIR or NACRE_TLS_DIR=DIR. Without --admin the holder uses
files only; lfsck, fault injection, replica changes and nodemaps need
--admin. What the MDSs make of a client's ids is its nodemap (nacre nodemap).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.client == "" {
				return fmt.Errorf("--client NAME is required: the name the servers' logs give the holder")
			}
			if f.client == nodemap.Default {
				return fmt.Errorf("--client %q names every client certificate in `nacre nodemap`: give this one a name of its own", f.client)
			}
			if err := nodemap.CheckName(f.client); err != nil {
				return fmt.Errorf("--client: %w", err)
			}
			var out string
			switch {
			case f.ca != "":
				if f.out == "" {
					return fmt.Errorf("--ca needs --out DIR: where to write the credentials")
				}
				ca, err := pki.OpenCA(f.ca)
				if err != nil {
					return err
				}
				role := pki.RoleClient
				if f.admin {
					role = pki.RoleAdmin
				}
				if err := ca.Issue(f.out, pki.Request{Name: f.client, Role: role}); err != nil {
					return err
				}
				out = f.out
			default:
				var err error
				if out, err = localcluster.IssueClient(f.dir, f.client, f.admin); err != nil {
					return err
				}
			}
			role := "client"
			if f.admin {
				role = "admin"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "issued %s certificate %q in %s\nuse it with: export NACRE_TLS_DIR=%s\n", role, f.client, out, out)
			return nil
		},
	}
	fl := add.Flags()
	fl.StringVar(&f.client, "client", "", "the client's name (its certificate's common name)")
	fl.BoolVar(&f.admin, "admin", false, "the admin role: lfsck, fault injection, replica changes, nodemaps")
	fl.StringVar(&f.dir, "dir", localcluster.DefaultDir, "local cluster directory (its CA is DIR/tls)")
	fl.StringVar(&f.ca, "ca", "", "a CA directory (ca.pem, ca-key.pem: nacre format --tls-dir), instead of --dir")
	fl.StringVar(&f.out, "out", "", "with --ca: the credentials directory to write")
	cmd.AddCommand(add)
	return cmd
}
