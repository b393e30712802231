package main

import (
	"strings"
	"testing"
)

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
