package fusefs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/fid"
	"nacre/internal/layout"
)

// LovXattr is the virtual extended attribute that shows and sets a file's
// layout (Lustre's lustre.lov), as text:
//
//	stripe_count=2 stripe_size=1048576 stripe_offset=-1 pattern=raid0 generation=1 objects=0:0x100000000:0x5,1:0x100000000:0x7
//
// Setting it takes stripe_count, stripe_size (K/M/G suffixes allowed) and
// stripe_offset and ignores the other keys, so a value read from one
// file can be set on another: on an empty regular file (new objects) or on
// a directory (its default layout for new files). It is not listed by
// listxattr, so copying tools do not try to set it on files with data.
const LovXattr = "nacre.lov"

// LmvXattr is the virtual extended attribute that shows where a
// directory's entries live (Lustre's lustre.lmv), read only, as text:
//
//	stripe_count=0 stripe_index=1 hash=none
//
// stripe_count 0 is a directory that is not striped, held by MDT
// stripe_index. Not listed by listxattr.
const LmvXattr = "nacre.lmv"

func formatLov(ino *pb.Inode) (string, bool) {
	l := ino.Layout
	if l == nil {
		return "", false
	}
	var b strings.Builder
	count := l.StripeCount
	if len(l.Objects) > 0 {
		count = int32(len(l.Objects))
	}
	fmt.Fprintf(&b, "stripe_count=%d stripe_size=%d stripe_offset=%d", count, l.StripeSize, l.StripeOffset)
	if ino.Mode&syscall.S_IFMT == syscall.S_IFREG {
		fmt.Fprintf(&b, " pattern=raid0 generation=%d objects=", l.Generation)
		for i, o := range l.Objects {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d:%#x:%#x", o.Ost, o.Seq, o.Oid)
		}
	}
	return b.String(), true
}

func parseLov(v string) (*pb.Layout, error) {
	l := &pb.Layout{StripeOffset: -1}
	for _, kv := range strings.Fields(strings.TrimRight(v, "\x00")) {
		k, val, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", kv)
		}
		switch k {
		case "stripe_count", "lmm_stripe_count":
			n, err := strconv.ParseInt(val, 10, 32)
			if err != nil || n < -1 || n > layout.MaxStripeCount {
				return nil, fmt.Errorf("stripe_count %q (want -1 for every OST, 0 for the default, or up to %d)", val, layout.MaxStripeCount)
			}
			l.StripeCount = int32(n)
		case "stripe_size", "lmm_stripe_size":
			n, err := layout.ParseSize(val)
			if err != nil || n > 1<<32-1 {
				return nil, fmt.Errorf("stripe_size %q", val)
			}
			l.StripeSize = uint32(n)
		case "stripe_offset", "lmm_stripe_offset":
			n, err := strconv.ParseInt(val, 10, 32)
			if err != nil || n < -1 {
				return nil, fmt.Errorf("stripe_offset %q", val)
			}
			l.StripeOffset = int32(n)
		}
	}
	return l, nil
}

// checkLovOST refuses a stripe_offset that names no OST of the file
// system, as `nacre setstripe -i` does (the MDT took it: a file's first
// stripe went elsewhere and its layout showed the index asked for).
func (fs *FS) checkLovOST(ctx context.Context, l *pb.Layout) error {
	if l.StripeOffset < 0 || fs.c.HasOST(uint32(l.StripeOffset)) {
		return nil
	}
	// Not known here: perhaps an OST added since the client last read
	// the configuration; ask the MGS, briefly.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cfg, err := fs.c.Config(ctx)
	if err != nil {
		// Not the value's fault (EINVAL said it was): the MDT takes it
		// as it took it before this check.
		fs.log.Warn("nacre.lov: cannot check stripe_offset against the OSTs", "err", err)
		return nil
	}
	for _, t := range cfg.Targets {
		if t.Kind == pb.TargetKind_TARGET_OST && t.Index == uint32(l.StripeOffset) {
			return nil
		}
	}
	return fmt.Errorf("stripe_offset %d: no such OST in the file system", l.StripeOffset)
}

func (fs *FS) xattrFID(h *fuse.InHeader) (fid.FID, fuse.Status) {
	if h.NodeId == nacreID || h.NodeId == fidDirID {
		return fid.FID{}, fuse.ENODATA
	}
	return fs.fidOf(h.NodeId)
}

func copyOut(v []byte, dest []byte) (uint32, fuse.Status) {
	if len(dest) < len(v) {
		return uint32(len(v)), fuse.ERANGE
	}
	copy(dest, v)
	return uint32(len(v)), fuse.OK
}

// xattrNameStatus refuses, as Linux does for a local file system, a name
// that is a namespace prefix alone (EINVAL) and a namespace Nacre keeps
// nothing in (EOPNOTSUPP, not ENODATA: tools that copy xattrs tell the two
// apart).
func xattrNameStatus(name string) fuse.Status {
	switch name {
	case "user.", "trusted.", "security.":
		return fuse.EINVAL
	}
	for _, ns := range []string{"user.", "trusted.", "security.", "nacre."} {
		if strings.HasPrefix(name, ns) {
			return fuse.OK
		}
	}
	if name == acl.XattrAccess || name == acl.XattrDefault {
		return fuse.OK
	}
	return fuse.Status(syscall.EOPNOTSUPP)
}

// GetXAttr reads an extended attribute (and nacre.lov).
func (fs *FS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	f, st := fs.xattrFID(h)
	if !st.Ok() {
		return 0, st
	}
	if st := xattrNameStatus(attr); !st.Ok() {
		return 0, st
	}
	ctx := fs.ctx(h)
	if attr == LovXattr {
		ino, err := fs.c.Getattr(ctx, f)
		if err != nil {
			return 0, fs.status("getxattr", err)
		}
		s, ok := formatLov(ino)
		if !ok {
			return 0, fuse.ENODATA
		}
		return copyOut([]byte(s), dest)
	}
	if attr == LmvXattr {
		ino, err := fs.c.Getattr(ctx, f)
		if err != nil {
			return 0, fs.status("getxattr", err)
		}
		if ino.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return 0, fuse.ENODATA
		}
		idx, err := fs.c.MDTOf(f)
		if err != nil {
			return 0, fs.status("getxattr", err)
		}
		return copyOut([]byte(fmt.Sprintf("stripe_count=0 stripe_index=%d hash=none", idx)), dest)
	}
	caps := attr == capsXattr
	if caps && fs.noCaps(h.NodeId) {
		return 0, fuse.ENODATA
	}
	if fs.xattrAbsent(h.NodeId, attr) {
		return 0, fuse.ENODATA
	}
	v, err := fs.c.Getxattr(ctx, f, attr)
	if err != nil {
		if fs.goneHeld(h.NodeId, err) {
			return 0, fuse.ENODATA
		}
		st := fs.status("getxattr", err)
		if caps && st == fuse.ENODATA {
			fs.setNoCaps(h.NodeId, time.Now().Add(fs.o.AttrTimeout))
		}
		return 0, st
	}
	return copyOut(v, dest)
}

const capsXattr = "security.capability"

// goneHeld reports whether err says the object of node id is gone from the
// MDT while the kernel still holds it (see node.last): its extended
// attributes are then answered as none, as ls asks of a removed working
// directory.
func (fs *FS) goneHeld(id uint64, err error) bool {
	if !errors.Is(err, syscall.ENOENT) {
		return false
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[id]
	return n != nil && n.last != nil
}

// xattrsKnown returns the attributes cached for node id if they may
// answer for its extended attributes: fetched within the attribute
// timeout, and not while this mount changed them.
func (fs *FS) xattrsKnown(id uint64) *pb.Inode {
	n := fs.nodes[id]
	if n == nil || n.ino == nil || time.Since(n.at) > fs.o.AttrTimeout || !time.Now().After(n.xattrsChanged) {
		return nil
	}
	return n.ino
}

// xattrAbsent reports whether the attributes cached for node id say it
// has no extended attribute attr. For the ACLs they say so by their flags
// (the kernel asks for the access ACL at the first permission check of
// every inode, and again when its attributes change); for other names by
// INODE_FLAG_NO_XATTRS (ls -l asks every file for security.selinux).
// Each answer saves an MDS round trip per file. Like the attributes
// themselves, the answer may be up to the attribute timeout old for a
// change made by another client.
func (fs *FS) xattrAbsent(id uint64, attr string) bool {
	var flag uint32
	switch attr {
	case acl.XattrAccess:
		flag = uint32(pb.InodeFlag_INODE_FLAG_ACL)
	case acl.XattrDefault:
		flag = uint32(pb.InodeFlag_INODE_FLAG_DEFAULT_ACL)
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ino := fs.xattrsKnown(id)
	if ino == nil {
		return false
	}
	if flag != 0 {
		return ino.Flags&flag == 0
	}
	return ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_NO_XATTRS) != 0
}

// knownXattrNames is what listxattr answers from the cached attributes
// of node id, if they say the object has no extended attributes besides
// its ACLs (ok false: ask the MDS).
func (fs *FS) knownXattrNames(id uint64) (names []string, ok bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ino := fs.xattrsKnown(id)
	if ino == nil || ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_NO_XATTRS) == 0 {
		return nil, false
	}
	if ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_ACL) != 0 {
		names = append(names, acl.XattrAccess)
	}
	if ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_DEFAULT_ACL) != 0 {
		names = append(names, acl.XattrDefault)
	}
	return names, true
}

// changingXattrs notes, before and after this mount changes node id's
// extended attributes, that attributes fetched meanwhile must not answer
// for them.
func (fs *FS) changingXattrs(id uint64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n := fs.nodes[id]; n != nil {
		n.xattrsChanged = time.Now().Add(fs.o.AttrTimeout)
	}
}

func (fs *FS) noCaps(id uint64) bool {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[id]
	return n != nil && time.Now().Before(n.noCapsUntil)
}

func (fs *FS) setNoCaps(id uint64, until time.Time) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n := fs.nodes[id]; n != nil {
		n.noCapsUntil = until
	}
}

// ListXAttr lists extended attribute names.
func (fs *FS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	f, st := fs.xattrFID(h)
	if st == fuse.ENODATA {
		return 0, fuse.OK
	}
	if !st.Ok() {
		return 0, st
	}
	names, known := fs.knownXattrNames(h.NodeId)
	var err error
	if !known {
		names, err = fs.c.Listxattr(fs.ctx(h), f)
	}
	if fs.goneHeld(h.NodeId, err) {
		return 0, fuse.OK
	}
	if err != nil {
		return 0, fs.status("listxattr", err)
	}
	var b []byte
	for _, n := range names {
		b = append(b, n...)
		b = append(b, 0)
	}
	return copyOut(b, dest)
}

// SetXAttr sets an extended attribute; nacre.lov sets the layout.
func (fs *FS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	f, st := fs.xattrFID(&in.InHeader)
	if st == fuse.ENODATA {
		return fuse.EPERM
	}
	if !st.Ok() {
		return st
	}
	if st := xattrNameStatus(attr); st == fuse.EINVAL {
		return st
	}
	if attr == LmvXattr {
		// Where a directory's entries live is set when it is made
		// (nacre mkdir -i).
		return fuse.EPERM
	}
	ctx := fs.ctx(&in.InHeader)
	// The inode changes (ctime; for nacre.lov the layout): attributes
	// cached for opens must not be used any more.
	defer fs.forgetAttrs(in.NodeId)
	fs.changingXattrs(in.NodeId)
	defer fs.changingXattrs(in.NodeId)
	if attr == LovXattr {
		l, err := parseLov(string(data))
		if err == nil {
			err = fs.checkLovOST(ctx, l)
		}
		if err != nil {
			fs.log.Info("bad nacre.lov value", "err", err)
			return fuse.EINVAL
		}
		// The MDT lets a layout change only a file with no data; this
		// mount's writes still on their way to the OSTs are data (before,
		// the layout changed under them and they were lost).
		fs.fenceOwnWrites(f)
		_, err = fs.c.SetLayout(ctx, f, l)
		if err == nil {
			fs.mu.Lock()
			of := fs.files[f]
			fs.mu.Unlock()
			if of != nil {
				// The open file must write to the new objects.
				if ino, gerr := fs.c.Getattr(ctx, f); gerr == nil {
					of.f.Refresh(ino)
				}
			}
		}
		return fs.status("setxattr", err)
	}
	if attr == capsXattr {
		fs.setNoCaps(in.NodeId, time.Time{})
	}
	return fs.status("setxattr", fs.c.Setxattr(ctx, f, attr, data, in.Flags))
}

// RemoveXAttr removes an extended attribute.
func (fs *FS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	f, st := fs.xattrFID(h)
	if st == fuse.ENODATA {
		return fuse.EPERM
	}
	if !st.Ok() {
		return st
	}
	if st := xattrNameStatus(attr); st == fuse.EINVAL {
		return st
	}
	if attr == LovXattr || attr == LmvXattr {
		return fuse.EPERM
	}
	defer fs.forgetAttrs(h.NodeId)
	fs.changingXattrs(h.NodeId)
	defer fs.changingXattrs(h.NodeId)
	return fs.status("removexattr", fs.c.Removexattr(fs.ctx(h), f, attr))
}
