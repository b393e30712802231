package mdt

import (
	"errors"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/fid"
)

func aclOf(entries ...acl.Entry) []byte { return acl.ACL(entries).Encode() }

func ent(tag, perm uint16, id uint32) acl.Entry {
	if tag != acl.User && tag != acl.Group {
		id = ^uint32(0)
	}
	return acl.Entry{Tag: tag, Perm: perm, ID: id}
}

func aclNS(t *testing.T) (directNS, fid.FID) {
	t.Helper()
	var req uint64
	n := directNS{d: newDirect(t, 2), cred: &pb.Cred{}, osts: []uint32{0, 1}, req: &req}
	d, err := n.inode(&pb.CreateOp{Parent: fid.Root.PB(), Name: []byte("d"), Mode: syscall.S_IFDIR | 0o750})
	if err != nil {
		t.Fatal(err)
	}
	return n, fid.FromPB(d.Fid)
}

func wantErrno(t *testing.T, what string, err error, want syscall.Errno) {
	t.Helper()
	var e syscall.Errno
	if !errors.As(err, &e) || e != want {
		t.Errorf("%s: want %v, got %v", what, want, err)
	}
}

// A named user's entry grants what the mode bits do not, limited by the
// mask; chmod moves the mask; the owner and root set ACLs, others not.
func TestAccessACLGrantsANamedUser(t *testing.T) {
	n, d := aclNS(t)
	u1001 := n.As(1001, 1001).(directNS)
	if _, err := u1001.inode(&pb.CreateOp{Parent: d.PB(), Name: []byte("f"), Mode: 0o644}); err == nil {
		t.Fatal("uid 1001 created a file in a 0750 root directory without an ACL")
	}
	a := aclOf(ent(acl.UserObj, 7, 0), ent(acl.User, 7, 1001), ent(acl.GroupObj, 5, 0), ent(acl.Mask, 7, 0), ent(acl.Other, 0, 0))
	if err := u1001.Setxattr(d, acl.XattrAccess, a, 0); err == nil {
		t.Error("uid 1001 set an ACL on root's directory")
	}
	if err := n.Setxattr(d, acl.XattrAccess, a, 0); err != nil {
		t.Fatal(err)
	}
	ino, _ := n.Getattr(d)
	if ino.Mode&0o777 != 0o770 || ino.Flags&flagACL == 0 {
		t.Fatalf("after the ACL: mode %o flags %b, want 770 (the mask as group bits) with the ACL flag", ino.Mode&0o777, ino.Flags)
	}
	if _, err := u1001.inode(&pb.CreateOp{Parent: d.PB(), Name: []byte("f"), Mode: 0o644}); err != nil {
		t.Fatalf("uid 1001, named in the ACL with rwx: %v", err)
	}
	_, err := n.As(1002, 1002).(directNS).inode(&pb.CreateOp{Parent: d.PB(), Name: []byte("g"), Mode: 0o644})
	wantErrno(t, "uid 1002, not named", err, syscall.EACCES)
	if _, err := n.Lookup(d, "f"); err != nil {
		t.Fatal(err)
	}
	// chmod g-rwx: the mask drops to nothing, and with it 1001's access.
	if _, err := n.inode(&pb.SetattrOp{Fid: d.PB(), Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o700}); err != nil {
		t.Fatal(err)
	}
	v, err := n.Getxattr(d, acl.XattrAccess)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := acl.Parse(v)
	if m, _ := got.Mode(); m != 0o700 {
		t.Errorf("after chmod 700 the ACL says %o", m)
	}
	_, err = u1001.Lookup(d, "f")
	wantErrno(t, "uid 1001 after the mask went to ---", err, syscall.EACCES)
	// Removing the ACL leaves the bits.
	if err := n.Removexattr(d, acl.XattrAccess); err != nil {
		t.Fatal(err)
	}
	if ino, _ := n.Getattr(d); ino.Flags&flagACL != 0 || ino.Mode&0o777 != 0o700 {
		t.Errorf("after removing the ACL: mode %o flags %b", ino.Mode&0o777, ino.Flags)
	}
}

// An ACL of base entries only is mode bits: it sets them and is not
// stored. Malformed ACLs and default ACLs on files are refused.
func TestMinimalAndInvalidACLs(t *testing.T) {
	n, d := aclNS(t)
	f, err := n.inode(&pb.CreateOp{Parent: d.PB(), Name: []byte("f"), Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	ff := fid.FromPB(f.Fid)
	if err := n.Setxattr(ff, acl.XattrAccess, aclOf(ent(acl.UserObj, 6, 0), ent(acl.GroupObj, 0, 0), ent(acl.Other, 0, 0)), 0); err != nil {
		t.Fatal(err)
	}
	ino, _ := n.Getattr(ff)
	if ino.Mode&0o777 != 0o600 || ino.Flags&flagACL != 0 {
		t.Errorf("minimal ACL: mode %o flags %b, want 600 and no ACL flag", ino.Mode&0o777, ino.Flags)
	}
	if _, err := n.Getxattr(ff, acl.XattrAccess); err == nil {
		t.Error("a minimal ACL was stored")
	}
	err = n.Setxattr(ff, acl.XattrAccess, aclOf(ent(acl.UserObj, 6, 0), ent(acl.User, 6, 5), ent(acl.GroupObj, 0, 0), ent(acl.Other, 0, 0)), 0)
	wantErrno(t, "named entry without a mask", err, syscall.EINVAL)
	err = n.Setxattr(ff, acl.XattrDefault, aclOf(ent(acl.UserObj, 6, 0), ent(acl.GroupObj, 0, 0), ent(acl.Other, 0, 0)), 0)
	wantErrno(t, "default ACL on a file", err, syscall.EACCES)
}

// A directory's default ACL replaces the umask for what is made in it: a
// file gets it as its access ACL (limited by the mode asked for), a
// directory also as its own default. Elsewhere the umask applies.
func TestDefaultACLIsInherited(t *testing.T) {
	n, d := aclNS(t)
	def := aclOf(ent(acl.UserObj, 7, 0), ent(acl.User, 6, 1001), ent(acl.GroupObj, 5, 0), ent(acl.Mask, 7, 0), ent(acl.Other, 0, 0))
	if err := n.Setxattr(d, acl.XattrDefault, def, 0); err != nil {
		t.Fatal(err)
	}
	f, err := n.inode(&pb.CreateOp{Parent: d.PB(), Name: []byte("f"), Mode: 0o666, Umask: 0o077})
	if err != nil {
		t.Fatal(err)
	}
	if f.Mode&0o777 != 0o660 || f.Flags&flagACL == 0 {
		t.Errorf("file: mode %o flags %b, want 660 (umask ignored, other from the default) with an ACL", f.Mode&0o777, f.Flags)
	}
	v, err := n.Getxattr(fid.FromPB(f.Fid), acl.XattrAccess)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := acl.Parse(v)
	if !a.Allows(f.Mode, f.Uid, f.Gid, 1001, func(uint32) bool { return false }, 6) {
		t.Errorf("uid 1001 may not read and write the new file: %v", a)
	}
	sub, err := n.inode(&pb.CreateOp{Parent: d.PB(), Name: []byte("sub"), Mode: syscall.S_IFDIR | 0o777, Umask: 0o077})
	if err != nil {
		t.Fatal(err)
	}
	if sub.Flags&flagDefaultACL == 0 || sub.Flags&flagACL == 0 || sub.Mode&0o777 != 0o770 {
		t.Errorf("subdirectory: mode %o flags %b, want 770 with an ACL and a default ACL", sub.Mode&0o777, sub.Flags)
	}
	if v, err := n.Getxattr(fid.FromPB(sub.Fid), acl.XattrDefault); err != nil || string(v) != string(def) {
		t.Errorf("the subdirectory's default ACL: %x, %v", v, err)
	}
	// No default ACL: the umask applies.
	g, err := n.inode(&pb.CreateOp{Parent: fid.Root.PB(), Name: []byte("g"), Mode: 0o666, Umask: 0o027})
	if err != nil {
		t.Fatal(err)
	}
	if g.Mode&0o777 != 0o640 || g.Flags&flagACL != 0 {
		t.Errorf("file without a default ACL: mode %o flags %b, want 640", g.Mode&0o777, g.Flags)
	}
	// Removing the default stops the inheritance.
	if err := n.Removexattr(d, acl.XattrDefault); err != nil {
		t.Fatal(err)
	}
	h, err := n.inode(&pb.CreateOp{Parent: d.PB(), Name: []byte("h"), Mode: 0o666, Umask: 0o022})
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode&0o777 != 0o644 || h.Flags&flagACL != 0 {
		t.Errorf("after the default ACL was removed: mode %o flags %b, want 644", h.Mode&0o777, h.Flags)
	}
}

// An explicit change time is the owner's (or root's) to set; moving it to
// now with nothing else changed (chown(f, -1, -1)) is anyone's, as on
// Linux. Before, any user could set any file's ctime to any value.
func TestChangeTimeRules(t *testing.T) {
	n, d := aclNS(t)
	if err := n.Setxattr(d, acl.XattrAccess, aclOf(ent(acl.UserObj, 7, 0), ent(acl.GroupObj, 5, 0), ent(acl.Other, 5, 0)), 0); err != nil {
		t.Fatal(err)
	}
	f, err := n.inode(&pb.CreateOp{Parent: d.PB(), Name: []byte("f"), Mode: 0o644})
	if err != nil {
		t.Fatal(err)
	}
	u := n.As(1001, 1001).(directNS)
	_, err = u.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_CTIME), CtimeNs: 12345})
	wantErrno(t, "a non-owner's explicit ctime", err, syscall.EPERM)
	got, err := u.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_CTIME_NOW)})
	if err != nil || got.CtimeNs <= f.CtimeNs || got.Mode != f.Mode || got.Uid != f.Uid {
		t.Fatalf("a non-owner's ctime-now: %v, ctime %d -> %d", err, f.CtimeNs, got.GetCtimeNs())
	}
	if got, err := n.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_CTIME), CtimeNs: 12345}); err != nil || got.CtimeNs != 12345 {
		t.Fatalf("root's explicit ctime: %v %v", got, err)
	}
}
