package admin

import (
	"bytes"
	"context"
	"nacre/internal/cli"
	"strings"
	"testing"
)

// TestStatusNeedsOneComponent: status shows one component, so anything
// but one component's name is refused before the cluster is asked.
// Before, a list ("scrub,layout", "scrub,") passed the check, found no
// report of that name, and the CLI crashed (or printed null with --json).
func TestStatusNeedsOneComponent(t *testing.T) {
	for _, tc := range []struct {
		component string
		ok        bool
	}{
		{"scrub", true},
		{"namespace", true},
		{"layout", true},
		{"scrub,layout", false},
		{"scrub,", false},
		{" scrub", false},
		{"all", false},
		{"default", false},
		{"", false},
		{"oi", false},
	} {
		t.Run(tc.component, func(t *testing.T) {
			var out bytes.Buffer
			// No MGS: a component accepted fails later, on the connection.
			err := Status(context.Background(), cli.Env{Out: &out, Err: &out}, 0, tc.component, false)
			refused := err != nil && strings.Contains(err.Error(), "give one of scrub, namespace, layout")
			if refused == tc.ok {
				t.Fatalf("-t %q: error %v, want refused=%v", tc.component, err, !tc.ok)
			}
		})
	}
}
