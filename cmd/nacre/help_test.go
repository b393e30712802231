package main

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestHelpSaysEachDefaultOnce: no flag's help names its default twice, as
// --mgs did with NACRE_MGS set ("(default $NACRE_MGS) (default
// 127.0.0.1:7001)"): the usage names it in words and the flag's own
// default, printed after it by the help, is left empty. Every command is
// checked, with every variable the binary reads set.
func TestHelpSaysEachDefaultOnce(t *testing.T) {
	vars := map[string]string{}
	for _, v := range envVars {
		vars[v.name] = "127.0.0.1:7001"
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []string{c.LocalFlags().FlagUsages(), c.InheritedFlags().FlagUsages()} {
			for _, line := range strings.Split(fs, "\n") {
				if strings.Count(line, "(default") > 1 {
					t.Errorf("%s: %s", c.CommandPath(), strings.TrimSpace(line))
				}
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootIn(envOf(vars)))
}

// TestMGSComesFromTheEnvironmentUnlessGiven: with the flag's default
// empty, NACRE_MGS is still the address of a command without --mgs, and
// --mgs still overrides it.
func TestMGSComesFromTheEnvironmentUnlessGiven(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "127.0.0.1:7001"},
		{[]string{"ls", "--mgs", "127.0.0.2:7002"}, "127.0.0.2:7002"},
		{[]string{"--mgs", "127.0.0.2:7002", "ls"}, "127.0.0.2:7002"},
	} {
		root := newRootIn(envOf(map[string]string{"NACRE_MGS": "127.0.0.1:7001"}))
		var got string
		ls, _, err := root.Find([]string{"ls"})
		if err != nil {
			t.Fatal(err)
		}
		ls.RunE = func(cmd *cobra.Command, _ []string) error {
			got = cmd.Flag("mgs").Value.String()
			return nil
		}
		root.SetArgs(c.args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got != c.want {
			t.Errorf("nacre %s: MGS %q, want %q", strings.Join(c.args, " "), got, c.want)
		}
	}
}
