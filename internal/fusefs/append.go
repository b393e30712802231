package fusefs

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
)

// Appends.
//
// For an O_APPEND write the kernel takes the offset from the size it
// holds and, without writeback caching, never asks the file system for a
// fresh one first; nor can a FUSE file system push a size to the kernel
// (it can only invalidate). After another client changed the file that
// size is stale, and the append would overwrite the other client's
// records, or leave a hole after the file was emptied. So a handle opened
// with O_APPEND for writing is opened FOPEN_DIRECT_IO (the kernel keeps
// no pages of its writes, so the daemon may place the bytes), and the
// daemon puts each of its appends at the end of the file as this mount
// knows it:
//
//   - at open, the size fetched for the open (close-to-open);
//   - moved by this mount's own writes, in flight ones included, and
//     truncates;
//   - fetched again before the next append once another client announced
//     a change (Invalidate) or a lock on the file was granted here.
//
// Appends by the processes of one mount are serialised by the kernel
// (inode lock). Between mounts, appends under a lock (flock, fcntl) are
// therefore safe; unlocked appends from two clients at once are not
// serialised (docs/architecture.md §9).

// appendEnd is the end of an open file as this mount knows it.
type appendEnd struct {
	mu    sync.Mutex
	end   uint64
	stale bool // fetch the size before the next append
}

// endStale notes that the file may have changed elsewhere.
func (of *openFile) endStale() {
	of.ae.mu.Lock()
	of.ae.stale = true
	of.ae.mu.Unlock()
}

// grow notes a write of this mount that ends at end.
func (of *openFile) grow(end uint64) {
	of.ae.mu.Lock()
	of.ae.end = max(of.ae.end, end)
	of.ae.mu.Unlock()
}

// setEnd notes the file's size as just fetched or set (a truncate), or
// the end of a write of this mount still in flight if that is further.
func (of *openFile) setEnd(size uint64) {
	inFlight := of.wb.maxEnd()
	of.ae.mu.Lock()
	of.ae.end = max(size, inFlight)
	of.ae.stale = false
	of.ae.mu.Unlock()
}

// appending reports whether a write is an append the daemon places: one
// through a handle opened O_APPEND (so with FOPEN_DIRECT_IO) while the
// file is still in append mode (fcntl can clear it), and not the kernel
// writing back mmap'ed pages through that handle.
func (h *handle) appending(in *fuse.WriteIn) bool {
	return h.appendDirect && in.Flags&syscall.O_APPEND != 0 && in.WriteFlags&fuse.WRITE_CACHE == 0
}

// appendAt reserves n bytes at the file's end and returns their offset.
func (fs *FS) appendAt(ctx context.Context, of *openFile, n uint64) (uint64, error) {
	of.ae.mu.Lock()
	stale := of.ae.stale
	of.ae.mu.Unlock()
	if stale {
		ino, err := fs.attr(ctx, of.fid) // waits for this mount's writes first
		if err != nil {
			return 0, err
		}
		of.setEnd(ino.Size)
	}
	of.ae.mu.Lock()
	defer of.ae.mu.Unlock()
	off := of.ae.end
	of.ae.end += n
	return off, nil
}

// appendDirect reports whether open(2) flags call for a handle whose
// appends the daemon places.
func appendDirect(flags uint32) bool {
	return flags&syscall.O_APPEND != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY
}

// killSetID clears the set-user-ID bit, and the set-group-ID bit of a
// group-executable file, before a write through a direct handle by a
// caller without CAP_FSETID: for such writes the kernel leaves this to
// the file system (FUSE_WRITE_KILL_SUIDGID), where for cached ones it
// does it itself, with the same rule. "No such bits" is cached for the
// attribute timeout, so a stream of appends costs a getattr per timeout.
func (fs *FS) killSetID(ctx context.Context, n *node) error {
	fs.mu.Lock()
	skip := time.Now().Before(n.noSetIDUntil)
	fs.mu.Unlock()
	if skip {
		return nil
	}
	ino, err := fs.c.Getattr(ctx, n.fid)
	if err != nil {
		return err
	}
	mode := ino.Mode & 0o7777
	kill := mode & syscall.S_ISUID
	if mode&(syscall.S_ISGID|syscall.S_IXGRP) == syscall.S_ISGID|syscall.S_IXGRP {
		kill |= syscall.S_ISGID
	}
	if kill == 0 {
		fs.mu.Lock()
		n.noSetIDUntil = time.Now().Add(fs.o.AttrTimeout)
		fs.mu.Unlock()
		return nil
	}
	// The writer need not own the file: the clearing is done with root's
	// rights, as SetAttr does for the kernel's own clearing.
	_, err = fs.c.Setattr(client.WithCred(ctx, &pb.Cred{}), &pb.SetattrOp{Fid: n.fid.PB(),
		Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: mode &^ kill})
	fs.forgetAttrs(n.id)
	if fs.srv != nil {
		fs.srv.InodeNotify(n.id, -1, 0) // the kernel's mode is stale (attributes only)
	}
	return err
}
