// Package ldlm is the MDS's lock manager for mounted clients, named after
// Lustre's distributed lock manager (of which it is a small part): BSD
// flock and POSIX byte-range locks that are coherent across clients
// (Lustre's `-o flock`), client sessions, append tokens
// (appendtoken.go), lookup locks on directories (lookuplock.go), and the
// fan-out of cache invalidations between clients.
//
// The Manager holds the locks of the files whose FIDs the MDS owns, in
// memory; it has no network code and no clock, so its rules are tested
// directly. Server (server.go) is the gRPC front end: the LDLM service of
// api/services.proto.
//
// # Rules
//
// Locks are kept per file and per kind: flock and POSIX locks do not
// conflict with each other (as on Linux). An owner is a (client, lock
// owner) pair; the lock owner is what the kernel passes with the request
// (the process's file table for POSIX locks, the open file for OFD and
// flock locks). Read locks share, a write lock excludes every other
// owner. A POSIX request replaces the owner's locks in its range: ranges
// of the same type merge, other types are split around it, F_UNLCK
// removes.
//
// A POSIX lock belongs to its process, whichever of the process's open
// files it was taken through, as on Linux and Lustre: a second descriptor
// of the process takes, converts, tests (F_GETLK) and unlocks the same
// locks, and close(2) of any descriptor releases them all. An OFD lock
// belongs to its open file, which the kernel passes as the owner. (The
// open file is not part of a POSIX lock's owner, though go-fuse's posixtest
// FcntlFlockLocksFile expects it: an unlock through another descriptor
// would then do nothing, and F_GETLK would report the process's own lock
// as a conflict.) A flock request first drops the owner's other flock lock, as
// Linux does (conversion is not atomic). A request that would wait on a
// chain of owners that ends at itself fails with EDEADLK (POSIX locks
// only). Nothing survives a restart of the MDS.
package ldlm

import (
	"context"
	"sync"
	"syscall"

	"nacre/internal/fid"
)

// Type is a lock type.
type Type uint8

// Lock types.
const (
	Unlock Type = iota
	Read
	Write
)

// MaxEnd is the end offset of a lock that runs to the end of the file
// (the kernel's OFFSET_MAX).
const MaxEnd = 1<<63 - 1

// Key names the locks of one kind on one file.
type Key struct {
	FID   fid.FID
	Flock bool
}

// Owner is a lock owner: a client and the owner id the kernel gives
// within it (the process's file table for POSIX locks, the open file for
// OFD and flock locks).
type Owner struct {
	Client uint64
	ID     uint64
}

// Lock is one granted lock.
type Lock struct {
	Owner  Owner
	Handle uint64 // the open file it was taken through
	Pid    uint32
	Type   Type
	Start  uint64
	End    uint64 // inclusive
}

// Request asks for a lock (Type Unlock releases the range).
type Request struct {
	Key
	Lock
	Wait   bool
	WaitID uint64 // names a waiting request for CancelWait
}

type waitKey struct{ client, id uint64 }

// waiter is a request blocked in Lock.
type waiter struct {
	req       *Request
	cancel    chan struct{}
	cancelled bool
}

type fileLocks struct {
	locks   []Lock
	changed chan struct{} // closed and replaced whenever locks go away
}

// Manager holds the locks. It is safe for concurrent use.
type Manager struct {
	mu      sync.Mutex
	files   map[Key]*fileLocks
	waiting map[Owner][]*waiter
	byWait  map[waitKey]*waiter
	// early holds cancellations that arrived before their request.
	early map[waitKey]bool
}

// NewManager returns an empty lock manager.
func NewManager() *Manager {
	return &Manager{files: map[Key]*fileLocks{}, waiting: map[Owner][]*waiter{}, byWait: map[waitKey]*waiter{}, early: map[waitKey]bool{}}
}

func overlaps(a Lock, start, end uint64) bool { return a.Start <= end && start <= a.End }

func conflicts(held Lock, r *Request) bool {
	return held.Owner != r.Owner && overlaps(held, r.Start, r.End) && (held.Type == Write || r.Type == Write)
}

func (m *Manager) file(k Key) *fileLocks {
	fl := m.files[k]
	if fl == nil {
		fl = &fileLocks{changed: make(chan struct{})}
		m.files[k] = fl
	}
	return fl
}

func (m *Manager) blockers(r *Request) []Lock {
	fl := m.files[r.Key]
	if fl == nil {
		return nil
	}
	var out []Lock
	for _, l := range fl.locks {
		if conflicts(l, r) {
			out = append(out, l)
		}
	}
	return out
}

// set applies a request that conflicts with nothing.
func (m *Manager) set(r *Request) {
	fl := m.file(r.Key)
	s, e := r.Start, r.End
	ns, ne := s, e
	out := fl.locks[:0:0]
	removed := false
	for _, l := range fl.locks {
		if l.Owner != r.Owner {
			out = append(out, l)
			continue
		}
		if r.Type != Unlock && l.Type == r.Type && (overlaps(l, s, e) || (l.End != MaxEnd && l.End+1 == s) || (e != MaxEnd && e+1 == l.Start)) {
			ns, ne = min(ns, l.Start), max(ne, l.End)
			continue
		}
		if !overlaps(l, s, e) {
			out = append(out, l)
			continue
		}
		removed = true
		if l.Start < s {
			left := l
			left.End = s - 1
			out = append(out, left)
		}
		if l.End > e {
			right := l
			right.Start = e + 1
			out = append(out, right)
		}
	}
	if r.Type != Unlock {
		nl := r.Lock
		nl.Start, nl.End = ns, ne
		out = append(out, nl)
	}
	if removed {
		m.wake(fl)
	}
	fl.locks = out
	m.gc(r.Key, fl)
}

func (m *Manager) wake(fl *fileLocks) {
	close(fl.changed)
	fl.changed = make(chan struct{})
}

func (m *Manager) gc(k Key, fl *fileLocks) {
	if len(fl.locks) == 0 {
		m.wake(fl)
		delete(m.files, k)
	}
}

// dropFlock removes the owner's flock lock (the first step of a flock
// request, as on Linux).
func (m *Manager) dropFlock(r *Request) {
	fl := m.files[r.Key]
	if fl == nil {
		return
	}
	for _, l := range fl.locks {
		if l.Owner == r.Owner && l.Type != r.Type {
			un := *r
			un.Type = Unlock
			m.set(&un)
			return
		}
	}
}

// deadlock reports whether r, blocked by blockers, waits on a chain of
// owners that leads back to r's owner.
func (m *Manager) deadlock(r *Request, blockers []Lock) bool {
	seen := map[Owner]bool{}
	stack := make([]Owner, 0, len(blockers))
	for _, b := range blockers {
		stack = append(stack, b.Owner)
	}
	for len(stack) > 0 && len(seen) < 4096 {
		o := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if o == r.Owner {
			return true
		}
		if seen[o] {
			continue
		}
		seen[o] = true
		for _, w := range m.waiting[o] {
			if w.req.Flock {
				continue
			}
			for _, b := range m.blockers(w.req) {
				stack = append(stack, b.Owner)
			}
		}
	}
	return false
}

// Lock grants, changes or releases a lock. Without Wait a conflict is
// EAGAIN; with Wait it blocks until granted, cancelled (EINTR: ctx done,
// CancelWait, or the client dropped) or deadlocked (EDEADLK).
func (m *Manager) Lock(ctx context.Context, r Request) syscall.Errno {
	if r.Start > r.End || r.End > MaxEnd || r.Type > Write {
		return syscall.EINVAL
	}
	if r.Flock {
		r.Start, r.End = 0, MaxEnd
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	wk := waitKey{r.Owner.Client, r.WaitID}
	if r.Wait && m.early[wk] {
		delete(m.early, wk)
		return syscall.EINTR
	}
	if r.Flock {
		m.dropFlock(&r)
	}
	var w *waiter
	defer func() {
		if w != nil {
			m.unwait(w, wk)
		}
	}()
	for {
		if r.Type == Unlock {
			m.set(&r)
			return 0
		}
		bl := m.blockers(&r)
		if len(bl) == 0 {
			m.set(&r)
			return 0
		}
		if !r.Wait {
			return syscall.EAGAIN
		}
		if !r.Flock && m.deadlock(&r, bl) {
			return syscall.EDEADLK
		}
		if w == nil {
			w = &waiter{req: &r, cancel: make(chan struct{})}
			m.waiting[r.Owner] = append(m.waiting[r.Owner], w)
			if r.WaitID != 0 {
				m.byWait[wk] = w
			}
		}
		ch := m.file(r.Key).changed
		m.mu.Unlock()
		select {
		case <-ch:
		case <-w.cancel:
		case <-ctx.Done():
		}
		m.mu.Lock()
		if w.cancelled || ctx.Err() != nil {
			return syscall.EINTR
		}
	}
}

func (m *Manager) unwait(w *waiter, wk waitKey) {
	ws := m.waiting[w.req.Owner]
	for i, x := range ws {
		if x == w {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(m.waiting, w.req.Owner)
	} else {
		m.waiting[w.req.Owner] = ws
	}
	if m.byWait[wk] == w {
		delete(m.byWait, wk)
	}
}

// Test returns the first lock that conflicts with r (F_GETLK).
func (m *Manager) Test(r Request) (Lock, bool) {
	if r.Flock {
		r.Start, r.End = 0, MaxEnd
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	bl := m.blockers(&r)
	if len(bl) == 0 {
		return Lock{}, false
	}
	return bl[0], true
}

// CancelWait cancels the client's waiting request waitID; a cancellation
// that arrives before its request cancels it on arrival.
func (m *Manager) CancelWait(client, waitID uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	wk := waitKey{client, waitID}
	if w := m.byWait[wk]; w != nil {
		if !w.cancelled {
			w.cancelled = true
			close(w.cancel)
		}
		return
	}
	if len(m.early) > 10000 {
		clear(m.early)
	}
	m.early[wk] = true
}

// Release drops, on one file, the client's POSIX locks of posixOwner, its
// flock locks of flockOwner and every lock taken through handle (zero
// selects nothing).
func (m *Manager) Release(client uint64, f fid.FID, posixOwner, flockOwner, handle uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, flock := range []bool{false, true} {
		k := Key{FID: f, Flock: flock}
		fl := m.files[k]
		if fl == nil {
			continue
		}
		out := fl.locks[:0:0]
		for _, l := range fl.locks {
			drop := l.Owner.Client == client && ((handle != 0 && l.Handle == handle) ||
				(!flock && posixOwner != 0 && l.Owner.ID == posixOwner) ||
				(flock && flockOwner != 0 && l.Owner.ID == flockOwner))
			if !drop {
				out = append(out, l)
			}
		}
		if len(out) != len(fl.locks) {
			fl.locks = out
			m.wake(fl)
			m.gc(k, fl)
		}
	}
}

// DropClient removes every lock of a client and cancels its waiting
// requests (its session is gone). It returns the number of locks dropped.
func (m *Manager) DropClient(client uint64) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for k, fl := range m.files {
		out := fl.locks[:0:0]
		for _, l := range fl.locks {
			if l.Owner.Client != client {
				out = append(out, l)
			}
		}
		if len(out) != len(fl.locks) {
			n += len(fl.locks) - len(out)
			fl.locks = out
			m.wake(fl)
			m.gc(k, fl)
		}
	}
	for o, ws := range m.waiting {
		if o.Client != client {
			continue
		}
		for _, w := range ws {
			if !w.cancelled {
				w.cancelled = true
				close(w.cancel)
			}
		}
	}
	return n
}

// Locks returns the locks held on a file (for tests and inspection).
func (m *Manager) Locks(k Key) []Lock {
	m.mu.Lock()
	defer m.mu.Unlock()
	if fl := m.files[k]; fl != nil {
		return append([]Lock(nil), fl.locks...)
	}
	return nil
}

// Count is the number of locks held on all files.
func (m *Manager) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, fl := range m.files {
		n += len(fl.locks)
	}
	return n
}
