package mgs

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/kv"
	"nacre/internal/nodemap"
	"nacre/internal/pki"
)

func setNodemap(e *pb.Nodemap) *pb.MGSCommand {
	return &pb.MGSCommand{Op: &pb.MGSCommand_NodemapSet{NodemapSet: e}}
}

func removeNodemap(client string) *pb.MGSCommand {
	return &pb.MGSCommand{Op: &pb.MGSCommand_NodemapRemove{NodemapRemove: &pb.NodemapRemoveRequest{Client: client}}}
}

func nodemapsOf(s *Server) []*pb.Nodemap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodemapList()
}

func sameNodemaps(t *testing.T, what string, got, want []*pb.Nodemap) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d nodemaps %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("%s: nodemap %d is %v, want %v", what, i, got[i], want[i])
		}
	}
}

// The nodemaps are replicated state: applied in log order, kept across a
// restart (the store) and carried by a snapshot to another replica.
func TestNodemapsAreReplicatedState(t *testing.T) {
	db, err := kv.Open("mgs", kv.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	src := reopen(t, db)
	alice := &pb.Nodemap{Client: "alice", SquashRoot: true, Trusted: true}
	bob := &pb.Nodemap{Client: "bob", UidMap: []*pb.IDPair{{Client: 1001, Fs: 5001}, {Client: 1000, Fs: 5000}}, DenyUnknown: true}
	for _, c := range []*pb.MGSCommand{setNodemap(alice), setNodemap(bob), setNodemap(&pb.Nodemap{Client: nodemap.Default})} {
		if r := applyCmd(t, src, c); r.err != nil {
			t.Fatal(r.err)
		}
	}
	// Stored normalized: squash ids filled in, maps sorted.
	want := []*pb.Nodemap{
		{Client: nodemap.Default, SquashUid: nodemap.SquashID, SquashGid: nodemap.SquashID},
		{Client: "alice", SquashRoot: true, Trusted: true, SquashUid: nodemap.SquashID, SquashGid: nodemap.SquashID},
		{Client: "bob", UidMap: []*pb.IDPair{{Client: 1000, Fs: 5000}, {Client: 1001, Fs: 5001}}, DenyUnknown: true, SquashUid: nodemap.SquashID, SquashGid: nodemap.SquashID},
	}
	sameNodemaps(t, "applied", nodemapsOf(src), want)

	// Refusals are results of apply, the same on every replica.
	if r := applyCmd(t, src, removeNodemap("carol")); errno.CodeOf(r.err) != errno.NotFound || !strings.Contains(r.err.Error(), "nacre nodemap") {
		t.Errorf("remove of an unknown client: %v, want NotFound naming `nacre nodemap`", r.err)
	}
	if r := applyCmd(t, src, setNodemap(&pb.Nodemap{Client: "x", UidMap: []*pb.IDPair{{Client: 1, Fs: 2}, {Client: 1, Fs: 3}}})); errno.CodeOf(r.err) != errno.InvalidArgument {
		t.Errorf("a map with a client id twice: %v, want InvalidArgument", r.err)
	}
	sameNodemaps(t, "after refusals", nodemapsOf(src), want)

	sameNodemaps(t, "reopened", nodemapsOf(reopen(t, db)), want)
	dst := bare(t)
	restore(t, dst, snapshotBytes(t, src))
	sameNodemaps(t, "restored from a snapshot", nodemapsOf(dst), want)

	if r := applyCmd(t, src, removeNodemap("bob")); r.err != nil {
		t.Fatal(r.err)
	}
	sameNodemaps(t, "removed", nodemapsOf(reopen(t, db)), want[:2])
	restore(t, dst, snapshotBytes(t, src))
	sameNodemaps(t, "removed, restored", nodemapsOf(dst), want[:2])
}

func testCert(name string, role pki.Role) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: name, OrganizationalUnit: []string{string(role)}}}
}

// GetConfig gives the MDSs (node certificates) every nodemap, and any
// other caller only its own.
func TestConfigShowsACallerItsOwnNodemap(t *testing.T) {
	all := []*pb.Nodemap{
		{Client: nodemap.Default, SquashUid: 7, SquashGid: 7},
		{Client: "alice", SquashRoot: true, Trusted: true, SquashUid: 9, SquashGid: 9},
	}
	for _, tc := range []struct {
		cert     *x509.Certificate
		all      bool
		nodemap  string
		describe string
	}{
		{testCert("nacre-MDT0000", pki.RoleNode), true, "", "an MDS"},
		{testCert("alice", pki.RoleClient), false, "alice", "a client with a nodemap"},
		{testCert("bob", pki.RoleClient), false, nodemap.Default, "a client under the default"},
		{testCert("root", pki.RoleAdmin), false, "", "an admin"},
		{nil, false, "", "no TLS"},
	} {
		out := &pb.ClusterConfig{Nodemaps: all}
		shapeConfig(out, tc.cert)
		if got := len(out.Nodemaps) == len(all); got != tc.all {
			t.Errorf("%s sees %d nodemaps", tc.describe, len(out.Nodemaps))
		}
		if out.Nodemap.GetClient() != tc.nodemap {
			t.Errorf("%s is told its nodemap is %q, want %q", tc.describe, out.Nodemap.GetClient(), tc.nodemap)
		}
	}
}

// An MGS without TLS refuses the nodemap calls, naming the fix.
func TestNodemapsNeedTLS(t *testing.T) {
	s := bare(t)
	ctx := context.Background()
	_, err1 := s.NodemapSet(ctx, &pb.Nodemap{Client: "alice", SquashRoot: true})
	_, err2 := s.NodemapRemove(ctx, &pb.NodemapRemoveRequest{Client: "alice"})
	_, err3 := s.NodemapList(ctx, &pb.NodemapListRequest{})
	for _, err := range []error{err1, err2, err3} {
		if errno.CodeOf(err) != errno.FailedPrecondition || !strings.Contains(err.Error(), "nacre up --tls") {
			t.Errorf("nodemap call without TLS: %v, want FailedPrecondition naming nacre up --tls", err)
		}
	}
}
