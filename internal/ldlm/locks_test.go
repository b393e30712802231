package ldlm

import (
	"context"
	"math/rand"
	"syscall"
	"testing"
	"testing/synctest"

	"nacre/internal/fid"
)

var f1 = fid.FID{Seq: 0x200000400, Oid: 7}

func posix(client, owner uint64, t Type, start, end uint64) Request {
	return Request{Key: Key{FID: f1}, Lock: Lock{Owner: Owner{Client: client, ID: owner}, Handle: 1, Type: t, Start: start, End: end}}
}

func flock(client, owner uint64, t Type) Request {
	return Request{Key: Key{FID: f1, Flock: true}, Lock: Lock{Owner: Owner{Client: client, ID: owner}, Handle: owner, Type: t}}
}

func mustLock(t *testing.T, m *Manager, r Request) {
	t.Helper()
	if e := m.Lock(context.Background(), r); e != 0 {
		t.Fatalf("lock %+v: %v", r, e)
	}
}

func TestReadLocksShareWriteLocksExclude(t *testing.T) {
	m := NewManager()
	mustLock(t, m, posix(1, 1, Read, 0, 99))
	mustLock(t, m, posix(2, 1, Read, 50, 150))
	if e := m.Lock(context.Background(), posix(3, 1, Write, 90, 95)); e != syscall.EAGAIN {
		t.Fatalf("write over read locks: %v, want EAGAIN", e)
	}
	mustLock(t, m, posix(3, 1, Write, 151, 200))
	if l, ok := m.Test(posix(4, 1, Read, 160, 160)); !ok || l.Owner.Client != 3 || l.Type != Write {
		t.Fatalf("GETLK: %+v %v", l, ok)
	}
}

func TestSameOwnerReplacesSplitsAndMerges(t *testing.T) {
	m := NewManager()
	mustLock(t, m, posix(1, 1, Write, 0, MaxEnd))
	mustLock(t, m, posix(1, 1, Read, 100, 199)) // split the write lock
	ls := m.Locks(Key{FID: f1})
	if len(ls) != 3 {
		t.Fatalf("after split: %+v", ls)
	}
	// Another owner can now read inside the read range only.
	mustLock(t, m, posix(2, 1, Read, 120, 130))
	if e := m.Lock(context.Background(), posix(2, 1, Read, 99, 100)); e != syscall.EAGAIN {
		t.Fatalf("read over write part: %v", e)
	}
	mustLock(t, m, posix(1, 1, Unlock, 0, MaxEnd))
	mustLock(t, m, posix(2, 1, Unlock, 0, MaxEnd))
	if n := m.Count(); n != 0 {
		t.Fatalf("%d locks left", n)
	}
	// Adjacent ranges of one type merge.
	mustLock(t, m, posix(1, 1, Write, 0, 9))
	mustLock(t, m, posix(1, 1, Write, 10, 19))
	mustLock(t, m, posix(1, 1, Write, 30, 39))
	mustLock(t, m, posix(1, 1, Write, 15, 35))
	if ls := m.Locks(Key{FID: f1}); len(ls) != 1 || ls[0].Start != 0 || ls[0].End != 39 {
		t.Fatalf("merge: %+v", ls)
	}
}

func TestFlockAndPosixAreIndependent(t *testing.T) {
	m := NewManager()
	mustLock(t, m, flock(1, 1, Write))
	mustLock(t, m, posix(2, 1, Write, 0, MaxEnd))
	if e := m.Lock(context.Background(), flock(2, 2, Read)); e != syscall.EAGAIN {
		t.Fatalf("flock read under flock write: %v", e)
	}
}

func TestSetLkwWaitsUntilReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewManager()
		mustLock(t, m, posix(1, 1, Write, 0, 10))
		w := posix(2, 1, Write, 5, 5)
		w.Wait = true
		done := make(chan syscall.Errno)
		go func() { done <- m.Lock(context.Background(), w) }()
		synctest.Wait() // the waiter is queued and blocked
		select {
		case e := <-done:
			t.Fatalf("granted while held: %v", e)
		default:
		}
		m.Release(1, f1, 1, 0, 0) // close(2) by the holder
		if e := <-done; e != 0 {
			t.Fatalf("after release: %v", e)
		}
	})
}

func TestCancelWaitInterruptsAndEarlyCancelToo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewManager()
		mustLock(t, m, flock(1, 1, Write))
		w := flock(2, 2, Write)
		w.Wait, w.WaitID = true, 7
		done := make(chan syscall.Errno)
		go func() { done <- m.Lock(context.Background(), w) }()
		synctest.Wait() // the waiter is queued
		m.CancelWait(2, 7)
		if e := <-done; e != syscall.EINTR {
			t.Fatalf("cancelled wait: %v", e)
		}
		// A cancellation that overtakes its request.
		m.CancelWait(2, 8)
		w.WaitID = 8
		if e := m.Lock(context.Background(), w); e != syscall.EINTR {
			t.Fatalf("early cancel: %v", e)
		}
	})
}

func TestDropClientReleasesLocksAndWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewManager()
		mustLock(t, m, posix(1, 1, Write, 0, MaxEnd))
		w := posix(1, 2, Write, 0, 0)
		w.Wait = true
		done := make(chan syscall.Errno)
		go func() { done <- m.Lock(context.Background(), w) }()
		synctest.Wait() // the waiter is queued
		if n := m.DropClient(1); n != 1 {
			t.Fatalf("dropped %d", n)
		}
		if e := <-done; e != syscall.EINTR {
			t.Fatalf("waiter of a dropped client: %v", e)
		}
		mustLock(t, m, posix(2, 1, Write, 0, MaxEnd))
	})
}

func TestDeadlockIsDetected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewManager()
		mustLock(t, m, posix(1, 1, Write, 0, 0))
		mustLock(t, m, posix(2, 1, Write, 1, 1))
		a := posix(1, 1, Write, 1, 1)
		a.Wait = true
		done := make(chan syscall.Errno)
		go func() { done <- m.Lock(context.Background(), a) }()
		synctest.Wait() // a is queued behind 2's lock
		b := posix(2, 1, Write, 0, 0)
		b.Wait = true
		if e := m.Lock(context.Background(), b); e != syscall.EDEADLK {
			t.Fatalf("cycle: %v, want EDEADLK", e)
		}
		m.DropClient(2)
		if e := <-done; e != 0 {
			t.Fatalf("first waiter: %v", e)
		}
	})
}

// TestOpenFilesOfOneProcessShareItsLocks: a POSIX lock is the process's,
// whichever open file it came through (as on Linux): another descriptor
// converts it, does not see it as a conflict, and unlocks it.
func TestOpenFilesOfOneProcessShareItsLocks(t *testing.T) {
	m := NewManager()
	a := posix(1, 1, Write, 0, 9)
	b := posix(1, 1, Read, 0, 9)
	b.Handle = 2
	mustLock(t, m, a)
	if _, found := m.Test(b); found {
		t.Fatal("F_GETLK through a second open file of the process reports its own lock")
	}
	mustLock(t, m, b) // a conversion, not a conflict
	other := posix(1, 2, Write, 0, 9)
	if e := m.Lock(context.Background(), other); e != syscall.EAGAIN {
		t.Fatalf("another process over the read lock: %v, want EAGAIN", e)
	}
	un := posix(1, 1, Unlock, 0, 9)
	un.Handle = 3 // through a third descriptor
	mustLock(t, m, un)
	if n := m.Count(); n != 0 {
		t.Fatalf("%d locks left after the process unlocked through another descriptor", n)
	}
	mustLock(t, m, other)
}

// TestRandomAgainstModel compares non-waiting requests of a few owners
// with a byte-level model of who holds what.
func TestRandomAgainstModel(t *testing.T) {
	const size = 64
	r := rand.New(rand.NewSource(1))
	m := NewManager()
	type cell struct{ readers, writer map[int]bool }
	model := make([]cell, size)
	for i := range model {
		model[i] = cell{map[int]bool{}, map[int]bool{}}
	}
	for step := 0; step < 20000; step++ {
		o := r.Intn(4)
		s := uint64(r.Intn(size))
		e := s + uint64(r.Intn(size-int(s)))
		typ := Type(r.Intn(3))
		req := posix(uint64(o+1), 1, typ, s, e)
		conflict := false
		for i := s; i <= e && typ != Unlock; i++ {
			for w := range model[i].writer {
				if w != o {
					conflict = true
				}
			}
			if typ == Write {
				for rd := range model[i].readers {
					if rd != o {
						conflict = true
					}
				}
			}
		}
		got := m.Lock(context.Background(), req)
		if conflict != (got == syscall.EAGAIN) {
			t.Fatalf("step %d: owner %d %v [%d,%d]: got %v, model conflict %v", step, o, typ, s, e, got, conflict)
		}
		if got != 0 {
			continue
		}
		for i := s; i <= e; i++ {
			delete(model[i].readers, o)
			delete(model[i].writer, o)
			switch typ {
			case Read:
				model[i].readers[o] = true
			case Write:
				model[i].writer[o] = true
			}
		}
		// Locks of one owner never overlap.
		ls := m.Locks(Key{FID: f1})
		for i := range ls {
			for j := i + 1; j < len(ls); j++ {
				if ls[i].Owner == ls[j].Owner && overlaps(ls[i], ls[j].Start, ls[j].End) {
					t.Fatalf("step %d: overlapping locks of one owner: %+v %+v", step, ls[i], ls[j])
				}
			}
		}
	}
}
