// Package acl implements POSIX access control lists as Linux stores them
// in the extended attributes system.posix_acl_access and
// system.posix_acl_default: parsing and checking that format, the access
// check, and the rules that keep an ACL and a file's mode bits in step
// (chmod, a new file inheriting its directory's default ACL). The MDT
// applies them, so that every replica and every client sees the same
// result; the FUSE kernel module enforces access with the ACLs it reads
// back (FUSE_POSIX_ACL).
package acl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// The extended attributes that hold ACLs.
const (
	XattrAccess  = "system.posix_acl_access"
	XattrDefault = "system.posix_acl_default"
)

// Entry tags (linux/posix_acl.h).
const (
	UserObj  = 0x01
	User     = 0x02
	GroupObj = 0x04
	Group    = 0x08
	Mask     = 0x10
	Other    = 0x20
)

// version is the only format version Linux writes (posix_acl_xattr.h).
const version = 2

// undefinedID is the id of the entries that name no one (the _OBJ, MASK
// and OTHER entries).
const undefinedID = ^uint32(0)

// Entry is one entry of an ACL; Perm holds the r (4), w (2), x (1) bits.
type Entry struct {
	Tag  uint16
	Perm uint16
	ID   uint32
}

// ACL is a list of entries in canonical order: by tag, then by id.
type ACL []Entry

// ErrInvalid is wrapped by every error of Parse.
var ErrInvalid = errors.New("invalid POSIX ACL")

// Parse decodes and checks an ACL in the extended attribute format
// (little endian: a 4-byte version 2, then 8 bytes per entry: tag, perm,
// id). The result is in canonical order. An empty list of entries is an
// empty ACL (for a default ACL: none).
func Parse(b []byte) (ACL, error) {
	if len(b) < 4 || (len(b)-4)%8 != 0 {
		return nil, fmt.Errorf("%w: %d bytes, not a 4-byte header and 8-byte entries", ErrInvalid, len(b))
	}
	if v := binary.LittleEndian.Uint32(b); v != version {
		return nil, fmt.Errorf("%w: version %d (only %d exists)", ErrInvalid, v, version)
	}
	a := make(ACL, 0, (len(b)-4)/8)
	for p := 4; p < len(b); p += 8 {
		e := Entry{Tag: binary.LittleEndian.Uint16(b[p:]), Perm: binary.LittleEndian.Uint16(b[p+2:]), ID: binary.LittleEndian.Uint32(b[p+4:])}
		if e.Tag != User && e.Tag != Group {
			e.ID = undefinedID
		}
		a = append(a, e)
	}
	slices.SortFunc(a, func(x, y Entry) int {
		if x.Tag != y.Tag {
			return int(x.Tag) - int(y.Tag)
		}
		switch {
		case x.ID < y.ID:
			return -1
		case x.ID > y.ID:
			return 1
		}
		return 0
	})
	if len(a) == 0 {
		return a, nil
	}
	return a, a.valid()
}

// valid applies posix_acl_valid: one each of USER_OBJ, GROUP_OBJ and
// OTHER, named entries unique, a MASK exactly when there are named
// entries, permissions within rwx.
func (a ACL) valid() error {
	count := map[uint16]int{}
	for i, e := range a {
		if e.Perm&^7 != 0 {
			return fmt.Errorf("%w: permission bits %#o", ErrInvalid, e.Perm)
		}
		switch e.Tag {
		case UserObj, GroupObj, Mask, Other, User, Group:
		default:
			return fmt.Errorf("%w: unknown tag %#x", ErrInvalid, e.Tag)
		}
		count[e.Tag]++
		if i > 0 && (e.Tag == User || e.Tag == Group) && a[i-1].Tag == e.Tag && a[i-1].ID == e.ID {
			return fmt.Errorf("%w: two entries for id %d", ErrInvalid, e.ID)
		}
	}
	if count[UserObj] != 1 || count[GroupObj] != 1 || count[Other] != 1 || count[Mask] > 1 {
		return fmt.Errorf("%w: needs exactly one user::, group:: and other:: entry and at most one mask::", ErrInvalid)
	}
	if count[User]+count[Group] > 0 && count[Mask] == 0 {
		return fmt.Errorf("%w: named user or group entries need a mask:: entry", ErrInvalid)
	}
	return nil
}

// Encode is the extended attribute form of a.
func (a ACL) Encode() []byte {
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+8*len(a)), version)
	for _, e := range a {
		b = binary.LittleEndian.AppendUint16(b, e.Tag)
		b = binary.LittleEndian.AppendUint16(b, e.Perm)
		b = binary.LittleEndian.AppendUint32(b, e.ID)
	}
	return b
}

// find returns the index of the first entry with tag, or -1.
func (a ACL) find(tag uint16) int {
	for i, e := range a {
		if e.Tag == tag {
			return i
		}
	}
	return -1
}

// groupClass is the entry that the mode's group bits stand for: the mask
// if there is one, else the owning group's entry.
func (a ACL) groupClass() int {
	if i := a.find(Mask); i >= 0 {
		return i
	}
	return a.find(GroupObj)
}

// Mode is the permission bits a sets: owner from USER_OBJ, group from the
// mask (or GROUP_OBJ without one), others from OTHER. Minimal reports
// whether a says no more than those bits (no named entries, no mask), so
// that it need not be stored (posix_acl_equiv_mode).
func (a ACL) Mode() (mode uint32, minimal bool) {
	minimal = true
	for _, e := range a {
		switch e.Tag {
		case UserObj:
			mode |= uint32(e.Perm) << 6
		case Other:
			mode |= uint32(e.Perm)
		case GroupObj:
			if a.find(Mask) < 0 {
				mode |= uint32(e.Perm) << 3
			}
		case Mask:
			mode |= uint32(e.Perm) << 3
			minimal = false
		default:
			minimal = false
		}
	}
	return mode, minimal
}

// Chmod is a with its owner, group-class and other entries set from the
// permission bits of mode (posix_acl_chmod): a chmod keeps the named
// entries, and the mask limits them.
func (a ACL) Chmod(mode uint32) ACL {
	out := slices.Clone(a)
	if i := out.find(UserObj); i >= 0 {
		out[i].Perm = uint16(mode >> 6 & 7)
	}
	if i := out.groupClass(); i >= 0 {
		out[i].Perm = uint16(mode >> 3 & 7)
	}
	if i := out.find(Other); i >= 0 {
		out[i].Perm = uint16(mode & 7)
	}
	return out
}

// Inherit is what a new object made with permission bits mode gets in a
// directory whose default ACL is def (posix_acl_create): the default ACL
// limited by mode, and mode limited by it. The umask does not apply. The
// returned ACL is nil when it says no more than the mode bits.
func Inherit(def ACL, mode uint32) (ACL, uint32) {
	a := slices.Clone(def)
	perm := mode & 0o777
	var newPerm uint32
	for i := range a {
		switch {
		case a[i].Tag == UserObj:
			a[i].Perm &= uint16(perm >> 6 & 7)
			newPerm |= uint32(a[i].Perm) << 6
		case a[i].Tag == Other:
			a[i].Perm &= uint16(perm & 7)
			newPerm |= uint32(a[i].Perm)
		case i == a.groupClass():
			a[i].Perm &= uint16(perm >> 3 & 7)
			newPerm |= uint32(a[i].Perm) << 3
		}
	}
	mode = mode&^0o777 | newPerm
	if _, minimal := a.Mode(); minimal {
		return nil, mode
	}
	return a, mode
}

// Allows applies the POSIX ACL access check (posix_acl_permission) for a
// process with user uid, in the groups inGroup reports, asking for the
// access bits want (4 r, 2 w, 1 x), to an object owned by owner and
// group whose ACL is a. The owner, group-class and other permissions are
// taken from mode, which the MDT keeps in step with the ACL.
func (a ACL) Allows(mode, owner, group, uid uint32, inGroup func(uint32) bool, want uint32) bool {
	want &= 7
	mask := uint32(7)
	if i := a.find(Mask); i >= 0 {
		mask = mode >> 3 & 7
	}
	if uid == owner {
		return mode>>6&want == want
	}
	for _, e := range a {
		if e.Tag == User && e.ID == uid {
			return uint32(e.Perm)&mask&want == want
		}
	}
	found := false
	for _, e := range a {
		var member bool
		switch e.Tag {
		case GroupObj:
			member = inGroup(group)
		case Group:
			member = inGroup(e.ID)
		}
		if !member {
			continue
		}
		found = true
		perm := uint32(e.Perm)
		if e.Tag == GroupObj && a.find(Mask) < 0 {
			perm = mode >> 3 & 7
		}
		if perm&mask&want == want {
			return true
		}
	}
	if found {
		return false
	}
	return mode&7&want == want
}
