package ost

import (
	"container/list"
	"os"
	"sync"
	"sync/atomic"

	"nacre/internal/diskio"
	"nacre/internal/fid"
)

// fdCache keeps the data files of recently used objects open, so that a
// stream of 1 MiB chunks to one object does not reopen its file per chunk.
// Entries are reference counted: eviction and Destroy take an entry out of
// the cache at once, but its file is closed only when the last user lets
// go, so a file is never closed under a concurrent pread or pwrite.
type fdCache struct {
	mu  sync.Mutex
	max int
	m   map[fid.ObjID]*fdEntry
	lru list.List // of *fdEntry, most recent first
}

type fdEntry struct {
	obj  fid.ObjID
	f    *os.File
	elem *list.Element
	refs int  // guarded by fdCache.mu
	gone bool // out of the cache; close at the last release
	// hasPFID caches "the record has a PFID", so that writes through a
	// layout skip the record lookup once it is there.
	hasPFID atomic.Bool
	// synced caches "the record says the data file was synced"
	// (ObjectAttr.data_synced), so that each sync does not read it.
	synced atomic.Bool
	// dirty counts the pages written since the file's last sync.
	dirty *diskio.File
}

func newFDCache(max int) *fdCache {
	return &fdCache{max: max, m: make(map[fid.ObjID]*fdEntry)}
}

// get returns a referenced entry for obj, or nil.
func (c *fdCache) get(obj fid.ObjID) *fdEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[obj]
	if e == nil {
		return nil
	}
	e.refs++
	c.lru.MoveToFront(e.elem)
	return e
}

// add caches a newly opened file and returns it referenced. The caller
// holds obj's lock, so no other entry for obj can be added meanwhile.
func (c *fdCache) add(obj fid.ObjID, f *os.File, hasPFID, synced bool) *fdEntry {
	e := &fdEntry{obj: obj, f: f, refs: 1}
	e.hasPFID.Store(hasPFID)
	e.synced.Store(synced)
	var toClose []*os.File
	c.mu.Lock()
	if old := c.m[obj]; old != nil {
		toClose = c.removeLocked(old, toClose)
	}
	c.m[obj] = e
	e.elem = c.lru.PushFront(e)
	for c.lru.Len() > c.max {
		toClose = c.removeLocked(c.lru.Back().Value.(*fdEntry), toClose)
	}
	c.mu.Unlock()
	closeAll(toClose)
	return e
}

// release drops a reference taken by get or add.
func (c *fdCache) release(e *fdEntry) {
	c.mu.Lock()
	e.refs--
	last := e.refs == 0 && e.gone
	c.mu.Unlock()
	if last {
		e.f.Close()
	}
}

// drop takes obj's entry out of the cache (Destroy).
func (c *fdCache) drop(obj fid.ObjID) {
	c.mu.Lock()
	var toClose []*os.File
	if e := c.m[obj]; e != nil {
		toClose = c.removeLocked(e, nil)
	}
	c.mu.Unlock()
	closeAll(toClose)
}

// removeLocked takes e out of the map and list; its file is appended to
// toClose if nobody uses it.
func (c *fdCache) removeLocked(e *fdEntry, toClose []*os.File) []*os.File {
	delete(c.m, e.obj)
	c.lru.Remove(e.elem)
	e.gone = true
	if e.refs == 0 {
		toClose = append(toClose, e.f)
	}
	return toClose
}

// len is the number of cached entries.
func (c *fdCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// clear empties the cache (Close; no entry is in use then).
func (c *fdCache) clear() {
	c.mu.Lock()
	var toClose []*os.File
	for _, e := range c.m {
		toClose = c.removeLocked(e, toClose)
	}
	c.mu.Unlock()
	closeAll(toClose)
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}
