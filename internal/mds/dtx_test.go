package mds

import (
	"context"
	"path/filepath"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/obs"
	"nacre/internal/pki"
	"nacre/internal/target"
	"nacre/test/testpki"
)

// The steps of a cross-MDT transaction come from other MDTs only: with
// TLS, a client's or an admin's certificate is refused before anything
// is applied; without TLS (a trusted network) any peer may send them.
func TestDtxStepsComeFromNodesOnly(t *testing.T) {
	caDir := filepath.Join(t.TempDir(), "ca")
	node := testpki.Issue(t, caDir, "nacre-MDT0001", pki.RoleNode)
	admin := testpki.Issue(t, caDir, "root", pki.RoleAdmin)
	alice := testpki.Issue(t, caDir, "alice", pki.RoleClient)
	s := &Server{id: target.Identity{Fsname: "fs", Kind: target.MDT}, log: obs.Discard(), tls: node}
	for _, who := range []*pki.Creds{alice, admin} {
		if err := s.fromPeer(pki.WithPeer(context.Background(), who.Leaf)); errno.CodeOf(err) != errno.PermissionDenied {
			t.Fatalf("%s: %v, want PermissionDenied", who.Name(), err)
		}
	}
	if err := s.fromPeer(context.Background()); errno.CodeOf(err) != errno.PermissionDenied {
		t.Fatalf("no certificate: %v, want PermissionDenied", err)
	}
	if err := s.fromPeer(pki.WithPeer(context.Background(), node.Leaf)); err != nil {
		t.Fatalf("another MDT: %v", err)
	}
	plain := &Server{id: s.id, log: obs.Discard()}
	if err := plain.fromPeer(context.Background()); err != nil {
		t.Fatalf("without TLS: %v", err)
	}
	// A client's command may not carry a transaction to decide.
	for _, cmd := range []*pb.Command{
		{Op: &pb.Command_Create{Create: &pb.CreateOp{Txid: 5}}},
		{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Remote: &pb.Inode{}}}},
		{Op: &pb.Command_Rename{Rename: &pb.RenameOp{Txid: 7}}},
	} {
		if !carriesDtx(cmd) {
			t.Fatalf("%v passes as a client's command", cmd)
		}
	}
	if carriesDtx(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{}}}) {
		t.Fatal("a plain create refused")
	}
}
