package target

import (
	"strings"
	"testing"
)

// TestFormatRequestRefusesBadPeers: --peers naming a replica twice, two
// replicas at one address, a port picked at start (the others could not
// dial it), or a group of two, and flags an MGS has no use for, are
// refused with what to give instead.
func TestFormatRequestRefusesBadPeers(t *testing.T) {
	mdt := FormatRequest{Type: "mdt", Dir: "d", Fsname: "x", ReplicaID: 1, Listen: "127.0.0.21:7101", MGSNode: "127.0.0.1:7001"}
	for _, c := range []struct{ peers, want string }{
		{"1=127.0.0.21:7101,1=127.0.0.22:7101", "names replica 1 twice"},
		{"1=127.0.0.21:7101,2=127.0.0.21:7101,3=127.0.0.23:7101", "the same address"},
		{"1=127.0.0.21:7101,2=127.0.0.22:0,3=127.0.0.23:7101", "a fixed port"},
		{"1=127.0.0.21:7101,2=127.0.0.22:7101", "two replicas survive no failure"},
	} {
		r := mdt
		r.Peers = c.peers
		if _, err := r.Identity(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--peers %s: %v, want %q", c.peers, err, c.want)
		}
	}
	r := mdt
	r.Peers = "1=127.0.0.21:7101,2=127.0.0.22:7101,3=127.0.0.23:7101"
	if id, err := r.Identity(); err != nil || len(id.Peers) != 3 || id.ReplicaID != 1 {
		t.Errorf("three replicas: %+v, %v", id, err)
	}
	mgs := FormatRequest{Type: "mgs", Dir: "m", Fsname: "x", Listen: "127.0.0.1:7001"}
	for _, r := range []FormatRequest{{IndexSet: true, Index: 2}, {MGSNodeSet: true, MGSNode: "127.0.0.1:7001"}} {
		r.Type, r.Dir, r.Fsname, r.Listen = mgs.Type, mgs.Dir, mgs.Fsname, mgs.Listen
		if _, err := r.Identity(); err == nil || !strings.Contains(err.Error(), "is not for an MGS") {
			t.Errorf("an MGS with %+v: %v", r, err)
		}
	}
	// --mgs is no --mgsnode: an MGS formatted with NACRE_MGS set records none.
	r = mgs
	r.MGSNode = "127.0.0.1:7001"
	if id, err := r.Identity(); err != nil || id.MGSNode != "" {
		t.Errorf("an MGS with --mgs: %+v, %v", id, err)
	}
}

// TestFormatRequestAddressesFollowListen: the data and metrics addresses
// not given take --listen's host; given ones are kept, and a wildcard
// (which would be advertised to clients as such) is refused.
func TestFormatRequestAddressesFollowListen(t *testing.T) {
	r := FormatRequest{Type: "ost", Dir: "o", Fsname: "x", MGSNode: "127.0.0.1:7001", Listen: "127.0.0.31:7201",
		DataListen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0"}
	id, err := r.Identity()
	if err != nil || id.DataListen != "127.0.0.31:0" || id.MetricsListen != "127.0.0.31:0" {
		t.Fatalf("%+v, %v: want data and metrics on 127.0.0.31", id, err)
	}
	r.DataListen, r.DataListenSet = "127.0.0.32:7102", true
	if id, err = r.Identity(); err != nil || id.DataListen != "127.0.0.32:7102" {
		t.Fatalf("data %q (%v): want the one given", id.DataListen, err)
	}
	r.DataListen = "0.0.0.0:7301"
	if _, err := r.Identity(); err == nil || !strings.Contains(err.Error(), "--data-listen 0.0.0.0:7301: a target's addresses are given to clients") {
		t.Fatalf("a wildcard data address: %v", err)
	}
	if _, err := (FormatRequest{Type: "disk", Dir: "d"}).Identity(); err == nil || err.Error() != `--type "disk": use mgs, mdt or ost` {
		t.Fatalf("--type disk: %v", err)
	}
}
