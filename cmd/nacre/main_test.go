package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNumberFlagsNameTheFlagAndTheForm: a flag value that does not parse
// names the flag and what to give, not Go's parser
// ("strconv.ParseInt: parsing \"abc\": invalid syntax").
func TestNumberFlagsNameTheFlagAndTheForm(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"setstripe", "-c", "abc", "/f"}, `-c/--stripe-count "abc": want a whole number, such as 4`},
		{[]string{"setstripe", "-i", "x", "/f"}, `-i/--stripe-index "x": want a whole number, such as 4`},
		{[]string{"put", "-c", "two", "/etc/hostname", "/f"}, `-c/--stripe-count "two": want a whole number, such as 4`},
		{[]string{"lfsck", "start", "-s", "abc"}, `-s/--speed "abc": the speed limit is 0 (no limit) or more objects per second`},
		{[]string{"lfsck", "start", "-s", "-5"}, `-s/--speed "-5": the speed limit is 0 (no limit) or more objects per second`},
		{[]string{"setstripe", "-c", "99999999999999999999", "/f"}, `-c/--stripe-count "99999999999999999999": out of range; want a whole number, such as 4`},
		{[]string{"stats", "--interval", "abc"}, `--interval "abc": want a duration with its unit, such as 500ms, 2s or 1m`},
		{[]string{"bench", "lfsck", "--sizes", "1x"}, `--sizes "1x": "1x" is not a number of files; give counts such as 100k,200k,1M`},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, err := runNacre(t, c.args...)
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %q", err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "strconv") {
				t.Errorf("error %q names Go's parser", err)
			}
		})
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
