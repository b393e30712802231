package localcluster

import (
	"net"
	"strconv"
	"testing"
)

// The fixed addresses of a cluster's Raft replicas must lie outside the
// kernel's ephemeral range, where a metrics listener on port 0 or an
// outgoing connection of another target can take them before their
// replica starts (a CI run lost a replica that way), and must differ.
func TestPickedPortsLieBelowTheEphemeralRangeAndDiffer(t *testing.T) {
	lo, hi := fixedPortRange()
	if hi-lo < 1000 {
		t.Skipf("this machine's ephemeral range starts at %d: no room below it", hi)
	}
	first := "127.0.0.1:" + strconv.Itoa(lo+1)
	p := newPortPicker(first)
	seen := map[string]bool{first: true}
	for i := 0; i < 50; i++ {
		a, err := p.pick()
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("pick %d returned %s twice (or a port it was told is taken)", i, a)
		}
		seen[a] = true
		_, ps, _ := net.SplitHostPort(a)
		n, _ := strconv.Atoi(ps)
		if n < lo || n >= hi {
			t.Fatalf("picked %s: outside [%d, %d), below the ephemeral range", a, lo, hi)
		}
	}
}

// A port in use is never handed out.
func TestPickSkipsAPortInUse(t *testing.T) {
	lo, hi := fixedPortRange()
	if hi-lo < 1000 {
		t.Skipf("no room below the ephemeral range")
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	busy := map[string]bool{}
	for port := lo; port < hi && len(held) < 200; port++ {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		held = append(held, l)
		busy[l.Addr().String()] = true
	}
	p := newPortPicker()
	for i := 0; i < 200; i++ {
		a, err := p.pick()
		if err != nil {
			t.Fatal(err)
		}
		if busy[a] {
			t.Fatalf("picked %s, which a listener holds", a)
		}
	}
}
