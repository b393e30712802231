package server

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"nacre/internal/pki"
	"nacre/internal/target"
)

// loadCreds loads the target's TLS credentials, named by its identity
// (nil if it names none).
func loadCreds(dir string, id target.Identity) (*pki.Creds, error) {
	p := id.TLSPath(dir)
	if p == "" {
		return nil, nil
	}
	c, err := pki.Load(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w (\"tls_dir\" in %s names it)", id.Name(), err, target.IdentityFile)
	}
	if c.Role() != pki.RoleNode {
		return nil, fmt.Errorf("%s: the certificate in %s is %s, not a node's: a target serves with a node certificate (nacre format --tls-dir issues one)",
			id.Name(), p, pki.Describe(c.Leaf))
	}
	return c, nil
}

// checkBinding refuses to serve without TLS on an address other than
// loopback: without TLS any process that reaches a port may claim any
// uid and use the admin services, so such a port is for one machine,
// unless the operator says otherwise (insecure), which is logged.
func checkBinding(id target.Identity, tls, insecure bool, log *slog.Logger) error {
	if tls {
		return nil
	}
	for _, a := range []struct{ flag, addr string }{{"listen", id.Listen}, {"data_listen", id.DataListen}} {
		if a.addr == "" || loopback(a.addr) {
			continue
		}
		if !insecure {
			return fmt.Errorf("%s: %q is %s, not a loopback address, and the target has no TLS credentials: anyone who reaches it could claim any user; "+
				"format the target with --tls-dir (a cluster CA), or serve with --insecure on a network only trusted nodes reach", id.Name(), a.flag, a.addr)
		}
		log.Warn("serving without TLS on an address other than loopback (--insecure): any process that reaches the port can claim any user and use the admin services",
			"addr", a.addr)
	}
	return nil
}

// securityMode is how the target's links are made, for status
// (pb.TargetInfo.Security): "tls", "insecure" (no TLS off loopback:
// checkBinding let it through), "" (no TLS, on loopback).
func securityMode(id target.Identity, tls bool) string {
	if tls {
		return "tls"
	}
	for _, a := range []string{id.Listen, id.DataListen} {
		if a != "" && !loopback(a) {
			return "insecure"
		}
	}
	return ""
}

// loopback reports whether addr's host is a loopback IP or localhost.
func loopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		h = addr
	}
	if h == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}
