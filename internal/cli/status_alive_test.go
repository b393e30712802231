package cli

import (
	"os/exec"
	"testing"
)

// status marks a target's pid alive only when that pid serves the target's
// own directory: after a reboot the pid the MGS last heard may belong to
// any program, or to another target.
func TestTargetAliveWantsTheTargetsOwnServeProcess(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	// A shell whose command line reads "... serve --dir DIR" (the `; true`
	// keeps it from exec'ing sleep and so losing those arguments).
	cmd := exec.Command("sh", "-c", "sleep 30; true", "serve", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	plain := exec.Command("sleep", "30")
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { plain.Process.Kill(); plain.Wait() }()

	for _, c := range []struct {
		name string
		pid  int
		dir  string
		want bool
	}{
		{"serves this directory", cmd.Process.Pid, dir, true},
		{"serves another directory", cmd.Process.Pid, other, false},
		{"no directory known, runs serve", cmd.Process.Pid, "", true},
		{"another program", plain.Process.Pid, dir, false},
		{"another program, no directory known", plain.Process.Pid, "", false},
		{"no pid", 0, dir, false},
	} {
		if got := targetAlive(c.pid, c.dir); got != c.want {
			t.Errorf("%s: targetAlive(%d, %q) = %v, want %v", c.name, c.pid, c.dir, got, c.want)
		}
	}
	plain.Process.Kill()
	plain.Wait()
	if targetAlive(plain.Process.Pid, "") {
		t.Errorf("a reaped process counts as alive")
	}
}
