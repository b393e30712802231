package mdt

import (
	"strings"
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/kv"
)

// Access bits for mayAccess.
const (
	accR = 4
	accW = 2
	accX = 1
)

// MaxNameLen is the longest name a directory entry may have.
const MaxNameLen = 255

// maxLinks bounds the hard links of one object (ext4's limit).
const maxLinks = 65000

func isDir(ino *pb.Inode) bool     { return ino.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func isReg(ino *pb.Inode) bool     { return ino.Mode&syscall.S_IFMT == syscall.S_IFREG }
func isSymlink(ino *pb.Inode) bool { return ino.Mode&syscall.S_IFMT == syscall.S_IFLNK }

// DirentType is the type stored in a directory entry (DT_* value).
func DirentType(mode uint32) uint8 { return uint8(mode & syscall.S_IFMT >> 12) }

func inGroup(c *pb.Cred, gid uint32) bool {
	if c.Gid == gid {
		return true
	}
	for _, g := range c.Groups {
		if g == gid {
			return true
		}
	}
	return false
}

// mayAccess applies the POSIX permission bits and, to an object with an
// access ACL, the ACL (read from r, under the object's local key).
func mayAccess(r kv.Reader, local uint64, ino *pb.Inode, c *pb.Cred, mask uint32) bool {
	if c.Uid == 0 || ino.Flags&flagACL == 0 {
		return modeAllows(ino, c, mask)
	}
	a, err := readACL(r, local, acl.XattrAccess)
	if err != nil || a == nil {
		// An unreadable ACL falls back to the bits, which the ACL's
		// base entries and mask were kept in step with.
		return modeAllows(ino, c, mask)
	}
	return a.Allows(ino.Mode, ino.Uid, ino.Gid, c.Uid, func(g uint32) bool { return inGroup(c, g) }, mask)
}

// modeAllows applies the POSIX permission bits only.
func modeAllows(ino *pb.Inode, c *pb.Cred, mask uint32) bool {
	if c.Uid == 0 {
		if mask&accX == 0 || isDir(ino) {
			return true
		}
		return ino.Mode&0o111 != 0
	}
	var bits uint32
	switch {
	case c.Uid == ino.Uid:
		bits = ino.Mode >> 6
	case inGroup(c, ino.Gid):
		bits = ino.Mode >> 3
	default:
		bits = ino.Mode
	}
	return bits&mask == mask
}

// stickyDenies reports whether the sticky bit of dir forbids c to remove or
// rename child.
func stickyDenies(dir, child *pb.Inode, c *pb.Cred) bool {
	if dir.Mode&syscall.S_ISVTX == 0 || c.Uid == 0 {
		return false
	}
	return c.Uid != dir.Uid && c.Uid != child.Uid
}

func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return errf(syscall.EINVAL, "invalid name %q", name)
	case len(name) > MaxNameLen:
		return errf(syscall.ENAMETOOLONG, "name of %d bytes (longest allowed: %d)", len(name), MaxNameLen)
	case strings.ContainsAny(name, "/\x00"):
		return errf(syscall.EINVAL, "name %q contains '/' or NUL", name)
	}
	return nil
}
