package client

import "testing"

// TestSameMGSOfReplicatedMGSs: the MGS list a mount recorded and the one
// a command is given name the same MGS when they share a replica (after
// `nacre replica add` or `replace` on the MGS they differ), and not when
// they share none.
func TestSameMGSOfReplicatedMGSs(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", "127.0.0.1:1,127.0.0.1:2,127.0.0.1:4", true},
		{"127.0.0.1:1,127.0.0.1:2", "localhost:2", true},
		{"127.0.0.1:1,127.0.0.1:2", "127.0.0.1:3,127.0.0.1:4", false},
		{"127.0.0.1:1", "127.0.0.1:2", false},
	} {
		if got := SameMGS(c.a, c.b); got != c.want {
			t.Errorf("SameMGS(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
