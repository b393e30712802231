package cli

import (
	"os/exec"
	"testing"
)

// Names shown at a terminal: printable UTF-8 as it is, anything else
// quoted so that bash reads back the same bytes.
func TestQuoteNameRoundTripsThroughTheShell(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"plain.txt", "plain.txt"},
		{"café ünï", "café ünï"},
		{"a\nb", `$'a\nb'`},
		{"tab\there", `$'tab\there'`},
		{"caf\xe9", `$'caf\xe9'`},
		{"esc\x1b[31m", `$'esc\x1b[31m'`},
		{"it's\n", `$'it\'s\n'`},
		{"back\\slash\x7f", `$'back\\slash\x7f'`},
	} {
		got := QuoteName(c.name)
		if got != c.want {
			t.Errorf("QuoteName(%q) = %s, want %s", c.name, got, c.want)
			continue
		}
		if got == c.name {
			continue
		}
		out, err := exec.Command("bash", "-c", "printf '%s' "+got).Output()
		if err != nil {
			t.Fatalf("bash: %v", err)
		}
		if string(out) != c.name {
			t.Errorf("bash reads %s back as %q, not %q", got, out, c.name)
		}
	}
}
