package mdt

import (
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/fid"
)

// Replies mark objects without extended attributes besides their ACLs
// (lookup, getattr and readdirplus alike), objects with one are not
// marked, and the mark is never stored.
func TestRepliesMarkObjectsWithoutXattrs(t *testing.T) {
	n, d := aclNS(t)
	mk := func(name string) fid.FID {
		ino, err := n.inode(&pb.CreateOp{Parent: d.PB(), Name: []byte(name), Mode: 0o644})
		if err != nil {
			t.Fatal(err)
		}
		return fid.FromPB(ino.Fid)
	}
	plain, user, withACL, both := mk("plain"), mk("user"), mk("acl"), mk("both")
	// Objects whose local keys sort right after those with attributes:
	// the probe must not take a neighbour's attribute for theirs.
	after := mk("after")
	a := aclOf(ent(acl.UserObj, 6, 0), ent(acl.User, 4, 1001), ent(acl.GroupObj, 4, 0), ent(acl.Mask, 4, 0), ent(acl.Other, 4, 0))
	for _, x := range []struct {
		f    fid.FID
		name string
		v    []byte
	}{{user, "user.k", []byte("v")}, {withACL, acl.XattrAccess, a}, {both, acl.XattrAccess, a}, {both, "security.x", []byte("s")}} {
		if err := n.Setxattr(x.f, x.name, x.v, 0); err != nil {
			t.Fatalf("setxattr %s: %v", x.name, err)
		}
	}
	want := map[fid.FID]bool{plain: true, user: false, withACL: true, both: false, after: true, d: true}
	names := map[fid.FID]string{plain: "plain", user: "user", withACL: "acl", both: "both", after: "after", d: "d"}
	check := func(how string, f fid.FID, ino *pb.Inode) {
		t.Helper()
		if got := ino.Flags&flagNoXattrs != 0; got != want[f] {
			t.Errorf("%s of %s: NO_XATTRS %v, want %v", how, names[f], got, want[f])
		}
	}
	for f, name := range names {
		ino, err := n.Getattr(f)
		if err != nil {
			t.Fatal(err)
		}
		check("getattr", f, ino)
		if f == d {
			continue
		}
		if ino, err = n.Lookup(d, name); err != nil {
			t.Fatal(err)
		}
		check("lookup", f, ino)
	}
	ents, _, err := n.d.T.Readdir(d, 0, 100, true, n.cred)
	if err != nil || len(ents) != 5 {
		t.Fatalf("readdirplus: %d entries, %v", len(ents), err)
	}
	for _, e := range ents {
		check("readdirplus", fid.FromPB(e.Fid), e.Inode)
	}
	// A plain readdir carries no inodes to mark.
	if ents, _, _ = n.d.T.Readdir(d, 0, 100, false, n.cred); ents[0].Inode != nil {
		t.Error("plain readdir returned an inode")
	}

	// Removing the last attribute marks the object again; the stored
	// records never carry the mark, also after a change that read one.
	if err := n.Removexattr(user, "user.k"); err != nil {
		t.Fatal(err)
	}
	want[user] = true
	ino, _ := n.Getattr(user)
	check("getattr after removexattr", user, ino)
	if _, err := n.do(&pb.SetattrOp{Fid: plain.PB(), Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	for f, name := range names {
		_, stored, err := getInode(n.d.T.db, f)
		if err != nil {
			t.Fatal(err)
		}
		if stored.Flags&flagNoXattrs != 0 {
			t.Errorf("the stored record of %s has NO_XATTRS", name)
		}
	}
	if _, err := n.Getxattr(plain, "user.k"); err == nil {
		t.Error("getxattr of a missing attribute succeeded")
	} else {
		wantErrno(t, "getxattr of a missing attribute", err, syscall.ENODATA)
	}
}
