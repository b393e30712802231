package fusefs

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
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
// (inode lock). Between mounts, the MDS's append token (api/lock.proto,
// internal/ldlm/appendtoken.go) makes one mount at a time the file's
// appender: a mount takes it before its first append to an open file and
// keeps it until another mount asks for it; it then lets no new append
// start, lets the appends under way reach the OSTs, and gives it back.
// Whoever gets the token next fetches the file's end afresh, so records
// appended by clients at once neither overlap nor leave holes.

// appendEnd is the end of an open file as this mount knows it.
type appendEnd struct {
	mu    sync.Mutex
	end   uint64
	stale bool // fetch the size before the next append
	// The append token: held when tok, in the session epoch tokEpoch,
	// under grant (for its release). revokes counts revocations, so that
	// a grant overtaken by its own revocation is not taken as held.
	tok      bool
	tokEpoch uint64
	grant    uint64
	revokes  uint64
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
		// fs.attr, but always asking the OSTs (GlimpseAlways), once.
		fs.fenceOwnWrites(of.fid)
		ino, err := fs.c.Getattr(ctx, of.fid)
		if err != nil {
			return 0, err
		}
		if err := fs.c.GlimpseAlways(ctx, ino); err != nil {
			return 0, err
		}
		fs.ownSize(ino)
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

// capFSETID reports whether the caller of a request has CAP_FSETID, from
// its process's effective capabilities (by its user id if they cannot be
// read: the process is gone).
func capFSETID(h *fuse.InHeader) bool {
	if h.Pid != 0 {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", h.Pid)); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
					caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
					if err == nil {
						return caps&(1<<unix.CAP_FSETID) != 0
					}
				}
			}
		}
	}
	return h.Uid == 0
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
	return fs.clearSetID(ctx, n, ino.Mode)
}

// clearSetID clears, by the kernel's rule, the set-ID bits of n, whose
// mode is as just fetched.
func (fs *FS) clearSetID(ctx context.Context, n *node, mode uint32) error {
	mode &= 0o7777
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
	_, err := fs.c.Setattr(client.WithCred(ctx, &pb.Cred{}), &pb.SetattrOp{Fid: n.fid.PB(),
		Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: mode &^ kill})
	fs.forgetAttrs(n.id)
	if fs.srv != nil {
		fs.srv.InodeNotify(n.id, -1, 0) // the kernel's mode is stale (attributes only)
	}
	return err
}

// holdAppendToken returns once this mount holds of's append token, with
// of.appending held shared so that a revocation waits for the append;
// done releases it after the append's write is queued.
func (fs *FS) holdAppendToken(ctx context.Context, of *openFile) (done func(), err error) {
	if fs.sess == nil {
		return func() {}, nil
	}
	for {
		of.appending.RLock()
		of.ae.mu.Lock()
		held := of.ae.tok && fs.sess.LockValid(of.fid, of.ae.tokEpoch)
		revokes := of.ae.revokes
		of.ae.mu.Unlock()
		if held {
			return of.appending.RUnlock, nil
		}
		of.appending.RUnlock()
		// Findable by a revocation before the grant can arrive, which may
		// be revoked again before its reply is read here.
		fs.mu.Lock()
		if !slices.Contains(fs.tokens[of.fid], of) {
			fs.tokens[of.fid] = append(fs.tokens[of.fid], of)
		}
		fs.mu.Unlock()
		grant, epoch, err := fs.sess.AppendToken(ctx, of.fid)
		if err != nil {
			return nil, err
		}
		of.ae.mu.Lock()
		if of.ae.revokes == revokes {
			// Another mount may have appended since this one last did.
			of.ae.tok, of.ae.tokEpoch, of.ae.grant, of.ae.stale = true, epoch, grant, true
		}
		of.ae.mu.Unlock()
	}
}

// RevokeAppend gives back the append tokens of fids (the MDS asks, for
// another mount): no new append starts, the appends under way are queued
// and reach the OSTs, and then the session acknowledges.
func (fs *FS) RevokeAppend(fids []fid.FID) {
	for _, f := range fids {
		fs.mu.Lock()
		ofs := slices.Clone(fs.tokens[f]) // none: closed and flushed
		fs.mu.Unlock()
		giveBack(ofs)
	}
}

// AppendTokensLost is called when a session with an MDT ended, before a
// new one opens: the tokens it held are void, and the appends under way
// with them reach the OSTs before this mount can be heard again (a new
// leader grants no token to anyone until then; ldlm's tokenGrace). All
// files are treated alike: which MDT owns a file does not matter here.
func (fs *FS) AppendTokensLost(uint32) {
	fs.mu.Lock()
	var ofs []*openFile
	for _, l := range fs.tokens {
		ofs = append(ofs, l...)
	}
	fs.mu.Unlock()
	giveBack(ofs)
}

// giveBack ends the tokens of ofs: no new append starts under them, and
// the appends under way are queued and written.
func giveBack(ofs []*openFile) {
	for _, of := range ofs {
		of.ae.mu.Lock()
		of.ae.tok = false
		of.ae.revokes++
		of.ae.mu.Unlock()
	}
	for _, of := range ofs {
		of.appending.Lock() // the appends that held the token are queued
		of.appending.Unlock()
		of.wb.fence() // and written
	}
}

// releaseAppendToken gives back the token an open file holds, at its last
// close, once its data is flushed (best effort: the MDS drops a client's
// tokens when its session ends).
func (fs *FS) releaseAppendToken(of *openFile) {
	of.ae.mu.Lock()
	held, grant := of.ae.tok, of.ae.grant
	of.ae.tok = false
	of.ae.mu.Unlock()
	fs.mu.Lock()
	if l := slices.DeleteFunc(fs.tokens[of.fid], func(o *openFile) bool { return o == of }); len(l) > 0 {
		fs.tokens[of.fid] = l
	} else {
		delete(fs.tokens, of.fid)
	}
	fs.mu.Unlock()
	if !held || fs.sess == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := fs.sess.ReleaseAppendToken(ctx, of.fid, grant); err != nil {
		fs.log.Debug("give back an append token", "fid", of.fid, "err", err)
	}
}
