package main

import (
	"strings"
	"testing"
)

// TestLfsckFlagsAreCheckedBeforeAnyRPC: an unknown component or error
// policy, or a speed or window out of range, is refused with the choices, not with the MDT's "rpc error: code
// = InvalidArgument", and `lfsck status` without -t says what to give.
func TestLfsckFlagsAreCheckedBeforeAnyRPC(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"lfsck", "start", "-t", "bogus"}, `lfsck start -t "bogus": unknown component; give scrub, namespace, layout or all`},
		{[]string{"lfsck", "start", "-t", "scrub,lyout"}, `-t "lyout"`},
		{[]string{"lfsck", "start", "-e", "stop"}, `lfsck start -e "stop": give continue or failout`},
		{[]string{"lfsck", "start", "-t", ""}, `lfsck start -t "": give scrub, namespace, layout or all`}, // ran every component
		{[]string{"lfsck", "status"}, "give -t scrub, -t namespace or -t layout"},
		{[]string{"lfsck", "start", "--mdt", "-1"}, "--mdt -1: an MDT index is 0 or more"},
		{[]string{"lfsck", "query", "-A", "--mdt", "0"}, "not both"},
		{[]string{"lfsck", "start", "-s", "-5"}, `-s/--speed "-5": the speed limit is 0 (no limit) or more objects per second`}, // strconv.ParseUint: ...
		{[]string{"lfsck", "set", "-s", "x"}, `-s/--speed "x": the speed limit is 0 (no limit) or more`},
		{[]string{"lfsck", "start", "-w", "-1"}, `-w/--window "-1": the window must be 1 to 1048576`},
		{[]string{"lfsck", "set", "-w", "2000000"}, `-w/--window "2000000": the window must be 1 to 1048576`},
		{[]string{"lfsck", "strat"}, `unknown command "strat" for "nacre lfsck"`},
		{[]string{"replica", "lsit"}, `unknown command "lsit" for "nacre replica"`},
	}
	for _, c := range cases {
		_, err := runNacre(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "rpc error") {
			t.Errorf("nacre %s: %v, want an error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
