// Package ports gives servers the ports they keep: a target formatted
// with port 0 picks its ports at its first start and writes them into its
// identity, and a replicated group's addresses are fixed when it is
// formatted. Those ports come from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range). A port from inside that range, free when
// picked, can be taken before its owner binds it (again) by any socket that
// lets the kernel choose: another server's listener on port 0, or any
// outgoing connection's local port; a Raft replica whose port is taken
// stays out at every restart.
//
// The range is split in two. A Picker's ports are free when picked but
// bound later, by another process; a listener on port 0 binds at once. If
// both drew from the same ports, a server's metrics listener could take
// the port just picked for the MGS that starts beside it. So picks come
// from the lower third and port-0 listeners from the rest, and neither can
// take the other's port in that window.
package ports

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Listen listens on addr; where addr's port is 0 it takes a free port below
// the ephemeral range instead of one the kernel chooses.
func Listen(addr string) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port != "0" {
		return net.Listen("tcp", addr)
	}
	lo, hi := Range()
	if hi-lo < 1000 {
		// No room below the ephemeral range (an unusual sysctl): the
		// kernel's choice is the best left.
		return net.Listen("tcp", addr)
	}
	_, mid := pickRange(lo, hi)
	return listenIn(host, mid, hi)
}

// pickRange is the part of [lo, hi) a Picker draws from; Listen on port 0
// draws from the rest.
func pickRange(lo, hi int) (int, int) { return lo, lo + (hi-lo)/3 }

// listenIn listens on a random free port of [lo, hi) on host.
func listenIn(host string, lo, hi int) (net.Listener, error) {
	var lastErr error
	for try := 0; try < 200; try++ {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(lo+rand.IntN(hi-lo))))
		if err == nil {
			return ln, nil
		}
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			// No port will do: the host is not an address of this
			// machine (a mistyped --listen, or the other machine's).
			return nil, fmt.Errorf("listen on %s: it is not an address of this machine (check --listen; `ip -br addr` lists this machine's addresses): %w", host, err)
		}
		lastErr = err
	}
	return nil, fmt.Errorf("listen on %s: none of 200 ports tried in %d-%d is free (last: %v)", host, lo, hi-1, lastErr)
}

// Picker hands out addresses for servers that start later: free when
// picked, below the ephemeral range, and never the same port twice.
type Picker struct {
	used map[int]bool
}

// NewPicker returns a picker that never hands out the ports of taken (the
// addresses of a group's existing replicas).
func NewPicker(taken ...string) *Picker {
	p := &Picker{used: map[int]bool{}}
	for _, a := range taken {
		if _, port, err := net.SplitHostPort(a); err == nil {
			if n, err := strconv.Atoi(port); err == nil {
				p.used[n] = true
			}
		}
	}
	return p
}

// Pick returns an address on host whose port is free now.
func (p *Picker) Pick(host string) (string, error) {
	lo, hi := Range()
	for try := 0; try < 200; try++ {
		var ln net.Listener
		var err error
		if hi-lo < 1000 {
			ln, err = net.Listen("tcp", net.JoinHostPort(host, "0"))
		} else {
			plo, phi := pickRange(lo, hi)
			ln, err = listenIn(host, plo, phi)
		}
		if err != nil {
			return "", fmt.Errorf("pick a port: %w", err)
		}
		addr := ln.Addr().String()
		ln.Close()
		_, port, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(port)
		if !p.used[n] {
			p.used[n] = true
			return addr, nil
		}
	}
	return "", fmt.Errorf("pick a port on %s: every free one tried was handed out already", host)
}

// Range is [lo, hi): the 12,000 ports below the kernel's ephemeral range
// (32768 by default), leaving the well-known ports below 1024 alone.
func Range() (int, int) {
	hi := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				hi = n
			}
		}
	}
	return max(hi-12000, 1024), hi
}
