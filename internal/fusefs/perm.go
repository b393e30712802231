package fusefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
)

func asErrno(err error, e *syscall.Errno) bool { return errors.As(err, e) }

// mayAccess applies the POSIX permission bits (R_OK 4, W_OK 2, X_OK 1)
// and, to an object with an access ACL, the ACL (client.MayAccess reads
// it from the MDT), as the MDT does: root
// may do anything but execute a file no one may execute. On a mount whose
// kernel checks ACLs (default_permissions with acl) the kernel has
// checked the ACL already, and it is not fetched again; on one without
// default_permissions the daemon is the only check the open has (the MDT
// checks its own operations, not opens), and an ACL that does not say
// who else may read or write is not a grant to everyone.
func (fs *FS) mayAccess(ctx context.Context, ino *pb.Inode, c *pb.Cred, mask uint32) bool {
	// As the MDSs see the caller: a root that the client's nodemap
	// squashes is not root here either.
	l := fs.c.LocalCred(c)
	if ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_ACL) == 0 || l.Uid == 0 || l.Uid == ino.Uid {
		// The owner's class is the mode's owner bits, ACL or not.
		return client.ModeAllows(ino, l, mask)
	}
	if fs.kernelACLs && l.Uid == c.Uid {
		// (The kernel checked a squashed root as root.)
		return true
	}
	ok, err := fs.c.MayAccess(client.WithCred(ctx, c), ino, mask)
	if err != nil {
		// Refused: an ACL that could not be read or decoded grants
		// nothing here.
		fs.log.Info("could not read an access ACL; access refused", "fid", fid.FromPB(ino.Fid), "uid", c.Uid, "err", err)
		return false
	}
	return ok
}

// modifiedNow sets the modification and change times to now: those of a
// write-like change (an O_TRUNC open of an empty file, fallocate) that
// the MDT lets any writer set (a lone SETATTR_MTIME_NOW is utimensat's,
// the owner's).
const modifiedNow = uint32(pb.SetattrValid_SETATTR_MTIME_NOW | pb.SetattrValid_SETATTR_CTIME_NOW)

// openMask is the access an open(2) with these flags needs. The kernel's
// open of a program for execve is O_RDONLY marked __FMODE_EXEC: it needs
// execute permission, not read (an execute-only program runs, as on any
// Linux file system; the kernel reads it, not the user).
func openMask(flags uint32) uint32 {
	if flags&fuse.FMODE_EXEC != 0 {
		return 1
	}
	var m uint32
	switch flags & syscall.O_ACCMODE {
	case syscall.O_RDONLY:
		m = 4
	case syscall.O_WRONLY:
		m = 2
	case syscall.O_RDWR:
		m = 6
	}
	if flags&syscall.O_TRUNC != 0 {
		m |= 2
	}
	return m
}
