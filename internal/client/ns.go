package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/bulk"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/mdrpc"
)

// mutate sends one command to the MDT owning f, retrying with the same
// request id, and turns an errno reply into an *errno.Errno.
func (c *Client) mutate(ctx context.Context, what string, f fid.FID, cmd *pb.Command) (*pb.Reply, error) {
	id, ack := c.beginReq()
	defer c.endReq(id)
	cmd.ClientId, cmd.RequestId, cmd.AckedBelow, cmd.Cred = c.id, id, ack, c.cred(ctx)
	var rep *pb.Reply
	err := c.retry(ctx, what, f, func(ctx context.Context) error {
		m, err := c.mdtFor(f)
		if err != nil {
			return err
		}
		k := c.kept(m.index)
		k.prepare(cmd)
		rep, err = m.cli.Mutate(ctx, cmd)
		if err == nil && k.absorb(rep) {
			go c.watchKept(m.index, k)
		}
		return err
	})
	if err != nil {
		return nil, c.mdtError(what, f, err)
	}
	if rep.Errno != 0 {
		return rep, errno.NewErrno(what, rep.Errno, rep.Message)
	}
	return rep, nil
}

func (c *Client) read(ctx context.Context, what string, f fid.FID, call func(ctx context.Context, m mdrpc.MDSService) error) error {
	err := c.retry(ctx, what, f, func(ctx context.Context) error {
		m, err := c.mdtFor(f)
		if err != nil {
			return err
		}
		return call(ctx, m.cli)
	})
	if err != nil {
		return c.mdtError(what, f, err)
	}
	return nil
}

// CreateOpts are the optional parts of Create.
type CreateOpts struct {
	Exclusive bool
	Layout    *pb.Layout // striping hint for regular files
	Rdev      uint32
	Symlink   string
	Projid    uint32
	// DelayLayout creates a regular file without OST objects; the first
	// write gives it its layout (Lustre's O_LOV_DELAY_CREATE).
	DelayLayout bool
	// Umask is applied by the MDT unless the parent directory has a
	// default ACL, which replaces it (a mount with ACLs passes the
	// process's umask and the mode unmasked, as the kernel leaves it).
	Umask uint32
	// Open asks the MDS to record the file as open by this client (a
	// mount's create of a file it opens); Reply.Opened says it did.
	Open bool
	// MDT makes a directory on this MDT (nacre mkdir -i): a remote
	// directory when the parent is on another. Nil: the parent's MDT.
	MDT *uint32
}

// Create makes a file of the type in mode's S_IFMT bits (regular if 0).
// Without Exclusive an existing regular file is returned as it is (open
// with O_CREAT); Reply.Existed tells which happened.
func (c *Client) Create(ctx context.Context, parent fid.FID, name string, mode uint32, o CreateOpts) (*pb.Inode, bool, error) {
	rep, err := c.CreateReply(ctx, parent, name, mode, o)
	if err != nil {
		return nil, false, err
	}
	return rep.Inode, rep.Existed, nil
}

// CreateReply is Create with the MDS's whole reply.
func (c *Client) CreateReply(ctx context.Context, parent fid.FID, name string, mode uint32, o CreateOpts) (*pb.Reply, error) {
	rep, err := c.mutate(ctx, "create "+name, parent, &pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{
		Parent: parent.PB(), Name: []byte(name), Mode: mode, Rdev: o.Rdev, Symlink: []byte(o.Symlink),
		Exclusive: o.Exclusive, Layout: o.Layout, Projid: o.Projid, DelayLayout: o.DelayLayout, Umask: o.Umask, Open: o.Open, Mdt: o.MDT}}})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// Mkdir makes a directory.
func (c *Client) Mkdir(ctx context.Context, parent fid.FID, name string, mode uint32) (*pb.Inode, error) {
	ino, _, err := c.Create(ctx, parent, name, syscall.S_IFDIR|mode&0o7777, CreateOpts{Exclusive: true})
	return ino, err
}

// Symlink makes a symbolic link to target.
func (c *Client) Symlink(ctx context.Context, parent fid.FID, name, target string) (*pb.Inode, error) {
	ino, _, err := c.Create(ctx, parent, name, syscall.S_IFLNK|0o777, CreateOpts{Exclusive: true, Symlink: target})
	return ino, err
}

// Link adds the name parent/name for the object f.
func (c *Client) Link(ctx context.Context, f, parent fid.FID, name string) (*pb.Inode, error) {
	rep, err := c.mutate(ctx, "link "+name, parent, &pb.Command{Op: &pb.Command_Link{Link: &pb.LinkOp{Fid: f.PB(), Parent: parent.PB(), Name: []byte(name)}}})
	if err != nil {
		return nil, err
	}
	return rep.Inode, nil
}

// Unlink removes a name that is not a directory; the result is the
// object's state after the removal (Nlink 0 when it is gone).
func (c *Client) Unlink(ctx context.Context, parent fid.FID, name string) (*pb.Inode, error) {
	return c.Remove(ctx, parent, name, false)
}

// Rmdir removes an empty directory.
func (c *Client) Rmdir(ctx context.Context, parent fid.FID, name string) error {
	_, err := c.Remove(ctx, parent, name, true)
	return err
}

// Remove removes a name: a file's (unlink) or an empty directory's
// (rmdir, dir). It returns the object as the removal left it (its link
// count; no names).
func (c *Client) Remove(ctx context.Context, parent fid.FID, name string, dir bool) (*pb.Inode, error) {
	what := "unlink "
	if dir {
		what = "rmdir "
	}
	rep, err := c.mutate(ctx, what+name, parent, &pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: parent.PB(), Name: []byte(name), Dir: dir}}})
	if err != nil {
		return nil, err
	}
	return rep.Inode, nil
}

// Rename flags.
const (
	RenameNoReplace = 1
	RenameExchange  = 2
	// RenameWhiteout leaves a whiteout (a character device 0:0) at the
	// old name, as overlayfs asks of its upper layer.
	RenameWhiteout = 4
)

// Rename moves sp/sn to dp/dn, replacing dn unless flags say otherwise.
func (c *Client) Rename(ctx context.Context, sp fid.FID, sn string, dp fid.FID, dn string, flags uint32) error {
	_, err := c.Move(ctx, sp, sn, dp, dn, flags)
	return err
}

// Move is Rename that returns the object moved, as the rename left it
// (its new change time).
func (c *Client) Move(ctx context.Context, sp fid.FID, sn string, dp fid.FID, dn string, flags uint32) (*pb.Inode, error) {
	rep, err := c.mutate(ctx, "rename "+sn+" to "+dn, sp, &pb.Command{Op: &pb.Command_Rename{Rename: &pb.RenameOp{
		SrcParent: sp.PB(), SrcName: []byte(sn), DstParent: dp.PB(), DstName: []byte(dn), Flags: flags}}})
	if err != nil {
		return nil, err
	}
	return rep.Inode, nil
}

// Lookup resolves one name.
func (c *Client) Lookup(ctx context.Context, parent fid.FID, name string) (*pb.Inode, error) {
	var rep *pb.Reply
	err := c.read(ctx, "lookup "+name, parent, func(ctx context.Context, m mdrpc.MDSService) (err error) {
		rep, err = m.Lookup(ctx, &pb.LookupRequest{Parent: parent.PB(), Name: []byte(name), Cred: c.cred(ctx)})
		return err
	})
	if err != nil {
		return nil, err
	}
	if rep.Errno != 0 {
		return nil, errno.NewErrno("lookup "+name, rep.Errno, rep.Message)
	}
	if rep.Inode.GetFlags()&uint32(pb.InodeFlag_INODE_FLAG_REMOTE) != 0 {
		// A remote directory: its attributes are on its own MDT.
		return c.Getattr(ctx, fid.FromPB(rep.Inode.Fid))
	}
	return rep.Inode, nil
}

// Getattr returns an object's MDT attributes. A regular file's size is
// exact unless Flags has SIZE_DIRTY; Stat resolves that.
func (c *Client) Getattr(ctx context.Context, f fid.FID) (*pb.Inode, error) {
	return c.getattr(ctx, f, false)
}

// GetattrLinks also returns the linkEA: the parent and name of each link,
// up to its 4 KiB bound (docs/lfsck.md, "linkEA bound").
func (c *Client) GetattrLinks(ctx context.Context, f fid.FID) (*pb.Inode, error) {
	return c.getattr(ctx, f, true)
}

func (c *Client) getattr(ctx context.Context, f fid.FID, links bool) (*pb.Inode, error) {
	var rep *pb.Reply
	what := "getattr " + f.String()
	err := c.read(ctx, what, f, func(ctx context.Context, m mdrpc.MDSService) (err error) {
		rep, err = m.Getattr(ctx, &pb.GetattrRequest{Fid: f.PB(), WantLinks: links})
		return err
	})
	if err != nil {
		return nil, err
	}
	if rep.Errno != 0 {
		return nil, errno.NewErrno(what, rep.Errno, rep.Message)
	}
	return rep.Inode, nil
}

// Stat is Getattr with an exact size: if a writer has the file open (or
// crashed while writing), the size comes from the OSTs (glimpse).
func (c *Client) Stat(ctx context.Context, f fid.FID) (*pb.Inode, error) {
	ino, err := c.Getattr(ctx, f)
	if err != nil {
		return nil, err
	}
	if err := c.glimpseIfDirty(ctx, ino); err != nil {
		return nil, err
	}
	return ino, nil
}

func (c *Client) glimpseIfDirty(ctx context.Context, ino *pb.Inode) error {
	if ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) == 0 || ino.Layout == nil {
		return nil
	}
	g, err := c.glimpse(ctx, ino)
	if err != nil {
		return err
	}
	ino.Size, ino.Blocks = g.size, g.blocks
	mergeWriteTime(ino, g.mtime)
	return nil
}

// mergeWriteTime folds the time of the newest write seen on the OSTs into
// ino: a write moves mtime and ctime, unless a user set mtime after it
// (mtime_set_ns, as the MDT applies a close).
func mergeWriteTime(ino *pb.Inode, w int64) {
	if w <= ino.MtimeNs || w <= ino.MtimeSetNs {
		return
	}
	ino.MtimeNs = w
	ino.CtimeNs = max(ino.CtimeNs, w)
}

// Setattr changes attributes. A size change of a regular file truncates
// its objects on the OSTs first, then records the size on the MDT.
func (c *Client) Setattr(ctx context.Context, op *pb.SetattrOp) (*pb.Inode, error) {
	ino, _, err := c.setattr(ctx, op)
	return ino, err
}

// setattr is Setattr, returning too the epochs of the OSTs that truncated
// the file's objects (File.Truncate).
func (c *Client) setattr(ctx context.Context, op *pb.SetattrOp) (*pb.Inode, []uint64, error) {
	f := fid.FromPB(op.Fid)
	var epochs []uint64
	if op.Valid&uint32(pb.SetattrValid_SETATTR_SIZE) != 0 {
		ino, err := c.Getattr(ctx, f)
		if err != nil {
			return nil, nil, err
		}
		if ino.Layout != nil && ino.Mode&syscall.S_IFMT == syscall.S_IFREG {
			// The MDT decides after the objects are cut: ask its rule
			// first (root, write access, or a file opened for writing),
			// or a refused truncate still destroyed the data.
			if cred := c.LocalCred(c.cred(ctx)); cred.GetUid() != 0 && op.Valid&uint32(pb.SetattrValid_SETATTR_OPENED) == 0 {
				if err := c.checkAccess(ctx, "truncate", ino, 2); err != nil {
					return nil, nil, err
				}
			}
			if epochs, err = c.truncateObjects(ctx, ino, op.Size); err != nil {
				return nil, nil, err
			}
			// The blocks the objects hold now (du): none at size 0,
			// else what they say. The close of a write records them, but
			// a truncate alone left the old figure for good.
			op.Valid |= uint32(pb.SetattrValid_SETATTR_BLOCKS)
			op.Blocks = 0
			if op.Size > 0 {
				g, err := c.glimpse(ctx, ino)
				if err != nil {
					return nil, nil, err
				}
				op.Blocks = g.blocks
			}
			if op.Valid&uint32(pb.SetattrValid_SETATTR_MTIME) == 0 {
				op.Valid |= uint32(pb.SetattrValid_SETATTR_MTIME_NOW)
			}
		}
	}
	rep, err := c.mutate(ctx, "setattr "+f.String(), f, &pb.Command{Op: &pb.Command_Setattr{Setattr: op}})
	if err != nil {
		return nil, nil, err
	}
	if op.Valid&ownerBits != 0 {
		c.ownerToObjects(rep.Inode)
	}
	return rep.Inode, epochs, nil
}

const ownerBits = uint32(pb.SetattrValid_SETATTR_UID | pb.SetattrValid_SETATTR_GID | pb.SetattrValid_SETATTR_PROJID)

// ownerPushWait bounds one push of an owner to the OSTs of a file, and
// ownerPushes how many are under way at once (a push beyond is dropped:
// the checker repairs what it would have done).
const (
	ownerPushWait = 5 * time.Second
	ownerPushes   = 64
)

// ownerToObjects tells the OST objects of a regular file the owner and
// project its MDT now records, as Lustre's MDT does after a chown, so that
// the objects keep the owner the layout check expects of them. In the
// background and best effort, after the MDT committed: the chown does not
// wait for the OSTs (it had doubled the time of a `chown -R`, and an OST
// that hung made each chown wait 5 s), and an object this misses (its OST
// down, the client gone in between, too many pushes under way) is what
// the checker's MDT-wins rule repairs (inconsistent_owner). Settle waits
// for the pushes under way.
func (c *Client) ownerToObjects(ino *pb.Inode) {
	l := ino.GetLayout()
	if l == nil || ino.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	select {
	case c.ownerSem <- struct{}{}:
	default:
		c.log.Debug("owner of OST objects not changed (too many changes under way); the layout check will", "fid", fid.FromPB(ino.Fid))
		return
	}
	c.owners.Add(1)
	go func() {
		defer c.owners.Done()
		defer func() { <-c.ownerSem }()
		ctx, cancel := context.WithTimeout(context.Background(), ownerPushWait)
		defer cancel()
		meta := &bulk.ObjMeta{UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid, Valid: bulk.MetaOwner | bulk.MetaProjID}
		_ = parallel(ctx, len(l.Objects), ioParallel, func(ctx context.Context, i int) error {
			o := l.Objects[i]
			if isHole(o) {
				return nil
			}
			wc, err := c.wireFor(o.Ost)
			if err == nil {
				err = wc.SetAttr(ctx, objID(o), meta)
			}
			if err != nil {
				c.log.Debug("owner of an OST object not changed; the layout check will", "fid", fid.FromPB(ino.Fid), "stripe", i, "err", err)
			}
			return nil // the others still get it
		})
	}()
}

// Settle waits until the work this client does in the background (owner
// changes on their way to the OSTs) is done. Close settles first.
func (c *Client) Settle() { c.owners.Wait() }

// Readdir returns entries after cookie; eof when none follow.
func (c *Client) Readdir(ctx context.Context, f fid.FID, cookie uint64, max int, plus bool) ([]*pb.DirEntry, bool, error) {
	var rep *pb.ReaddirReply
	what := "readdir " + f.String()
	err := c.read(ctx, what, f, func(ctx context.Context, m mdrpc.MDSService) (err error) {
		rep, err = m.Readdir(ctx, &pb.ReaddirRequest{Fid: f.PB(), Cookie: cookie, MaxEntries: uint32(max), Plus: plus, Cred: c.cred(ctx)})
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if rep.Errno != 0 {
		return nil, false, errno.NewErrno(what, rep.Errno, "")
	}
	if plus {
		c.remoteAttrs(ctx, f, rep.Entries)
	}
	return rep.Entries, rep.Eof, nil
}

// remoteAttrs fills in the attributes of the entries of directory d that
// lead to another MDT, which d's MDT could not give, several at a time. An
// entry whose MDT does not answer is left without them: readdir still
// lists its name, and a lookup of it says what is wrong.
func (c *Client) remoteAttrs(ctx context.Context, d fid.FID, ents []*pb.DirEntry) {
	var remote []*pb.DirEntry
	var home *mdtConn
	for _, e := range ents {
		if e.Inode != nil {
			continue
		}
		if home == nil {
			var err error
			if home, err = c.mdtFor(d); err != nil {
				return
			}
		}
		if m, err := c.mdtFor(fid.FromPB(e.Fid)); err == nil && m != home {
			remote = append(remote, e)
		} // else a dangling entry: its MDT has no object for it
	}
	if len(remote) == 0 {
		return
	}
	_ = parallel(ctx, len(remote), ioParallel, func(ctx context.Context, i int) error {
		if ino, err := c.Getattr(ctx, fid.FromPB(remote[i].Fid)); err == nil {
			remote[i].Inode = ino
		}
		return nil // the others still get theirs
	})
}

// ReadDirAll lists a whole directory.
func (c *Client) ReadDirAll(ctx context.Context, f fid.FID, plus bool) ([]*pb.DirEntry, error) {
	return c.ReadDirUpTo(ctx, f, plus, 0)
}

// ErrTooManyEntries is ReadDirUpTo's answer for a directory with more
// entries than it was allowed.
var ErrTooManyEntries = errors.New("directory has more entries than allowed")

// ReadDirUpTo lists a whole directory, or stops with ErrTooManyEntries
// once it has read more than max entries (max 0: no limit).
func (c *Client) ReadDirUpTo(ctx context.Context, f fid.FID, plus bool, max int) ([]*pb.DirEntry, error) {
	var out []*pb.DirEntry
	var cookie uint64
	for {
		ents, eof, err := c.Readdir(ctx, f, cookie, 1024, plus)
		if err != nil {
			return nil, err
		}
		out = append(out, ents...)
		if max > 0 && len(out) > max {
			return nil, fmt.Errorf("readdir %s: %w (%d)", f, ErrTooManyEntries, max)
		}
		if len(ents) > 0 {
			cookie = ents[len(ents)-1].Cookie
		}
		if eof || len(ents) == 0 {
			return out, nil
		}
	}
}

// Readlink returns a symlink's target.
func (c *Client) Readlink(ctx context.Context, f fid.FID) (string, error) {
	ino, err := c.Getattr(ctx, f)
	if err != nil {
		return "", err
	}
	if ino.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return "", &errno.Errno{Op: "readlink " + f.String(), Errno: syscall.EINVAL}
	}
	return string(ino.Symlink), nil
}

// Setxattr sets an extended attribute (flags: 1 create, 2 replace).
func (c *Client) Setxattr(ctx context.Context, f fid.FID, name string, value []byte, flags uint32) error {
	_, err := c.mutate(ctx, "setxattr "+name, f, &pb.Command{Op: &pb.Command_Setxattr{Setxattr: &pb.SetxattrOp{Fid: f.PB(), Name: []byte(name), Value: value, Flags: flags}}})
	return err
}

// Removexattr removes an extended attribute.
func (c *Client) Removexattr(ctx context.Context, f fid.FID, name string) error {
	_, err := c.mutate(ctx, "removexattr "+name, f, &pb.Command{Op: &pb.Command_Removexattr{Removexattr: &pb.RemovexattrOp{Fid: f.PB(), Name: []byte(name)}}})
	return err
}

// Getxattr reads an extended attribute.
func (c *Client) Getxattr(ctx context.Context, f fid.FID, name string) ([]byte, error) {
	var rep *pb.XattrReply
	what := "getxattr " + name
	err := c.read(ctx, what, f, func(ctx context.Context, m mdrpc.MDSService) (err error) {
		rep, err = m.Getxattr(ctx, &pb.XattrRequest{Fid: f.PB(), Name: []byte(name), Cred: c.cred(ctx)})
		return err
	})
	if err != nil {
		return nil, err
	}
	if rep.Errno != 0 {
		return nil, errno.NewErrno(what, rep.Errno, "")
	}
	return rep.Value, nil
}

// Listxattr lists extended attribute names.
func (c *Client) Listxattr(ctx context.Context, f fid.FID) ([]string, error) {
	var rep *pb.XattrReply
	what := "listxattr " + f.String()
	err := c.read(ctx, what, f, func(ctx context.Context, m mdrpc.MDSService) (err error) {
		rep, err = m.Listxattr(ctx, &pb.XattrRequest{Fid: f.PB(), Cred: c.cred(ctx)})
		return err
	})
	if err != nil {
		return nil, err
	}
	if rep.Errno != 0 {
		return nil, errno.NewErrno(what, rep.Errno, "")
	}
	return byteStrings(rep.Names), nil
}

// SetLayout sets a directory's default layout or an empty file's layout.
func (c *Client) SetLayout(ctx context.Context, f fid.FID, l *pb.Layout) (*pb.Inode, error) {
	rep, err := c.mutate(ctx, "setstripe "+f.String(), f, &pb.Command{Op: &pb.Command_SetLayout{SetLayout: &pb.SetLayoutOp{Fid: f.PB(), Layout: l}}})
	if err != nil {
		return nil, err
	}
	return rep.Inode, nil
}

// Fid2Path returns every path of f.
func (c *Client) Fid2Path(ctx context.Context, f fid.FID) ([]string, error) {
	return c.fid2path(ctx, f, 0)
}

// maxRemoteHops bounds how many MDTs one path may cross in Fid2Path (a
// loop of remote directories, which the checker repairs, ends there).
const maxRemoteHops = 64

func (c *Client) fid2path(ctx context.Context, f fid.FID, hops int) ([]string, error) {
	var rep *pb.Fid2PathReply
	what := "fid2path " + f.String()
	err := c.read(ctx, what, f, func(ctx context.Context, m mdrpc.MDSService) (err error) {
		rep, err = m.Fid2Path(ctx, &pb.Fid2PathRequest{Fid: f.PB(), Cred: c.cred(ctx)})
		return err
	})
	if err != nil {
		return nil, err
	}
	if rep.Errno == int32(syscall.EPERM) {
		return nil, errno.NewErrno(what, rep.Errno, "only root may resolve a FID to paths")
	}
	if rep.Errno != 0 {
		return nil, errno.NewErrno(what, rep.Errno, "")
	}
	paths := byteStrings(rep.Paths)
	for _, t := range rep.Tails {
		// The path goes on on another MDT, above a remote directory.
		if hops >= maxRemoteHops {
			return nil, &errno.Errno{Op: what, Errno: syscall.ELOOP}
		}
		above, err := c.fid2path(ctx, fid.FromPB(t.Parent), hops+1)
		if errors.Is(err, syscall.ENOENT) {
			continue // that name is gone there: not a path
		}
		if err != nil {
			return nil, err
		}
		for _, a := range above {
			paths = append(paths, strings.TrimSuffix(a, "/")+"/"+string(t.Path))
		}
	}
	if len(paths) == 0 {
		return nil, errno.NewErrno(what, int32(syscall.ENOENT), "no path reaches the root")
	}
	return paths, nil
}

// MDTStatfs returns each MDT's statfs.
func (c *Client) MDTStatfs(ctx context.Context) (map[uint32]*pb.Statfs, error) {
	c.mu.Lock()
	mdts := make([]*mdtConn, 0, len(c.mdts))
	for _, m := range c.mdts {
		mdts = append(mdts, m)
	}
	c.mu.Unlock()
	out := map[uint32]*pb.Statfs{}
	for _, m := range mdts {
		r, err := m.cli.Statfs(ctx, &pb.StatfsRequest{})
		if err != nil {
			return nil, err
		}
		out[m.index] = r.Statfs
	}
	return out, nil
}

// byteStrings converts names or paths from the wire (bytes: POSIX names
// need not be UTF-8) to Go strings, which hold any bytes.
func byteStrings(bs [][]byte) []string {
	if bs == nil {
		return nil
	}
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = string(b)
	}
	return out
}
