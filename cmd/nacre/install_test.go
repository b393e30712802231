package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstallWritesTheUnits: nacre install --systemd writes both units
// for this binary and says how to enable them; without --systemd it says
// what is missing.
func TestInstallWritesTheUnits(t *testing.T) {
	if _, err := runNacre(t, "install"); err == nil || !strings.Contains(err.Error(), "--systemd") {
		t.Fatalf("install without a kind: %v, want an error naming --systemd", err)
	}
	dir := t.TempDir()
	bin, _ := os.Executable()
	out, err := runNacre(t, "install", "--systemd", "--unit-dir", dir, "--bin", bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"nacre-target@.service", "nacre-mount@.service"} {
		p := filepath.Join(dir, name)
		if !strings.Contains(out, "wrote "+p) {
			t.Errorf("output does not name %s:\n%s", p, out)
		}
		if b, err := os.ReadFile(p); err != nil || !strings.Contains(string(b), "ExecStart="+bin+" ") {
			t.Errorf("%s: %v, want it to run %s", p, err, bin)
		}
	}
	if !strings.Contains(out, "systemctl enable --now nacre-target@srv-nacre-mdt0.service") {
		t.Errorf("output does not say how to enable a unit:\n%s", out)
	}
}
