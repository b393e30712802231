package client

import (
	"context"

	pb "nacre/api/nacrepb"
)

// Glimpse replaces the lazy size, blocks and mtime of a regular file whose
// size is marked dirty (someone is writing, or crashed while writing) by
// what its OST objects hold. Other inodes are left as they are.
func (c *Client) Glimpse(ctx context.Context, ino *pb.Inode) error {
	return c.glimpseIfDirty(ctx, ino)
}

// GlimpseAlways is Glimpse also for a file the MDT holds as clean: the size
// becomes the larger of the MDT's and the objects'. A client's close
// records the size and clears the dirty flag while another client may
// still be writing (its writes do not mark the file dirty again until it
// learns of that), so an appender taking over the file's end must ask the
// OSTs. The MDT's size stays when larger: a truncate that extended the
// file wrote nothing to the objects.
func (c *Client) GlimpseAlways(ctx context.Context, ino *pb.Inode) error {
	if ino.Layout == nil || len(ino.Layout.Objects) == 0 {
		return nil
	}
	g, err := c.glimpse(ctx, ino)
	if err != nil {
		return err
	}
	if g.size > ino.Size {
		ino.Size = g.size
	}
	ino.Blocks = max(ino.Blocks, g.blocks)
	mergeWriteTime(ino, g.mtime)
	return nil
}

// Refresh gives an open file fresh attributes (from a getattr at open).
// The size the file knows from its own writes is kept if larger.
func (f *File) Refresh(ino *pb.Inode) {
	f.mu.Lock()
	defer f.mu.Unlock()
	size := ino.Size
	if f.wrote && f.size > size && !f.changed {
		size = f.size
	}
	f.ino, f.size, f.changed = ino, size, false
	// If the MDT's size is exact again (another client closed the file),
	// the next write must mark it dirty again.
	if ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) == 0 {
		f.dirtySet = false
	}
}

// Unsynced reports whether the file has changes through it (writes, a
// truncate) that no Sync has made durable yet.
func (f *File) Unsynced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wrote || len(f.touched) > 0
}

// Wrote reports whether the file has writes not yet recorded by Close.
func (f *File) Wrote() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wrote
}

// OwnSize is the size the file knows from its own writes, and whether it
// has writes not yet recorded by Close (false once another client changed
// the file, until the size is fetched again).
func (f *File) OwnSize() (uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.size, f.wrote && !f.changed
}

// Changed notes that another client changed the file (it closed it after
// writing, or truncated it): the size this File knows from its own writes
// may be too large now (a truncate), so the next size fetched (Refresh,
// Size) is taken as it is; and the MDT's size may be exact again, so the
// next write marks it dirty again.
func (f *File) Changed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.changed = true
	f.dirtySet = false
}
