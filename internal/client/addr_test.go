package client

import (
	"strings"
	"testing"
)

func TestCheckMGSAddr(t *testing.T) {
	for _, c := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:41000", true},
		{"localhost:1", true},
		{"[::1]:41000", true},
		{"h1:1,h2:2,h3:3", true},
		{"foo", false},
		{"127.0.0.1", false},
		{"127.0.0.1:http", false},
		{"127.0.0.1:0", false},
		{"127.0.0.1:70000", false},
		{"h1:1,h2", false},
	} {
		err := CheckMGSAddr(c.addr)
		if (err == nil) != c.ok {
			t.Errorf("CheckMGSAddr(%q) = %v, want ok=%v", c.addr, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "HOST:PORT") {
			t.Errorf("CheckMGSAddr(%q): %v does not show the form wanted", c.addr, err)
		}
	}
}
