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
