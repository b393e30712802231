package localcluster

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// portPicker hands out loopback addresses that are fixed before their
// process starts: the MGS's, and every Raft replica's (each replica's
// identity names its peers). They come from below the kernel's ephemeral
// port range. A port picked from inside that range, free when picked, can
// be taken before its target binds it by any socket that lets the kernel
// choose: another target's metrics listener on port 0, or an outgoing
// connection's local port. The port then stays taken at every restart.
type portPicker struct {
	used map[int]bool
}

// newPortPicker returns a picker that never hands out the ports of addrs
// (a group's existing replicas) or a port twice.
func newPortPicker(addrs ...string) *portPicker {
	p := &portPicker{used: map[int]bool{}}
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err == nil {
			if n, err := strconv.Atoi(port); err == nil {
				p.used[n] = true
			}
		}
	}
	return p
}

// pick returns a loopback address whose port is free now and lies below
// the ephemeral range.
func (p *portPicker) pick() (string, error) {
	lo, hi := fixedPortRange()
	if hi-lo < 1000 {
		// No room below the ephemeral range (an unusual sysctl): let the
		// kernel choose, as the best left.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("pick a loopback port: %w", err)
		}
		defer ln.Close()
		return ln.Addr().String(), nil
	}
	var lastErr error
	for try := 0; try < 200; try++ {
		port := lo + rand.IntN(hi-lo)
		if p.used[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			lastErr = err
			continue
		}
		ln.Close()
		p.used[port] = true
		return addr, nil
	}
	return "", fmt.Errorf("pick a loopback port in %d-%d: none of 200 tried is free (last: %v)", lo, hi-1, lastErr)
}

// fixedPortRange is [lo, hi): the 12,000 ports below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range, 32768 by default),
// leaving the well-known ports below 1024 alone.
func fixedPortRange() (int, int) {
	hi := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				hi = n
			}
		}
	}
	lo := max(hi-12000, 1024)
	return lo, hi
}
