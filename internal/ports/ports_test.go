package ports

import (
	"net"
	"strconv"
	"strings"
	"testing"
)

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(ps)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// needRoom skips on a machine whose ephemeral range leaves no room below
// it; Listen then falls back to the kernel's choice.
func needRoom(t *testing.T) (int, int) {
	lo, hi := Range()
	if hi-lo < 1000 {
		t.Skipf("this machine's ephemeral range starts at %d: no room below it", hi)
	}
	return lo, hi
}

// Picked addresses lie below the ephemeral range, differ, and avoid the
// ports a picker was told are taken.
func TestPickedPortsLieBelowTheEphemeralRangeAndDiffer(t *testing.T) {
	lo, hi := needRoom(t)
	taken := "127.0.0.1:" + strconv.Itoa(lo+1)
	p := NewPicker(taken)
	seen := map[string]bool{taken: true}
	for i := 0; i < 50; i++ {
		a, err := p.Pick("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if seen[a] {
			t.Fatalf("pick %d returned %s twice (or a port it was told is taken)", i, a)
		}
		seen[a] = true
		plo, phi := pickRange(lo, hi)
		if n := portOf(t, a); n < plo || n >= phi {
			t.Fatalf("picked %s: outside [%d, %d), the picks' part of the range below the ephemeral one [%d, %d)", a, plo, phi, lo, hi)
		}
	}
}

// Listen on port 0 never returns a port in use nor one a Picker may have
// handed out, and keeps an explicit port as given.
func TestListenSkipsPortsInUseAndKeepsAnExplicitPort(t *testing.T) {
	rlo, hi := needRoom(t)
	_, lo := pickRange(rlo, hi)
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	// Hold every other port of the range's first 400, so that a random
	// choice meets held ports often.
	busy := map[int]bool{}
	for port := lo; port < hi && port < lo+400; port += 2 {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			held = append(held, l)
			busy[port] = true
		}
	}
	for i := 0; i < 100; i++ {
		l, err := Listen("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n := portOf(t, l.Addr().String())
		l.Close()
		if busy[n] || n < lo || n >= hi {
			t.Fatalf("Listen took port %d (held: %v, range [%d, %d))", n, busy[n], lo, hi)
		}
	}
	l, err := Listen("127.0.0.1:" + strconv.Itoa(lo+1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if n := portOf(t, l.Addr().String()); n != lo+1 {
		t.Fatalf("Listen on port %d took %d", lo+1, n)
	}
	if _, err := Listen("127.0.0.1:" + strconv.Itoa(lo)); err == nil {
		t.Fatalf("Listen on held port %d succeeded", lo)
	}
}

// TestListenOnAnAddressOfAnotherMachineSaysSo: before, an address of no
// interface here (a mistyped --listen) was tried on 200 ports and failed
// with "none of 200 ports ... is free".
func TestListenOnAnAddressOfAnotherMachineSaysSo(t *testing.T) {
	needRoom(t)
	// 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never an address here.
	for _, f := range []func() error{
		func() error { l, err := Listen("192.0.2.1:0"); closeIf(l); return err },
		func() error { _, err := NewPicker().Pick("192.0.2.1"); return err },
	} {
		err := f()
		if err == nil || !strings.Contains(err.Error(), "not an address of this machine") {
			t.Fatalf("listen on an address of another machine: %v, want it named as such", err)
		}
	}
}

func closeIf(l net.Listener) {
	if l != nil {
		l.Close()
	}
}
