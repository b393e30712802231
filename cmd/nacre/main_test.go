package main

import "testing"

func TestPlainRPCDropsTheGRPCWrapping(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"fault inject /f: rpc error: code = FailedPrecondition desc = stripe 9: the file has 2 stripes", "fault inject /f: stripe 9: the file has 2 stripes"},
		{"rpc error: code = Unavailable desc = connection refused", "connection refused"},
		{"open big.iso: no such file or directory", "open big.iso: no such file or directory"},
	} {
		if got := plainRPC(c.in); got != c.want {
			t.Errorf("plainRPC(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
