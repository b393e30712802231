package main

import (
	"bytes"
	"strings"
	"testing"
)

// runNacre runs the command line in-process (no MGS: the checks tested
// here come before any connection).
func runNacre(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"--mgs", "127.0.0.1:1"}, args...))
	err := root.Execute()
	return out.String(), err
}

func TestStripeFlagsRefuseZeroCountAndSize(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"setstripe", "-c", "0", "/f"}, "0 is not a valid stripe count"},
		{[]string{"setstripe", "-S", "0", "/f"}, "0 is not a valid stripe size"},
		{[]string{"setstripe", "-c", "2", "-S", "0K", "/f"}, "0 is not a valid stripe size"},
		{[]string{"setstripe", "-i", "-2", "/f"}, "an OST index is 0 or more"},
		{[]string{"put", "-c", "0", "/etc/hostname", "/f"}, "0 is not a valid stripe count"},
		{[]string{"setstripe", "/f"}, "give at least one of"},
	}
	for _, c := range cases {
		_, err := runNacre(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("nacre %s: %v, want an error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

func TestRmWithoutOperands(t *testing.T) {
	if _, err := runNacre(t, "rm"); err == nil || !strings.Contains(err.Error(), "give the paths to remove") {
		t.Errorf("rm: %v", err)
	}
	if _, err := runNacre(t, "rm", "-f"); err != nil {
		t.Errorf("rm -f with no operand, as rm(1), is no error: %v", err)
	}
}
