package main

import (
	"strings"
	"testing"
)

// TestStripeFlags: 0 is the default, as Lustre's lfs takes it (the
// command goes on to reach the MGS, which is not there); what is not a
// layout is refused before that.
func TestStripeFlags(t *testing.T) {
	const reached = "cannot reach the MGS"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"setstripe", "-c", "0", "/f"}, reached},
		{[]string{"setstripe", "-S", "0", "/f"}, reached},
		{[]string{"setstripe", "-c", "2", "-S", "0K", "/f"}, reached},
		{[]string{"put", "-c", "0", "/etc/hostname", "/f"}, reached},
		{[]string{"setstripe", "-S", "100K", "/f"}, "64"},
		{[]string{"setstripe", "-c", "-2", "/f"}, "stripe count -2 is invalid"},
		{[]string{"setstripe", "-i", "-2", "/f"}, "an OST index is 0 or more"},
		{[]string{"setstripe", "/f"}, "give at least one of"},
	}
	for _, c := range cases {
		_, err := runNacre(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("nacre %s: %v, want an error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
