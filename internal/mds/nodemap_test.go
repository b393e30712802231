package mds

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/errno"
	"nacre/internal/nodemap"
	"nacre/internal/obs"
	"nacre/internal/pki"
	"nacre/internal/target"
	"nacre/test/testpki"
)

// An MDS with TLS serves no request before it has read the nodemaps
// (a squashed root would be root until then), and then maps by the
// peer's certificate; one without TLS maps nothing.
func TestIdmapWaitsForTheNodemapsAndFollowsThePeer(t *testing.T) {
	caDir := filepath.Join(t.TempDir(), "ca")
	node := testpki.Issue(t, caDir, "nacre-MDT0000", pki.RoleNode)
	alice := testpki.Issue(t, caDir, "alice", pki.RoleClient)
	bob := testpki.Issue(t, caDir, "bob", pki.RoleClient)
	s := &Server{id: target.Identity{Fsname: "fs", Kind: target.MDT}, log: obs.Discard(), tls: node}
	actx := pki.WithPeer(context.Background(), alice.Leaf)
	if _, err := s.idmap(actx); errno.CodeOf(err) != errno.Unavailable {
		t.Fatalf("before the nodemaps are read: %v, want Unavailable", err)
	}
	s.setNodemaps([]*pb.Nodemap{{Client: "alice", SquashRoot: true, Trusted: true}})
	m, err := s.idmap(actx)
	if err != nil || m == nil || m.Nodemap().Client != "alice" {
		t.Fatalf("alice's nodemap: %v, %v", m, err)
	}
	if m, err := s.idmap(pki.WithPeer(context.Background(), bob.Leaf)); err != nil || m != nil {
		t.Fatalf("bob, who has no nodemap: %v, %v; want none", m, err)
	}
	plain := &Server{id: s.id, log: obs.Discard()}
	if m, err := plain.idmap(actx); err != nil || m != nil {
		t.Fatalf("without TLS: %v, %v; want no nodemap", m, err)
	}
}

func TestCommandMapsCredentialsOwnersAndACLs(t *testing.T) {
	m := nodemap.New(&pb.Nodemap{Client: "c", SquashRoot: true, DenyUnknown: true,
		UidMap: []*pb.IDPair{{Client: 1000, Fs: 5000}}, GidMap: []*pb.IDPair{{Client: 100, Fs: 500}}})
	chown := &pb.Command{Cred: &pb.Cred{Uid: 1000, Gid: 100}, Op: &pb.Command_Setattr{Setattr: &pb.SetattrOp{
		Valid: uint32(pb.SetattrValid_SETATTR_UID | pb.SetattrValid_SETATTR_GID), Uid: 1000, Gid: 100}}}
	if r := command(m, chown); r != nil {
		t.Fatalf("chown refused: %v", r)
	}
	if c, o := chown.Cred, chown.GetSetattr(); c.Uid != 5000 || c.Gid != 500 || o.Uid != 5000 || o.Gid != 500 {
		t.Errorf("chown as %v to %d:%d; want 5000:500 both", c, o.Uid, o.Gid)
	}
	root := &pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Name: []byte("f")}}}
	if r := command(m, root); r != nil || root.Cred.Uid != nodemap.SquashID {
		t.Errorf("root's create (no cred) runs as %v (%v); want the squash uid", root.Cred, r)
	}
	unknown := &pb.Command{Cred: &pb.Cred{Uid: 7, Gid: 100}, Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{}}}
	if r := command(m, unknown); r.GetErrno() != int32(syscall.EACCES) {
		t.Errorf("an unknown uid's unlink: %v, want EACCES", r)
	}
	a := acl.ACL{{Tag: acl.UserObj, Perm: 6}, {Tag: acl.User, Perm: 4, ID: 1000}, {Tag: acl.GroupObj, Perm: 4}, {Tag: acl.Mask, Perm: 4}, {Tag: acl.Other}}
	set := &pb.Command{Cred: &pb.Cred{Uid: 1000, Gid: 100}, Op: &pb.Command_Setxattr{Setxattr: &pb.SetxattrOp{Name: []byte(acl.XattrAccess), Value: a.Encode()}}}
	if r := command(m, set); r != nil {
		t.Fatalf("setfacl refused: %v", r)
	}
	got, err := acl.Parse(set.GetSetxattr().Value)
	if err != nil || got[1].Tag != acl.User || got[1].ID != 5000 {
		t.Errorf("the ACL stored names %v (%v); want user 5000", got, err)
	}
}

func TestReplyMapsBackInACopy(t *testing.T) {
	m := nodemap.New(&pb.Nodemap{Client: "c", UidMap: []*pb.IDPair{{Client: 1000, Fs: 5000}}, GidMap: []*pb.IDPair{{Client: 100, Fs: 500}}})
	cached := &pb.Reply{Index: 7, Inode: &pb.Inode{Uid: 5000, Gid: 500, Mode: 0o100644}}
	keep := proto.Clone(cached)
	r := reply(m, cached)
	if r.Inode.Uid != 1000 || r.Inode.Gid != 100 || r.Index != 7 {
		t.Errorf("reply %v; want the inode owned by 1000:100", r)
	}
	if !proto.Equal(cached, keep) {
		t.Error("reply changed the reply it was given (the reply cache's)")
	}
	if reply(nil, cached) != cached || reply(m, nil) != nil {
		t.Error("reply without a nodemap or a reply")
	}
}

// A client under a nodemap gives back, after a restart that lost the
// log's tail, only what it could have sent itself: a squashed root's
// forged root command is left out, and so are other clients' entries
// and commands only the MDS proposes.
func TestReplayTakesOnlyAMappedClientsOwnEntries(t *testing.T) {
	s := &Server{log: obs.Discard()}
	m := nodemap.New(&pb.Nodemap{Client: "alice", SquashRoot: true, Trusted: true})
	entry := func(i uint64, cmd *pb.Command) *pb.LoggedCommand {
		b, err := proto.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		return &pb.LoggedCommand{Index: i, Term: 2, Command: b}
	}
	create := &pb.Command_Create{Create: &pb.CreateOp{Name: []byte("f")}}
	r := &pb.ReplayRequest{ClientId: 7, Commands: []*pb.LoggedCommand{
		entry(10, &pb.Command{ClientId: 7, Cred: &pb.Cred{Uid: nodemap.SquashID, Gid: nodemap.SquashID}, Op: create}), // its root's, squashed
		entry(11, &pb.Command{ClientId: 7, Cred: &pb.Cred{Uid: 1000, Gid: 1000}, Op: create}),                         // a user's
		entry(12, &pb.Command{ClientId: 7, Cred: &pb.Cred{}, Op: create}),                                             // forged: root
		entry(13, &pb.Command{ClientId: 7, Op: create}),                                                               // forged: no cred is root's
		entry(14, &pb.Command{ClientId: 8, Cred: &pb.Cred{}, Op: create}),                                             // another client's
		entry(15, &pb.Command{ClientId: 7, Cred: &pb.Cred{Uid: 1000}, Op: &pb.Command_PoolReset{PoolReset: &pb.PoolResetOp{}}}),
		{Index: 16, Term: 2, Command: []byte("not a command")},
	}}
	var got []uint64
	for _, e := range s.ownEntries(m, r) {
		got = append(got, e.Index)
	}
	if len(got) != 2 || got[0] != 10 || got[1] != 11 {
		t.Errorf("taken entries %v, want [10 11]", got)
	}
}
