package main

import (
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
