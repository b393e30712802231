package itest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"nacre/test/testcluster"
)

// TestFuseStressNG runs Debian's stress-ng file-system stressors against a
// mount, one instance each, for a few seconds, with --verify; every
// stressor must finish without a failure. NACRE_STRESS_SECONDS lengthens
// the run.
func TestFuseStressNG(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("stress-ng"); err != nil {
		t.Skip("stress-ng is not installed (apt-get install stress-ng)")
	}
	secs := "4"
	if s := os.Getenv("NACRE_STRESS_SECONDS"); s != "" {
		secs = s
	}
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	groups := [][]string{
		{"--dir", "1", "--dentry", "1", "--rename", "1", "--link", "1", "--symlink", "1", "--xattr", "1",
			"--chmod", "1", "--utime", "1", "--getdent", "1", "--chown", "1"},
		{"--hdd", "1", "--hdd-bytes", "16M", "--fallocate", "1", "--fallocate-bytes", "16M",
			"--flock", "1", "--lockf", "1", "--fcntl", "1", "--lockofd", "1", "--locka", "1",
			"--mmap", "1", "--mmap-file", "--mmap-async", "--mmap-bytes", "4M",
			"--seek", "1", "--seek-size", "16M", "--iomix", "1", "--iomix-bytes", "16M"},
	}
	for i, g := range groups {
		dir := m.Path("stress", string(rune('a'+i)))
		if err := os.MkdirAll(dir, 0o777); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"--temp-path", dir, "--verify", "--timeout", secs + "s", "--metrics-brief"}, g...)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, "stress-ng", args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		cancel()
		t.Logf("stress-ng %s (%.1fs):\n%s", strings.Join(g, " "), time.Since(start).Seconds(), out.String())
		if err != nil {
			t.Fatalf("stress-ng failed: %v", err)
		}
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, " fail: ") || strings.Contains(line, "FAILED") {
				t.Errorf("stress-ng reported: %s", line)
			}
		}
	}
}
