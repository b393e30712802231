package nodemap

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"slices"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/pki"
)

func pairs(t *testing.T, s string) []*pb.IDPair {
	t.Helper()
	m, err := ParseIDMap("uid", s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The nodemaps of the tests: root squashed, ids trusted; ids mapped; ids
// mapped and unknown ones refused; root trusted and ids mapped.
func testMaps(t *testing.T) map[string]*Map {
	return map[string]*Map{
		"squash": New(&pb.Nodemap{Client: "c", SquashRoot: true, Trusted: true}),
		"mapped": New(&pb.Nodemap{Client: "c", SquashRoot: true, SquashUid: 99, SquashGid: 98,
			UidMap: pairs(t, "1000:5000,1001:5001"), GidMap: pairs(t, "100:500,101:501")}),
		"deny": New(&pb.Nodemap{Client: "c", SquashRoot: true, DenyUnknown: true,
			UidMap: pairs(t, "1000:5000"), GidMap: pairs(t, "100:500")}),
		"admin": New(&pb.Nodemap{Client: "c", UidMap: pairs(t, "1000:5000"), GidMap: pairs(t, "100:500")}),
	}
}

func TestCredMapsClientIdsToTheFileSystems(t *testing.T) {
	ms := testMaps(t)
	for _, tc := range []struct {
		name, m string
		in      *pb.Cred
		want    *pb.Cred
		denied  bool
	}{
		{"root squashed, groups dropped", "squash", &pb.Cred{Uid: 0, Gid: 0, Groups: []uint32{0, 10}}, &pb.Cred{Uid: SquashID, Gid: SquashID}, false},
		{"no cred is root's, squashed", "squash", nil, &pb.Cred{Uid: SquashID, Gid: SquashID}, false},
		{"trusted ids as sent", "squash", &pb.Cred{Uid: 1000, Gid: 100, Groups: []uint32{10, 20}}, &pb.Cred{Uid: 1000, Gid: 100, Groups: []uint32{10, 20}}, false},
		{"trusted gid 0 of a user squashed", "squash", &pb.Cred{Uid: 1000, Gid: 0, Groups: []uint32{0, 10}}, &pb.Cred{Uid: 1000, Gid: SquashID, Groups: []uint32{SquashID, 10}}, false},
		{"mapped", "mapped", &pb.Cred{Uid: 1000, Gid: 100, Groups: []uint32{100, 101}}, &pb.Cred{Uid: 5000, Gid: 500, Groups: []uint32{500, 501}}, false},
		{"unmapped groups left out", "mapped", &pb.Cred{Uid: 1001, Gid: 100, Groups: []uint32{7, 101, 8}}, &pb.Cred{Uid: 5001, Gid: 500, Groups: []uint32{501}}, false},
		{"unknown uid squashed, its groups dropped", "mapped", &pb.Cred{Uid: 4242, Gid: 100, Groups: []uint32{101}}, &pb.Cred{Uid: 99, Gid: 500}, false},
		{"unknown gid squashed", "mapped", &pb.Cred{Uid: 1000, Gid: 7}, &pb.Cred{Uid: 5000, Gid: 98}, false},
		{"root squashed to the nodemap's ids", "mapped", &pb.Cred{}, &pb.Cred{Uid: 99, Gid: 98}, false},
		{"deny: mapped ids pass", "deny", &pb.Cred{Uid: 1000, Gid: 100}, &pb.Cred{Uid: 5000, Gid: 500}, false},
		{"deny: unknown uid refused", "deny", &pb.Cred{Uid: 1001, Gid: 100}, nil, true},
		{"deny: unknown gid refused", "deny", &pb.Cred{Uid: 1000, Gid: 101}, nil, true},
		{"deny: root squashed, not refused", "deny", &pb.Cred{}, &pb.Cred{Uid: SquashID, Gid: SquashID}, false},
		{"deny: unknown groups left out, not refused", "deny", &pb.Cred{Uid: 1000, Gid: 100, Groups: []uint32{100, 7}}, &pb.Cred{Uid: 5000, Gid: 500, Groups: []uint32{500}}, false},
		{"admin: root is root, with its groups", "admin", &pb.Cred{Uid: 0, Gid: 0, Groups: []uint32{0, 100}}, &pb.Cred{Uid: 0, Gid: 0, Groups: []uint32{0, 500}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var in *pb.Cred
			if tc.in != nil {
				in = proto.Clone(tc.in).(*pb.Cred)
			}
			got, err := ms[tc.m].Cred(in)
			if tc.denied {
				if !errors.Is(err, syscall.EACCES) || !strings.Contains(err.Error(), "deny_unknown") {
					t.Fatalf("Cred(%v) = %v, %v; want EACCES naming deny_unknown", tc.in, got, err)
				}
				return
			}
			if err != nil || !proto.Equal(got, tc.want) {
				t.Fatalf("Cred(%v) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
			if tc.in != nil && !proto.Equal(in, tc.in) {
				t.Fatalf("Cred changed its argument to %v", in)
			}
		})
	}
}

func TestIdsMapBothWays(t *testing.T) {
	ms := testMaps(t)
	for _, tc := range []struct {
		m                    string
		client, fs           uint32
		gid                  bool
		toFS, toClient       uint32 // client -> fs, fs -> client
		roundTrip, backAgain bool
	}{
		{m: "mapped", client: 1000, toFS: 5000, fs: 5000, toClient: 1000},
		{m: "mapped", client: 101, gid: true, toFS: 501, fs: 501, toClient: 101},
		{m: "mapped", client: 1000, toFS: 5000, fs: 1000, toClient: 99}, // fs 1000 is nobody's here
		{m: "mapped", client: 0, toFS: 99, fs: 0, toClient: 99},         // root squashed both ways, as Lustre
		{m: "mapped", client: 0, gid: true, toFS: 98, fs: 0, toClient: 98},
		{m: "squash", client: 1234, toFS: 1234, fs: 1234, toClient: 1234},
		{m: "admin", client: 0, toFS: 0, fs: 0, toClient: 0},
		{m: "admin", client: 7, toFS: SquashID, fs: 7, toClient: SquashID},
	} {
		m := ms[tc.m]
		toFS, toClient := m.UID(tc.client), m.ClientUID(tc.fs)
		if tc.gid {
			toFS, toClient = m.GID(tc.client), m.ClientGID(tc.fs)
		}
		if toFS != tc.toFS || toClient != tc.toClient {
			t.Errorf("%s gid=%v: client %d -> fs %d (want %d); fs %d -> client %d (want %d)", tc.m, tc.gid, tc.client, toFS, tc.toFS, tc.fs, toClient, tc.toClient)
		}
	}
	var none *Map
	if none.UID(0) != 0 || none.ClientGID(5) != 5 {
		t.Error("a nil Map maps ids")
	}
}

func TestInodeMappedBackIsACopy(t *testing.T) {
	m := testMaps(t)["mapped"]
	ino := &pb.Inode{Uid: 5001, Gid: 777, Mode: 0o100600}
	got := m.Inode(ino)
	if got.Uid != 1001 || got.Gid != 98 || got.Mode != ino.Mode {
		t.Fatalf("Inode = uid %d gid %d mode %o; want 1001, 98 (unknown: squash gid), %o", got.Uid, got.Gid, got.Mode, ino.Mode)
	}
	if ino.Uid != 5001 || ino.Gid != 777 {
		t.Fatal("Inode changed the inode it was given (it may be the MDT's cached one)")
	}
	same := &pb.Inode{Uid: 1234, Gid: 1234}
	if testMaps(t)["squash"].Inode(same) != same {
		t.Error("Inode copied an inode whose ids do not change")
	}
}

func TestOwnerOfAChown(t *testing.T) {
	ms := testMaps(t)
	both := uint32(pb.SetattrValid_SETATTR_UID | pb.SetattrValid_SETATTR_GID)
	if u, g, err := ms["mapped"].Owner(both, 1001, 101); err != nil || u != 5001 || g != 501 {
		t.Errorf("mapped chown 1001:101 = %d:%d, %v; want 5001:501", u, g, err)
	}
	if u, g, err := ms["mapped"].Owner(uint32(pb.SetattrValid_SETATTR_GID), 4242, 101); err != nil || u != 4242 || g != 501 {
		t.Errorf("chgrp left the uid it does not set? %d:%d, %v", u, g, err)
	}
	if u, _, err := ms["mapped"].Owner(both, 4242, 101); err != nil || u != 99 {
		t.Errorf("chown to an unknown uid = %d, %v; want the squash uid 99", u, err)
	}
	if _, _, err := ms["deny"].Owner(both, 4242, 100); !errors.Is(err, syscall.EACCES) {
		t.Errorf("deny_unknown chown to an unknown uid: %v, want EACCES", err)
	}
}

func TestLocalIsHowTheMDSSeesTheCaller(t *testing.T) {
	ms := testMaps(t)
	for _, tc := range []struct {
		m        string
		in, want *pb.Cred
	}{
		{"squash", &pb.Cred{Uid: 0, Gid: 0, Groups: []uint32{0}}, &pb.Cred{Uid: SquashID, Gid: SquashID}},
		{"squash", &pb.Cred{Uid: 1000, Gid: 100, Groups: []uint32{10}}, &pb.Cred{Uid: 1000, Gid: 100, Groups: []uint32{10}}},
		{"mapped", &pb.Cred{Uid: 1000, Gid: 100, Groups: []uint32{101, 7}}, &pb.Cred{Uid: 1000, Gid: 100, Groups: []uint32{101}}},
		{"mapped", &pb.Cred{Uid: 4242, Gid: 100}, &pb.Cred{Uid: 99, Gid: 100}},
		{"deny", &pb.Cred{Uid: 4242, Gid: 100}, &pb.Cred{Uid: SquashID, Gid: SquashID}},
		{"admin", &pb.Cred{Uid: 0, Gid: 0}, &pb.Cred{Uid: 0, Gid: 0}},
	} {
		if got := ms[tc.m].Local(tc.in); !proto.Equal(got, tc.want) {
			t.Errorf("%s: Local(%v) = %v; want %v", tc.m, tc.in, got, tc.want)
		}
	}
}

func encodeACL(es ...acl.Entry) []byte {
	a, err := acl.Parse(acl.ACL(es).Encode())
	if err != nil {
		panic(err)
	}
	return a.Encode()
}

func TestACLIdsMapBothWays(t *testing.T) {
	m := testMaps(t)["mapped"]
	base := []acl.Entry{{Tag: acl.UserObj, Perm: 6}, {Tag: acl.GroupObj, Perm: 4}, {Tag: acl.Mask, Perm: 6}, {Tag: acl.Other}}
	in := encodeACL(append(slices.Clone(base), acl.Entry{Tag: acl.User, Perm: 6, ID: 1001}, acl.Entry{Tag: acl.Group, Perm: 4, ID: 100})...)
	fs, err := m.ACLToFS(in)
	if err != nil {
		t.Fatal(err)
	}
	want := encodeACL(append(slices.Clone(base), acl.Entry{Tag: acl.User, Perm: 6, ID: 5001}, acl.Entry{Tag: acl.Group, Perm: 4, ID: 500})...)
	if string(fs) != string(want) {
		t.Fatalf("ACLToFS = %x; want %x", fs, want)
	}
	if back := m.ACLToClient(fs); string(back) != string(in) {
		t.Fatalf("ACLToClient(ACLToFS(a)) = %x; want a, %x", back, in)
	}
	unknown := encodeACL(append(slices.Clone(base), acl.Entry{Tag: acl.User, Perm: 6, ID: 4242})...)
	if _, err := m.ACLToFS(unknown); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "4242") {
		t.Errorf("ACLToFS of an unmapped uid: %v, want EINVAL naming it", err)
	}
	// Stored entries whose fs id has no client id are left out.
	stored := encodeACL(append(slices.Clone(base), acl.Entry{Tag: acl.User, Perm: 6, ID: 4242}, acl.Entry{Tag: acl.User, Perm: 4, ID: 5000})...)
	wantBack := encodeACL(append(slices.Clone(base), acl.Entry{Tag: acl.User, Perm: 4, ID: 1000})...)
	if got := m.ACLToClient(stored); string(got) != string(wantBack) {
		t.Errorf("ACLToClient = %x; want %x (the unmapped entry left out)", got, wantBack)
	}
	if got := m.ACLToClient([]byte("junk")); string(got) != "junk" {
		t.Error("ACLToClient changed a value that is not an ACL")
	}
	if !IsACL(acl.XattrAccess) || !IsACL(acl.XattrDefault) || IsACL("user.x") {
		t.Error("IsACL")
	}
}

func TestCheckRefusesWhatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		e    *pb.Nodemap
		want string
	}{
		{&pb.Nodemap{}, "needs a client"},
		{&pb.Nodemap{Client: strings.Repeat("x", 65)}, "at most 64"},
		{&pb.Nodemap{Client: "a\nb"}, "not printable"},
		{&pb.Nodemap{Client: "c", Trusted: true, UidMap: pairs(t, "1:2")}, "one or the other"},
		{&pb.Nodemap{Client: "c", Trusted: true, DenyUnknown: true}, "one or the other"},
		{&pb.Nodemap{Client: "c", UidMap: pairs(t, "1:2,1:3")}, "client uid 1 is mapped twice"},
		{&pb.Nodemap{Client: "c", GidMap: pairs(t, "1:3,2:3")}, "file system gid 3 is mapped twice"},
		{&pb.Nodemap{Client: "c", UidMap: pairs(t, "0:5")}, "root is root or squashed"},
		{&pb.Nodemap{Client: "c", UidMap: pairs(t, "5:0")}, "root is root or squashed"},
		{&pb.Nodemap{Client: "c", UidMap: pairs(t, "5:4294967295")}, "no id"},
		{&pb.Nodemap{Client: "c", SquashUid: 4294967295}, "no id"},
	} {
		err := Check(tc.e)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check(%v) = %v; want an error saying %q", tc.e, err, tc.want)
		}
	}
	ok := &pb.Nodemap{Client: Default, SquashRoot: true, UidMap: pairs(t, "1:2,3:4"), GidMap: pairs(t, "1:1")}
	if err := Check(ok); err != nil {
		t.Errorf("Check(%v) = %v", ok, err)
	}
}

func TestParseIDMap(t *testing.T) {
	m, err := ParseIDMap("uid", " 1000:5000, 1001:5001 ,")
	if err != nil || FormatIDMap(m) != "1000:5000,1001:5001" {
		t.Fatalf("ParseIDMap = %v, %v", m, err)
	}
	for _, bad := range []string{"1000", "1000:x", "a:1", "1:-2", "1:4294967296", "", ","} {
		if _, err := ParseIDMap("gid", bad); err == nil || !strings.Contains(err.Error(), "gid map") {
			t.Errorf("ParseIDMap(%q) = %v; want an error naming the gid map", bad, err)
		}
	}
}

func cert(name string, role pki.Role) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: name, OrganizationalUnit: []string{string(role)}}}
}

func TestSetPicksTheCertificatesNodemap(t *testing.T) {
	s := NewSet([]*pb.Nodemap{
		{Client: "alice", Trusted: true, SquashRoot: true},
		{Client: Default},
		{Client: "mdt-tool", Trusted: true},
	})
	for _, tc := range []struct {
		cert *x509.Certificate
		want string
	}{
		{cert("alice", pki.RoleClient), "alice"},
		{cert("bob", pki.RoleClient), Default},
		{cert("carol", pki.RoleAdmin), ""},        // admins only when named
		{cert("nacre-MDT0000", pki.RoleNode), ""}, // nodes only when named
		{cert("mdt-tool", pki.RoleNode), "mdt-tool"},
		{nil, ""},
	} {
		got := ""
		if m := s.For(tc.cert); m != nil {
			got = m.Nodemap().Client
		}
		if got != tc.want {
			t.Errorf("For(%v) = %q; want %q", tc.cert, got, tc.want)
		}
	}
	var none *Set
	if none.For(cert("alice", pki.RoleClient)) != nil || none.Len() != 0 {
		t.Error("a nil Set maps")
	}
}

func TestGivesWhatARequestThroughTheNodemapCouldCarry(t *testing.T) {
	ms := testMaps(t)
	for _, tc := range []struct {
		m    string
		c    *pb.Cred
		want bool
	}{
		{"squash", &pb.Cred{Uid: SquashID, Gid: SquashID}, true},
		{"squash", &pb.Cred{Uid: 1000, Gid: 100, Groups: []uint32{10}}, true},
		{"squash", &pb.Cred{Uid: 0, Gid: 0}, false},                                    // root, squashed
		{"squash", &pb.Cred{Uid: 1000, Gid: 0}, false},                                 // gid 0, squashed
		{"squash", nil, false},                                                         // root's
		{"squash", &pb.Cred{Uid: SquashID, Gid: SquashID, Groups: []uint32{10}}, true}, // a user 65534 as sent
		{"mapped", &pb.Cred{Uid: 99, Gid: 98, Groups: []uint32{501}}, false},           // squashed users have no groups
		{"mapped", &pb.Cred{Uid: 5000, Gid: 500, Groups: []uint32{501}}, true},
		{"mapped", &pb.Cred{Uid: 1000, Gid: 500}, false}, // fs 1000 is no one's here
		{"mapped", &pb.Cred{Uid: 5000, Gid: 500, Groups: []uint32{7}}, false},
		{"mapped", &pb.Cred{Uid: 99, Gid: 98}, true}, // the squash ids
		{"deny", &pb.Cred{Uid: 99, Gid: 500}, false}, // unknown uids are refused, not squashed
		{"admin", &pb.Cred{}, true},
	} {
		if got := ms[tc.m].Gives(tc.c); got != tc.want {
			t.Errorf("%s: Gives(%v) = %v, want %v", tc.m, tc.c, got, tc.want)
		}
	}
}
