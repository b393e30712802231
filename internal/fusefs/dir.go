package fusefs

import (
	"context"
	"errors"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
)

// Directory offsets: 1 and 2 follow "." and ".."; every other offset is
// the MDT's cookie of the entry it follows (a 63-bit name hash, always at
// least 16), so a listing resumes exactly where it stopped, after a seek
// too, while other clients add and remove entries.

// dirPage is how many entries one MDT readdir returns.
const dirPage = 256

// openDir is a directory this mount has open (it may become an orphan,
// as an open file may).
type openDir struct {
	refs   int
	orphan bool
}

// dirHandle caches the last page of entries read from the MDT.
type dirHandle struct {
	mu    sync.Mutex
	f     fid.FID
	virt  uint64 // nacreID or fidDirID for a virtual directory, else 0
	after uint64 // the page follows this cookie
	plus  bool
	page  []*pb.DirEntry
	eof   bool
}

// OpenDir opens a directory for reading.
func (fs *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	d := &dirHandle{}
	switch in.NodeId {
	case nacreID, fidDirID:
		d.virt = in.NodeId
	default:
		n := fs.node(in.NodeId)
		if n == nil {
			return fuse.ENOENT
		}
		cred := fs.cred(&in.InHeader)
		fs.beginOpen(n.fid)
		defer fs.endOpen(n.fid)
		ctx := client.WithCred(context.Background(), cred)
		ino, st := fs.checkName(ctx, n)
		if !st.Ok() {
			return st
		}
		var err error
		if ino == nil {
			ino, err = fs.c.Getattr(ctx, n.fid)
		}
		if err != nil {
			last := fs.lastAttrs(n)
			if last == nil || !errors.Is(err, syscall.ENOENT) {
				return fs.status("opendir", err)
			}
			// Removed while the kernel holds it (a process's working
			// directory): it opens, and lists nothing (readDir), as on
			// a local file system.
			ino = last
		}
		if ino.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return fuse.ENOTDIR
		}
		if !fs.mayAccess(ctx, ino, cred, 4) {
			return fuse.EACCES
		}
		d.f = n.fid
	}
	fs.mu.Lock()
	if d.virt == 0 {
		od := fs.dirs[d.f]
		if od == nil {
			od = &openDir{orphan: fs.inherit[d.f]}
			delete(fs.inherit, d.f)
			fs.dirs[d.f] = od
		}
		od.refs++
	}
	h := &handle{id: fs.nextFh, dir: d}
	fs.nextFh++
	fs.handles[h.id] = h
	fs.mu.Unlock()
	out.Fh = h.id
	return fuse.OK
}

// ReleaseDir closes a directory.
func (fs *FS) ReleaseDir(in *fuse.ReleaseIn) {
	fs.mu.Lock()
	h := fs.handles[in.Fh]
	delete(fs.handles, in.Fh)
	if h == nil || h.dir == nil || h.dir.virt != 0 {
		fs.mu.Unlock()
		return
	}
	f := h.dir.f
	od := fs.dirs[f]
	release := false
	if od != nil {
		od.refs--
		if od.refs <= 0 {
			delete(fs.dirs, f)
			release = od.orphan
			if fs.closedInFlight(f, od.orphan) {
				release = false // the rmdir or rename in flight decides (orphans.go)
			} else if release && fs.opening[f] > 0 {
				fs.inherit[f] = true
				release = false
			}
		}
	}
	var released chan struct{}
	if release {
		released = make(chan struct{})
		fs.releasing[f] = released
	}
	fs.mu.Unlock()
	if release && fs.sess != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := fs.sess.ReleaseOrphans(ctx, []fid.FID{f}); err != nil {
			fs.log.Warn("release removed directory", "fid", f, "err", err)
		}
		cancel()
	}
	if release {
		fs.mu.Lock()
		delete(fs.releasing, f)
		fs.mu.Unlock()
		close(released)
	}
}

// FsyncDir makes the directory's changes durable: the MDT may answer a
// change before its log is synced (the durability contract), and fsync
// waits for the sync, as Lustre's MDS_SYNC does.
func (fs *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return fs.status("fsyncdir", fs.c.SyncMDTs(context.Background()))
}

// entries returns the entries after cookie, from the cached page when it
// covers them.
func (fs *FS) entries(ctx context.Context, d *dirHandle, cookie uint64, plus bool) ([]*pb.DirEntry, bool, error) {
	if d.page != nil && d.plus == plus {
		if d.after == cookie {
			return d.page, d.eof, nil
		}
		for i, e := range d.page {
			if e.Cookie == cookie {
				if i+1 < len(d.page) || d.eof {
					return d.page[i+1:], d.eof, nil
				}
				break
			}
		}
	}
	ents, eof, err := fs.c.Readdir(ctx, d.f, cookie, dirPage, plus)
	if err != nil {
		return nil, false, err
	}
	d.after, d.plus, d.page, d.eof = cookie, plus, ents, eof
	return ents, eof, nil
}

// ReadDir lists entries.
func (fs *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(in, out, false)
}

// ReadDirPlus lists entries with their attributes (each one a lookup).
func (fs *FS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return fs.readDir(in, out, true)
}

func (fs *FS) readDir(in *fuse.ReadIn, out *fuse.DirEntryList, plus bool) fuse.Status {
	h := fs.handle(in.Fh)
	if h == nil || h.dir == nil {
		return fuse.EBADF
	}
	d := h.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	off := in.Offset
	add := func(e fuse.DirEntry) (*fuse.EntryOut, bool) {
		if plus {
			eo := out.AddDirLookupEntry(e)
			return eo, eo != nil
		}
		return nil, out.AddDirEntry(e)
	}
	// "." carries the directory's inode number, and the root's ".." the
	// root's; another directory's parent is not at hand here (its linkEA
	// stays on the MDT), so its ".." goes out as unknown, which programs
	// resolve with a stat.
	var dot, dotdot uint64
	switch d.virt {
	case 0:
		dot = Ino(d.f)
		if d.f == fid.Root {
			dotdot = dot
		}
	case nacreID:
		dot, dotdot = nacreIno, Ino(fid.Root)
	case fidDirID:
		dot, dotdot = fidDirIno, nacreIno
	}
	if off == 0 {
		if _, ok := add(fuse.DirEntry{Name: ".", Mode: syscall.S_IFDIR, Ino: dot, Off: 1}); !ok {
			return fuse.OK
		}
	}
	if off <= 1 {
		if _, ok := add(fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Ino: dotdot, Off: 2}); !ok {
			return fuse.OK
		}
	}
	if d.virt != 0 {
		// .nacre lists fid (as Lustre's .lustre does) and, once the
		// checker made it, lost+found; fid/ lists nothing, though it
		// holds every FID.
		if d.virt == nacreID && off <= 2 {
			eo, ok := add(fuse.DirEntry{Name: fidDirName, Mode: syscall.S_IFDIR, Ino: fidDirIno, Off: 3})
			if !ok {
				return fuse.OK
			}
			if eo != nil {
				eo.NodeId = fidDirID
				eo.SetEntryTimeout(virtTimeout)
				eo.SetAttrTimeout(virtTimeout)
				virtAttr(fidDirID, &eo.Attr)
			}
		}
		if d.virt == nacreID && off <= 3 {
			ctx := fs.ctx(&in.InHeader)
			if ino, err := fs.attr(ctx, fid.LostFound); err == nil {
				if eo, ok := add(fuse.DirEntry{Name: lostFoundName, Mode: syscall.S_IFDIR, Ino: Ino(fid.LostFound), Off: 4}); ok && eo != nil {
					fs.fillEntry(ino, eo)
				}
			}
		}
		return fuse.OK
	}
	cookie := off
	if cookie <= 2 {
		cookie = 0
	}
	ctx := fs.ctx(&in.InHeader)
	for {
		ents, eof, err := fs.entries(ctx, d, cookie, plus)
		if errors.Is(err, syscall.ENOENT) {
			// The directory is gone (removed while open): it holds no
			// names, as a removed directory on a local file system.
			return fuse.OK
		}
		if err != nil {
			return fs.status("readdir", err)
		}
		for _, e := range ents {
			cookie = e.Cookie
			if d.f == fid.Root && string(e.Name) == nacreDirName {
				// The real .nacre stays hidden behind the virtual one:
				// handed to the kernel here it would take the virtual
				// one's place in its cache.
				continue
			}
			de := fuse.DirEntry{Name: string(e.Name), Mode: e.Type << 12, Ino: Ino(fid.FromPB(e.Fid)), Off: e.Cookie}
			eo, ok := add(de)
			if !ok {
				return fuse.OK
			}
			if eo != nil && e.Inode != nil {
				// As Lookup: the size must include this mount's own
				// writes, which write-behind may still be sending. The
				// kernel takes a readdirplus entry's size for the file's,
				// also for a file it holds open: an older one would move
				// SEEK_END and later writes back over the data.
				ino := e.Inode
				fs.fenceOwnWrites(fid.FromPB(ino.Fid))
				if err := fs.c.Glimpse(ctx, ino); err == nil {
					fs.ownSize(ino)
					fs.fillNamed(ino, eo, d.f, string(e.Name))
				}
			}
			cookie = e.Cookie
		}
		if eof || len(ents) == 0 {
			return fuse.OK
		}
	}
}
