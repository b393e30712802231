package mdt

import (
	"encoding/binary"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// The caches below mirror replicated state in memory so that the hot path
// (a create reads its parent, checks the reply cache and the client's
// acknowledgement watermark) does not pay an LSM lookup for each. They are
// written through by apply and rebuilt from the store at open, so every
// replica has the same contents; they never decide anything the store
// would not.
//
// Every write of an object key must go through txn.put or txn.destroy
// (or call invalidate), or the inode cache goes stale.

// inodeCacheSize bounds the inode cache (entries).
const inodeCacheSize = 1 << 16

type cachedInode struct {
	local uint64
	ino   *pb.Inode // never handed out: callers get a clone
}

// caches are guarded by Target.mu (apply writes with the lock held; the
// read side takes it shared).
type caches struct {
	inodes  map[fid.FID]cachedInode
	replies map[uint64]map[uint64]struct{} // client -> request ids in the reply cache
	acks    map[uint64]uint64              // client -> acknowledgement watermark
}

func newCaches() caches {
	return caches{inodes: map[fid.FID]cachedInode{}, replies: map[uint64]map[uint64]struct{}{}, acks: map[uint64]uint64{}}
}

// loadReplyIndex rebuilds the reply index and watermarks from the store.
func (t *Target) loadReplyIndex() error {
	t.c.replies = map[uint64]map[uint64]struct{}{}
	t.c.acks = map[uint64]uint64{}
	lo := []byte{pfxReply}
	it, err := t.db.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 17 {
			continue
		}
		t.noteReply(binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:]))
	}
	if err := it.Close(); err != nil {
		return err
	}
	return nil
}

func (t *Target) noteReply(client, req uint64) {
	m := t.c.replies[client]
	if m == nil {
		m = map[uint64]struct{}{}
		t.c.replies[client] = m
	}
	m[req] = struct{}{}
}

func (t *Target) hasReply(client, req uint64) bool {
	_, ok := t.c.replies[client][req]
	return ok
}

func (t *Target) cacheInode(local uint64, ino *pb.Inode) {
	if len(t.c.inodes) >= inodeCacheSize {
		// Random eviction (map order): cheap, and hot directories come back.
		n := 0
		for k := range t.c.inodes {
			delete(t.c.inodes, k)
			if n++; n >= inodeCacheSize/16 {
				break
			}
		}
	}
	t.c.inodes[fid.FromPB(ino.Fid)] = cachedInode{local: local, ino: ino}
}

func (t *Target) uncacheInode(f fid.FID) { delete(t.c.inodes, f) }

// cachedGet returns a clone of a cached inode.
func (t *Target) cachedGet(f fid.FID) (uint64, *pb.Inode, bool) {
	e, ok := t.c.inodes[f]
	if !ok {
		return 0, nil, false
	}
	return e.local, cloneInode(e.ino), true
}

// Invalidate drops everything cached (after the store was changed behind
// the state machine's back: a restored snapshot, an offline repair).
func (t *Target) invalidate() {
	t.c = newCaches()
}
