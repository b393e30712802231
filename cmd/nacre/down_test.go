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
