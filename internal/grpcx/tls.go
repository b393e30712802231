package grpcx

import (
	"context"
	"crypto/x509"
	"net"
	"strings"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	"nacre/internal/errno"
	"nacre/internal/netguard"
	"nacre/internal/pki"
)

// serverCreds are gRPC's TLS credentials that log the peers they refuse:
// gRPC itself only closes the connection.
type serverCreds struct {
	credentials.TransportCredentials
	warn *netguard.Warner
}

func (c serverCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	out, info, err := c.TransportCredentials.ServerHandshake(conn)
	if err != nil && c.warn != nil {
		c.warn.Warn(netguard.PeerIP(conn.RemoteAddr()), "connection refused: TLS handshake failed",
			"port", "gRPC", "remote", conn.RemoteAddr().String(), "err", err)
	}
	return out, info, err
}

func (c serverCreds) Clone() credentials.TransportCredentials {
	return serverCreds{c.TransportCredentials.Clone(), c.warn}
}

// methodRole is the role a call of method needs from its peer's
// certificate. Raft and what only targets do (register, heartbeat, take
// FID sequences, precreate and destroy objects, the checker's calls to
// OSTs) need a node's: a client holding one of these could make itself a
// target or a replica. The admin services need an admin's (or a node's:
// the MDS's checker drives the OSTs' fault points), and so do the
// nodemaps (a client could unsquash itself). The rest, files and
// locks, and RaftAdmin's Members (clients find a group's leader with
// it), any certificate of the cluster.
func methodRole(method string) pki.Role {
	svc, name, _ := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	switch svc {
	case "nacre.v1.Raft":
		return pki.RoleNode
	case "nacre.v1.RaftAdmin":
		if name == "Members" {
			return pki.RoleClient
		}
		return pki.RoleAdmin
	case "nacre.v1.Lfsck", "nacre.v1.Fault":
		return pki.RoleAdmin
	case "nacre.v1.MGS":
		switch name {
		case "Register", "Heartbeat", "AllocSeqRange":
			return pki.RoleNode
		case "Deregister", "NodemapSet", "NodemapRemove", "NodemapList":
			return pki.RoleAdmin
		}
	case "nacre.v1.OSS":
		switch name {
		case "Precreate", "Cleanup", "Destroy", "LfsckCheck", "LfsckSummary", "LfsckOrphans", "LfsckRepair", "FaultObject":
			return pki.RoleNode
		case "LfsckDigest", "FaultArm":
			return pki.RoleAdmin
		}
	}
	return pki.RoleClient
}

// checkRole refuses a call whose peer's certificate lacks the role its
// method needs; a server without TLS checks nothing.
func (o *serverOpts) checkRole(ctx context.Context, method string) error {
	if o.creds == nil {
		return nil
	}
	need := methodRole(method)
	cert := PeerCert(ctx)
	if err := pki.Need(cert, need, method); err != nil {
		if o.warn != nil {
			var addr net.Addr
			if p, ok := peer.FromContext(ctx); ok {
				addr = p.Addr
			}
			remote := ""
			if addr != nil {
				remote = addr.String()
			}
			o.warn.Warn(netguard.PeerIP(addr), "call refused: the peer's certificate lacks the role", "method", method, "remote", remote,
				"certificate", pki.Describe(cert), "need", string(need))
		}
		return errno.New(errno.PermissionDenied, err.Error())
	}
	return nil
}

// PeerCert is the certificate the peer of a served call presented (nil
// without TLS): checked against the cluster's CA in the handshake.
func PeerCert(ctx context.Context) *x509.Certificate {
	p, ok := peer.FromContext(ctx)
	if !ok || p.AuthInfo == nil {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok {
		return nil
	}
	return pki.PeerCert(ti.State)
}
