package mdt

import (
	"google.golang.org/protobuf/proto"

	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// The read side serves lookups from the applied state. Callers that need
// linearizable reads across replicas first wait for the Raft read index.

var rootCred = &pb.Cred{}

func credOr(c *pb.Cred) *pb.Cred {
	if c == nil {
		return rootCred
	}
	return c
}

// readInode serves a read from the inode cache when it can. Readers never
// fill the cache: a value read from the store could be older than one a
// concurrent apply is caching.
func (t *Target) readInode(f fid.FID) (uint64, *pb.Inode, error) {
	t.mu.RLock()
	local, ino, ok := t.cachedGet(f)
	t.mu.RUnlock()
	if ok {
		return local, ino, nil
	}
	return getInode(t.db, f)
}

// DirDefault is the stripe count and first OST index that a new file in
// directory parent takes from the directory's default layout, or from the
// file system's (the root's) when the directory has none: 0 and -1 when
// neither says. The leader orders the OSTs of a create by it; the state
// machine resolves the same default again when it applies the create.
func (t *Target) DirDefault(parent fid.FID) (count, offset int32) {
	_, ino, err := t.readInode(parent)
	if err == nil && ino.Layout == nil && parent != fid.Root {
		_, ino, err = t.readInode(fid.Root)
	}
	if err != nil || ino.Layout == nil {
		return 0, -1
	}
	return ino.Layout.StripeCount, ino.Layout.StripeOffset
}

// Getattr returns an object's attributes; links (the linkEA) only if asked.
func (t *Target) Getattr(f fid.FID, wantLinks bool) (*pb.Inode, error) {
	local, ino, err := t.readInode(f)
	if err != nil {
		return nil, err
	}
	if !wantLinks {
		ino.Links = nil
	}
	t.markNoXattrs(local, ino)
	return ino, nil
}

// Lookup resolves a name in a directory.
func (t *Target) Lookup(parent fid.FID, name string, cred *pb.Cred) (*pb.Inode, error) {
	plocal, p, err := t.readInode(parent)
	if err != nil {
		return nil, err
	}
	if !isDir(p) {
		return nil, errf(syscall.ENOTDIR, "lookup %q: %s is not a directory", name, parent)
	}
	if !mayAccess(t.db, plocal, p, credOr(cred), accX) {
		return nil, errf(syscall.EACCES, "lookup %q in %s", name, parent)
	}
	if len(name) > MaxNameLen {
		return nil, errf(syscall.ENAMETOOLONG, "lookup of a %d-byte name", len(name))
	}
	// The entry and the object are two reads while commands keep being
	// applied: a rename that replaces the name, or an unlink, may remove
	// the object between them. Read the entry again then; only an entry
	// that still names a missing object is dangling.
	var prev fid.FID
	for attempt := 0; ; attempt++ {
		cf, typ, remote, found, err := lookupEntry(t.db, plocal, name)
		if err != nil {
			return nil, err
		}
		if !found {
			return nil, errf(syscall.ENOENT, "no entry %q in %s", name, parent)
		}
		if remote {
			// The client asks the object's own MDT for its attributes.
			return &pb.Inode{Fid: cf.PB(), Mode: uint32(typ) << 12, Flags: uint32(pb.InodeFlag_INODE_FLAG_REMOTE)}, nil
		}
		clocal, ino, err := t.readInode(cf)
		if err == nil {
			ino.Links = nil
			t.markNoXattrs(clocal, ino)
			return ino, nil
		}
		if ErrnoOf(err) != syscall.ENOENT {
			return nil, err
		}
		if cf == prev || attempt >= 8 {
			return nil, errf(syscall.ENOENT, "entry %q in %s names missing object %s (dangling; run `nacre lfsck start -t namespace`)", name, parent, cf)
		}
		prev = cf
	}
}

// Readdir lists entries after cookie (0 = from the start), at most max.
// eof is true when no entry follows the last one returned. Entries that
// share a hash are never split across calls, so cookies stay exact.
func (t *Target) Readdir(f fid.FID, cookie uint64, max int, plus bool, cred *pb.Cred) ([]*pb.DirEntry, bool, error) {
	local, d, err := t.readInode(f)
	if err != nil {
		return nil, false, err
	}
	if !isDir(d) {
		return nil, false, errf(syscall.ENOTDIR, "readdir %s", f)
	}
	if !mayAccess(t.db, local, d, credOr(cred), accR) {
		return nil, false, errf(syscall.EACCES, "readdir %s", f)
	}
	if max <= 0 {
		max = 1024
	}
	p := DirentPrefix(local)
	it, err := t.db.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return nil, false, errf(syscall.EIO, "readdir %s: %v", f, err)
	}
	defer it.Close()
	var probe *xattrProbe
	if plus {
		if probe, err = newXattrProbe(t.db); err != nil {
			return nil, false, errf(syscall.EIO, "readdir %s: %v", f, err)
		}
		defer probe.close()
	}
	var out []*pb.DirEntry
	valid := it.First()
	if cookie != 0 {
		valid = it.SeekGE(binary.BigEndian.AppendUint64(append([]byte(nil), p...), cookie+1))
	}
	var lastHash uint64
	for ; valid; valid = it.Next() {
		k := it.Key()
		if len(k) < len(p)+8 {
			continue
		}
		h := binary.BigEndian.Uint64(k[len(p):])
		if len(out) >= max && h != lastHash {
			return out, false, nil
		}
		cf, typ, ok := decodeDirent(it.Value())
		if !ok {
			continue
		}
		e := &pb.DirEntry{Name: bytes.Clone(k[len(p)+8:]), Fid: cf.PB(), Type: uint32(typ), Cookie: h}
		if plus {
			if clocal, ino, err := t.readInode(cf); err == nil {
				ino.Links = nil
				markProbed(probe, clocal, ino)
				e.Inode = ino
			}
		}
		out = append(out, e)
		lastHash = h
	}
	return out, true, it.Error()
}

// Getxattr returns one extended attribute.
func (t *Target) Getxattr(f fid.FID, name string, cred *pb.Cred) ([]byte, error) {
	local, ino, err := getInode(t.db, f)
	if err != nil {
		return nil, err
	}
	c := credOr(cred)
	if strings.HasPrefix(name, "trusted.") && c.Uid != 0 {
		return nil, errf(syscall.ENODATA, "xattr %q", name)
	}
	if strings.HasPrefix(name, "user.") && !mayAccess(t.db, local, ino, c, accR) {
		return nil, errf(syscall.EACCES, "read xattr %q of %s", name, f)
	}
	v, err := t.db.Get(xattrKey(local, name))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, errf(syscall.ENODATA, "no xattr %q on %s", name, f)
	}
	if err != nil {
		return nil, errf(syscall.EIO, "read xattr %q of %s: %v", name, f, err)
	}
	return v, nil
}

// Listxattr lists extended attribute names (trusted.* only for root).
func (t *Target) Listxattr(f fid.FID, cred *pb.Cred) ([]string, error) {
	local, _, err := getInode(t.db, f)
	if err != nil {
		return nil, err
	}
	c := credOr(cred)
	p := xattrPrefix(local)
	it, err := t.db.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return nil, errf(syscall.EIO, "list xattrs of %s: %v", f, err)
	}
	defer it.Close()
	var names []string
	for it.First(); it.Valid(); it.Next() {
		n := string(it.Key()[len(p):])
		if strings.HasPrefix(n, "trusted.") && c.Uid != 0 {
			continue
		}
		names = append(names, n)
	}
	return names, it.Error()
}

// Fid2Path returns every path of an object (one per hard link), relative
// to the root and starting with "/", by walking linkEA entries upwards.
// A path that goes on on another MDT, through a remote directory, is a
// tail instead: the part below the directory there.
func (t *Target) Fid2Path(f fid.FID) ([]string, []*pb.PathTail, error) {
	if f == fid.Root {
		return []string{"/"}, nil, nil
	}
	_, ino, err := getInode(t.db, f)
	if err != nil {
		return nil, nil, err
	}
	if len(ino.Links) == 0 && ino.LinksOverflowIndex != 0 {
		return nil, nil, errf(syscall.ENOENT, "the names of %s are not recorded (it has more hard links than its linkEA holds; `nacre lfsck -t namespace` records them once they fit)", f)
	}
	if len(ino.Links) == 0 {
		return nil, nil, errf(syscall.ENOENT, "%s has no name (orphan)", f)
	}
	var paths []string
	var tails []*pb.PathTail
	for _, l := range ino.Links {
		parts := []string{string(l.Name)}
		cur, remote := fid.FromPB(l.Parent), l.Remote
		ok := true
		for depth := 0; cur != fid.Root && !remote; depth++ {
			_, p, err := getInode(t.db, cur)
			if err != nil || len(p.Links) == 0 || depth > 4096 {
				ok = false
				break
			}
			parts = append(parts, string(p.Links[0].Name))
			cur, remote = fid.FromPB(p.Links[0].Parent), p.Links[0].Remote
		}
		if !ok {
			continue
		}
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
		if remote {
			tails = append(tails, &pb.PathTail{Parent: cur.PB(), Path: []byte(strings.Join(parts, "/"))})
			continue
		}
		paths = append(paths, "/"+strings.Join(parts, "/"))
	}
	if len(paths) == 0 && len(tails) == 0 {
		return nil, nil, errf(syscall.ENOENT, "no path of %s reaches the root", f)
	}
	return paths, tails, nil
}

// Statfs reports inode usage; byte figures come from the store's disk.
func (t *Target) Statfs(bytesTotal, bytesFree, bytesAvail uint64) *pb.Statfs {
	used := t.Inodes()
	// An MDT object costs well under 1 KiB in the store; count free inodes
	// as the free space in KiB.
	free := bytesAvail / 1024
	return &pb.Statfs{
		BytesTotal: bytesTotal, BytesFree: bytesFree, BytesAvail: bytesAvail,
		InodesTotal: used + free, InodesFree: free,
	}
}

// ScanInodes calls fn for every object in local-key order (one sequential
// iteration of the object range). Undecodable records are passed with a
// nil inode so that callers can report them.
func (t *Target) ScanInodes(r kv.Reader, fn func(local uint64, ino *pb.Inode) error) error {
	if r == nil {
		r = t.db
	}
	lo := []byte{pfxObj}
	it, err := r.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			continue
		}
		ino := &pb.Inode{}
		if proto.Unmarshal(it.Value(), ino) != nil {
			ino = nil
		}
		if err := fn(binary.BigEndian.Uint64(k[1:]), ino); err != nil {
			return err
		}
	}
	return it.Error()
}
