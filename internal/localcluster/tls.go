package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"

	"nacre/internal/pki"
	"nacre/internal/target"
)

// A local cluster with TLS (`nacre up --tls`) keeps its certificate
// authority in DIR/tls (ca.pem, ca-key.pem), each target its node
// credentials in its own tls/ (target.Secure), and the user who ran up
// admin credentials in DIR/tls/admin: what NACRE_TLS_DIR names for its
// commands and mounts. `nacre cert add --dir DIR` issues more clients
// into DIR/tls/clients/NAME.
const (
	caDirName    = "tls"
	adminDirName = "admin"
)

// CADir is the certificate authority's directory of the cluster in dir.
func CADir(dir string) string { return filepath.Join(dir, caDirName) }

// AdminTLSDir is the admin credentials directory of the cluster in dir.
func AdminTLSDir(dir string) string { return filepath.Join(dir, caDirName, adminDirName) }

// ClientTLSDir is where `nacre cert add --dir` puts client name's
// credentials.
func ClientTLSDir(dir, name string) string { return filepath.Join(dir, caDirName, "clients", name) }

// HasTLS reports whether the cluster in dir has a certificate authority.
func HasTLS(dir string) bool {
	_, err := os.Stat(filepath.Join(CADir(dir), pki.CAFile))
	return err == nil
}

// initTLS makes the certificate authority of a new cluster and the admin
// credentials of the user running up.
func initTLS(dir, fsname string) error {
	ca, _, err := pki.InitCA(CADir(dir), fsname)
	if err != nil {
		return err
	}
	name := "admin"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	return ca.Issue(AdminTLSDir(dir), pki.Request{Name: name, Role: pki.RoleAdmin})
}

// formatTarget formats a target of the cluster in clusterDir, and gives
// it node credentials if the cluster has TLS.
func formatTarget(clusterDir, d string, id target.Identity) error {
	if err := target.Format(d, id); err != nil {
		return err
	}
	if !HasTLS(clusterDir) {
		return nil
	}
	ca, err := pki.OpenCA(CADir(clusterDir))
	if err != nil {
		return err
	}
	return target.Secure(d, ca)
}

// adminCreds are the admin credentials of the cluster in dir (nil for a
// cluster without TLS).
func adminCreds(dir string) (*pki.Creds, error) {
	if !HasTLS(dir) {
		return nil, nil
	}
	c, err := pki.Load(AdminTLSDir(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("the cluster in %s has TLS but no admin credentials in %s: %w", dir, AdminTLSDir(dir), err)
	}
	return c, err
}

// IssueClient issues client name credentials of the cluster in dir into
// ClientTLSDir, with the admin role if admin, and returns that directory.
func IssueClient(dir, name string, admin bool) (string, error) {
	ca, err := pki.OpenCA(CADir(dir))
	if errors.Is(err, pki.ErrNoCA) {
		return "", fmt.Errorf("the cluster in %s has no TLS (it was brought up without --tls): %w", dir, err)
	}
	if err != nil {
		return "", err
	}
	role := pki.RoleClient
	if admin {
		role = pki.RoleAdmin
	}
	out := ClientTLSDir(dir, name)
	return out, ca.Issue(out, pki.Request{Name: name, Role: role})
}
