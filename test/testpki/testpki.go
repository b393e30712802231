// Package testpki issues TLS credentials for tests: a cluster CA in a
// directory, and a certificate of a role from it (internal/pki). Only
// tests import it.
package testpki

import (
	"path/filepath"
	"testing"

	"nacre/internal/pki"
)

// Issue returns credentials named name with role, from the CA in caDir
// (made there on first use).
func Issue(t testing.TB, caDir, name string, role pki.Role) *pki.Creds {
	t.Helper()
	ca, _, err := pki.InitCA(caDir, "test")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), name)
	if err := ca.Issue(dir, pki.Request{Name: name, Role: role}); err != nil {
		t.Fatal(err)
	}
	c, err := pki.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
