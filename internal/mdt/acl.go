package mdt

import (
	"errors"
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// POSIX ACLs (package acl), kept as the extended attributes Linux uses.
//
// An access ACL that says no more than the mode bits is not stored (as on
// ext4): setting one only changes the mode. A stored one is marked by
// INODE_FLAG_ACL, so that permission checks read it only for objects that
// have one; INODE_FLAG_DEFAULT_ACL marks a directory's default ACL, which
// a new object in it inherits in place of the umask. The ACL's owner,
// mask (or owning group) and other entries follow the mode bits: a chmod
// rewrites them, and setting an ACL sets the bits.

const (
	flagACL        = uint32(pb.InodeFlag_INODE_FLAG_ACL)
	flagDefaultACL = uint32(pb.InodeFlag_INODE_FLAG_DEFAULT_ACL)
)

func isACLName(name string) bool { return name == acl.XattrAccess || name == acl.XattrDefault }

// readACL reads and parses one of an object's ACLs; nil if it has none.
func readACL(r kv.Reader, local uint64, name string) (acl.ACL, error) {
	v, err := r.Get(xattrKey(local, name))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return acl.Parse(v)
}

// checkACLChange says who may set or remove an ACL: the owner and root
// (the kernel's inode_owner_or_capable), and a default ACL only on a
// directory.
func (x *txn) checkACLChange(ino *pb.Inode, f fid.FID, name string) error {
	if x.cred.Uid != 0 && x.cred.Uid != ino.Uid {
		return errf(syscall.EPERM, "set %s on %s: uid %d is not the owner", name, f, x.cred.Uid)
	}
	if name == acl.XattrDefault && !isDir(ino) {
		return errf(syscall.EACCES, "a default ACL on %s, which is not a directory", f)
	}
	return nil
}

// setACL applies a setxattr of an ACL name (checked by checkXattr), with
// the create/replace flags already honoured.
func (x *txn) setACL(local uint64, ino *pb.Inode, f fid.FID, name string, value []byte) error {
	a, err := acl.Parse(value)
	if err != nil {
		return errf(syscall.EINVAL, "%s on %s: %v", name, f, err)
	}
	if name == acl.XattrAccess {
		if len(a) == 0 {
			return errf(syscall.EINVAL, "%s on %s: an access ACL needs user::, group:: and other:: entries", name, f)
		}
		mode, minimal := a.Mode()
		ino.Mode = ino.Mode&^0o777 | mode
		if minimal {
			a = nil
		}
	}
	x.putACL(local, ino, name, a)
	return nil
}

// removeACL drops an ACL; the mode bits stay as they are.
func (x *txn) removeACL(local uint64, ino *pb.Inode, name string) { x.putACL(local, ino, name, nil) }

// putACL stores ACL name of the object (an empty one: none) and sets its
// flag to match.
func (x *txn) putACL(local uint64, ino *pb.Inode, name string, a acl.ACL) {
	flag := flagACL
	if name == acl.XattrDefault {
		flag = flagDefaultACL
	}
	k := xattrKey(local, name)
	if len(a) == 0 {
		x.b.Delete(k)
		ino.Flags &^= flag
		return
	}
	x.b.Set(k, a.Encode())
	ino.Flags |= flag
}

// chmodACL brings a stored access ACL in step with new mode bits.
func (x *txn) chmodACL(local uint64, ino *pb.Inode) error {
	if ino.Flags&flagACL == 0 {
		return nil
	}
	a, err := readACL(x.b, local, acl.XattrAccess)
	if err != nil {
		return errf(syscall.EIO, "read the ACL of %s: %v", fid.FromPB(ino.Fid), err)
	}
	if a == nil {
		ino.Flags &^= flagACL
		return nil
	}
	x.b.Set(xattrKey(local, acl.XattrAccess), a.Chmod(ino.Mode).Encode())
	return nil
}

// inheritACL sets the mode (and ACLs) of a new object ino, made with the
// requested mode bits in parent: the parent's default ACL if it has one
// (a new directory keeps it as its own default, too), else the umask. It
// returns the ACLs to store once the object has its local key.
func (x *txn) inheritACL(plocal uint64, parent, ino *pb.Inode, umask uint32) (access, def []byte, err error) {
	return inheritACLFrom(x.b, plocal, parent, ino, umask)
}

// inheritACLFrom is inheritACL reading the parent's default ACL from r.
func inheritACLFrom(r kv.Reader, plocal uint64, parent, ino *pb.Inode, umask uint32) (access, def []byte, err error) {
	if isSymlink(ino) {
		return nil, nil, nil // its mode is always 0777
	}
	var d acl.ACL
	if parent.Flags&flagDefaultACL != 0 {
		if d, err = readACL(r, plocal, acl.XattrDefault); err != nil {
			return nil, nil, errf(syscall.EIO, "read the default ACL of %s: %v", fid.FromPB(parent.Fid), err)
		}
	}
	if d == nil {
		ino.Mode &^= umask & 0o777
		return nil, nil, nil
	}
	a, mode := acl.Inherit(d, ino.Mode)
	ino.Mode = mode
	if a != nil {
		access = a.Encode()
		ino.Flags |= flagACL
	}
	if isDir(ino) {
		def = d.Encode()
		ino.Flags |= flagDefaultACL
	}
	return access, def, nil
}

// storeACLs writes what inheritACL returned for the object at local.
func (x *txn) storeACLs(local uint64, access, def []byte) {
	if access != nil {
		x.b.Set(xattrKey(local, acl.XattrAccess), access)
	}
	if def != nil {
		x.b.Set(xattrKey(local, acl.XattrDefault), def)
	}
}
