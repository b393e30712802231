package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDownAndStatusNameADirectoryThatIsNoCluster: `nacre down` (also
// without --dir, in a directory with no ./nacre-cluster) and `status
// --dir` on a missing or foreign directory say it is not a cluster and
// what to give, not "open nacre-cluster: no such file or directory".
func TestDownAndStatusNameADirectoryThatIsNoCluster(t *testing.T) {
	tmp := t.TempDir()
	foreign := filepath.Join(tmp, "foreign")
	os.MkdirAll(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "file"), []byte("x"), 0o644)
	missing := filepath.Join(tmp, "missing")
	t.Chdir(tmp)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"down"}, "nacre-cluster is not a local Nacre cluster (no such directory): give --dir"},
		{[]string{"down", "--dir", missing}, missing + " is not a local Nacre cluster (no such directory)"},
		{[]string{"down", "--dir", foreign}, foreign + " is not a local Nacre cluster (no mgs directory)"},
		{[]string{"status", "--dir", missing}, missing + " is not a local Nacre cluster (no such directory)"},
		{[]string{"status", "--dir", foreign}, foreign + " is not a local Nacre cluster (no mgs directory)"},
	}
	for _, c := range cases {
		_, err := runNacre(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("nacre %s: %v, want an error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("down created %s", missing)
	}
}

// TestSelfNameIsWhatRunsThisBinary: up's hints ("Try: nacre status")
// name a command that works: scripts/up.sh runs bin/nacre, not on the
// PATH, so its hints must say bin/nacre.
func TestSelfNameIsWhatRunsThisBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "nacre")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	other := filepath.Join(dir, "other-nacre")
	os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755)
	exe := func() (string, error) { return bin, nil }
	found := func(p string) func(string) (string, error) {
		return func(string) (string, error) { return p, nil }
	}
	notFound := func(string) (string, error) { return "", os.ErrNotExist }
	cases := []struct {
		arg0   string
		lookup func(string) (string, error)
		want   string
	}{
		{"nacre", found(bin), "nacre"},
		{"bin/nacre", found(bin), "nacre"},
		{"bin/nacre", notFound, "bin/nacre"},
		{"bin/nacre", found(other), "bin/nacre"},
		{"nacre", found(other), bin},
	}
	for _, c := range cases {
		if got := selfNameFor(c.arg0, c.lookup, exe); got != c.want {
			t.Errorf("selfNameFor(%q): %q, want %q", c.arg0, got, c.want)
		}
	}
}
