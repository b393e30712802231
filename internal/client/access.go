package client

import (
	"context"
	"errors"
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

// MayAccess reports whether the caller of ctx may access ino with mask
// (R_OK 4, W_OK 2, X_OK 1), as the MDT decides for its own operations:
// root may do anything but execute a file no one may execute; an object
// with an access ACL is judged by it (read from the MDT). The OSTs check
// nothing: reads and the cutting of objects rely on this client asking
// first, as a kernel asks before it calls a file system. The caller is
// taken as the MDSs see it, through this client's nodemap (LocalCred):
// a squashed root is not root here either.
func (c *Client) MayAccess(ctx context.Context, ino *pb.Inode, mask uint32) (bool, error) {
	cred := c.LocalCred(c.cred(ctx))
	mask &= 7
	if cred.GetUid() != 0 && cred.GetUid() != ino.Uid && ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_ACL) != 0 {
		v, err := c.Getxattr(WithCred(ctx, &pb.Cred{}), fid.FromPB(ino.Fid), acl.XattrAccess)
		if err == nil {
			a, err := acl.Parse(v)
			if err != nil {
				return false, &errno.Errno{Op: "access " + fid.FromPB(ino.Fid).String(), Errno: syscall.EIO, Msg: "its access ACL does not decode: " + err.Error()}
			}
			return a.Allows(ino.Mode, ino.Uid, ino.Gid, cred.GetUid(), func(g uint32) bool { return InGroup(cred, g) }, mask), nil
		}
		if !errors.Is(err, syscall.ENODATA) {
			return false, err
		}
	}
	return ModeAllows(ino, cred, mask), nil
}

// ModeAllows applies the permission bits of ino's mode alone: the owner's
// class, else the group's, else the others'; root may do anything but
// execute a file no one may execute.
func ModeAllows(ino *pb.Inode, cred *pb.Cred, mask uint32) bool {
	mask &= 7
	if cred.GetUid() == 0 {
		return mask&1 == 0 || ino.Mode&syscall.S_IFMT == syscall.S_IFDIR || ino.Mode&0o111 != 0
	}
	var bits uint32
	switch {
	case cred.GetUid() == ino.Uid:
		bits = ino.Mode >> 6
	case InGroup(cred, ino.Gid):
		bits = ino.Mode >> 3
	default:
		bits = ino.Mode
	}
	return bits&mask == mask
}

// InGroup says whether gid is cred's group or one of its groups.
func InGroup(cred *pb.Cred, gid uint32) bool {
	if cred.GetGid() == gid {
		return true
	}
	for _, g := range cred.GetGroups() {
		if g == gid {
			return true
		}
	}
	return false
}

// checkAccess is MayAccess as an error (EACCES naming what was refused).
func (c *Client) checkAccess(ctx context.Context, what string, ino *pb.Inode, mask uint32) error {
	ok, err := c.MayAccess(ctx, ino, mask)
	if err != nil {
		return err
	}
	if !ok {
		return &errno.Errno{Op: what + " " + fid.FromPB(ino.Fid).String(), Errno: syscall.EACCES}
	}
	return nil
}
