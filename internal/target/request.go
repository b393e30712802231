package target

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
)

// FormatRequest is what `nacre format` is given, a field per flag:
// Identity checks it and makes the identity to format, and its messages
// name the flags.
type FormatRequest struct {
	Type     string // --type: mgs, mdt or ost
	Dir      string // --dir
	Fsname   string // --fsname
	Index    uint32 // --index
	IndexSet bool   // --index was given
	// MGSNode is --mgsnode, or else --mgs; MGSNodeSet says --mgsnode was
	// given.
	MGSNode    string
	MGSNodeSet bool
	Listen     string // --listen
	// DataListen and MetricsListen are --data-listen and
	// --metrics-listen; not given (…Set false), they take Listen's host
	// and a port picked at first start.
	DataListen       string
	DataListenSet    bool
	MetricsListen    string
	MetricsListenSet bool
	ReplicaID        uint64 // --replica-id
	Peers            string // --peers: ID=HOST:PORT,...
	Created          string // --created: RFC 3339
	// CheckMGS checks the form of an MGS address (client.CheckMGSAddr).
	CheckMGS func(addr string) error
}

// Identity checks r and returns the identity to format.
func (r FormatRequest) Identity() (Identity, error) {
	kind := Kind(r.Type)
	switch kind {
	case MGS, MDT, OST:
	default:
		return Identity{}, fmt.Errorf("--type %q: use mgs, mdt or ost", r.Type)
	}
	if r.Dir == "" {
		return Identity{}, fmt.Errorf("--dir is required")
	}
	if kind != MGS && r.MGSNode == "" {
		return Identity{}, fmt.Errorf("an %s needs the MGS address: --mgsnode HOST:PORT", kind)
	}
	if kind != MGS && r.CheckMGS != nil {
		// A bad address would be found only by the server, which would
		// then log its dial error many times a second.
		if err := r.CheckMGS(r.MGSNode); err != nil {
			return Identity{}, fmt.Errorf("--mgsnode %s: %w", r.MGSNode, err)
		}
	}
	// The other addresses default to --listen's host: a target formatted
	// to be reached at 192.0.2.10 must not serve its data or metadata
	// requests on loopback only.
	if host, _, err := net.SplitHostPort(r.Listen); err == nil {
		if !r.DataListenSet {
			r.DataListen = net.JoinHostPort(host, "0")
		}
		if !r.MetricsListenSet {
			r.MetricsListen = net.JoinHostPort(host, "0")
		}
	}
	for _, a := range []struct{ flag, v string }{{"listen", r.Listen}, {"data-listen", r.DataListen}} {
		if err := Advertisable(a.v); err != nil {
			return Identity{}, fmt.Errorf("--%s %s: %w", a.flag, a.v, err)
		}
	}
	id := Identity{Fsname: r.Fsname, Kind: kind, Index: r.Index, MGSNode: r.MGSNode, Listen: r.Listen, DataListen: r.DataListen, MetricsListen: r.MetricsListen}
	if err := setReplica(&id, r.ReplicaID, r.Peers, r.Created); err != nil {
		return Identity{}, err
	}
	if kind == MGS {
		for _, f := range []struct {
			flag string
			set  bool
		}{{"index", r.IndexSet}, {"mgsnode", r.MGSNodeSet}} {
			if f.set {
				return Identity{}, fmt.Errorf("--%s is not for an MGS (there is one per file system, and it is the MGS): leave it out", f.flag)
			}
		}
		id.MGSNode = ""
		if id.Listen == "127.0.0.1:0" {
			return Identity{}, fmt.Errorf("the MGS needs a fixed address that clients can be told: --listen HOST:PORT")
		}
	}
	return id, nil
}

// Advertisable checks a listen address that other servers and clients
// are told (through the MGS): it must name this machine as they reach it.
func Advertisable(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not HOST:PORT: %w", err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if host == "" {
			host = "no host"
		}
		return fmt.Errorf("a target's addresses are given to clients and the other servers, "+
			"so listening on every interface (%s) cannot be advertised; give the address they reach this machine at", host)
	}
	return nil
}

// setReplica fills the replica fields of a new identity from the format
// flags --replica-id, --peers (ID=HOST:PORT,...) and --created. Replicas
// of one MDT must start identical, and the root directory's times come
// from the creation time: every replica gets the same one.
func setReplica(id *Identity, rid uint64, peers, created string) error {
	if rid == 0 && peers == "" {
		if created != "" {
			return fmt.Errorf("--created goes with --replica-id and --peers")
		}
		return nil
	}
	id.Created = time.Unix(0, 0).UTC()
	if created != "" {
		t, err := time.Parse(time.RFC3339, created)
		if err != nil {
			return fmt.Errorf("--created %q: %v (want RFC 3339, e.g. 2026-11-21T00:00:00Z)", created, err)
		}
		id.Created = t.UTC()
	}
	if rid == 0 || peers == "" {
		return fmt.Errorf("--replica-id and --peers go together")
	}
	if id.Kind == OST {
		return fmt.Errorf("OSTs are not replicated")
	}
	id.ReplicaID, id.Peers = rid, map[uint64]string{}
	byAddr := map[string]uint64{}
	for _, p := range strings.Split(peers, ",") {
		k, a, ok := strings.Cut(strings.TrimSpace(p), "=")
		n, err := strconv.ParseUint(k, 10, 64)
		if !ok || err != nil || n == 0 || a == "" {
			return fmt.Errorf("--peers %q: want ID=HOST:PORT,...", peers)
		}
		if _, dup := id.Peers[n]; dup {
			return fmt.Errorf("--peers %q names replica %d twice: each replica once, with its --listen address", peers, n)
		}
		if o, dup := byAddr[a]; dup {
			return fmt.Errorf("--peers %q gives replicas %d and %d the same address %s: each replica is its own process with its own address", peers, o, n, a)
		}
		if _, port, err := net.SplitHostPort(a); err != nil || port == "0" {
			return fmt.Errorf("--peers %q: replica %d's address %s must be HOST:PORT with a fixed port (the others dial it)", peers, n, a)
		}
		id.Peers[n], byAddr[a] = a, n
	}
	if _, self := id.Peers[rid]; self && len(id.Peers) == 2 {
		return fmt.Errorf("--peers names 2 replicas: two replicas survive no failure (a majority of 2 is 2); use 3 (or 5)")
	}
	if a, self := id.Peers[rid]; self && a != id.Listen {
		return fmt.Errorf("--peers gives replica %d the address %s but --listen is %s", rid, a, id.Listen)
	}
	return nil
}
