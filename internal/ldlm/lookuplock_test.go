package ldlm

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

var (
	dirA = fid.FID{Seq: 0x200000400, Oid: 7}
	dirB = fid.FID{Seq: 0x200000400, Oid: 8}
)

func (c *tokenClient) lookupLock(t *testing.T, dir fid.FID) uint64 {
	t.Helper()
	r, err := c.ld.LookupLock(context.Background(), &pb.LookupLockRequest{ClientId: c.id, Fid: dir.PB()})
	if err != nil {
		t.Fatalf("client %d: lookup lock of %s: %v", c.id, dir, err)
	}
	return r.Grant
}

// revoked waits for a lookup lock revocation and returns its directories
// and sequence number.
func (c *tokenClient) revoked(t *testing.T) ([]fid.FID, uint64) {
	t.Helper()
	select {
	case d, ok := <-c.lookups:
		if !ok {
			t.Fatalf("client %d: the session ended instead", c.id)
		}
		var out []fid.FID
		for _, f := range d.RevokeLookup {
			out = append(out, fid.FromPB(f))
		}
		slices.SortFunc(out, func(a, b fid.FID) int { return int(a.Oid) - int(b.Oid) })
		return out, d.Seq
	case <-time.After(3 * time.Second):
		t.Fatalf("client %d was not asked to give its lookup locks back", c.id)
	}
	return nil, 0
}

func (c *tokenClient) notRevoked(t *testing.T) {
	t.Helper()
	select {
	case d := <-c.lookups:
		t.Fatalf("client %d was asked to give back %v", c.id, d.RevokeLookup)
	default:
	}
}

// revokeAsync runs RevokeLookups and reports when it returns.
func revokeAsync(s *Server, except uint64, dirs []fid.FID, all bool) chan struct{} {
	done := make(chan struct{})
	go func() {
		s.RevokeLookups(except, dirs, all)
		close(done)
	}()
	return done
}

func returned(ch chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// A change to a directory's names takes its lookup lock back from every
// holder but the changer, and is acknowledged only once each holder has
// acknowledged; other directories' locks stay. The checker's repairs take
// every lock back.
func TestLookupLockIsRevokedFromOtherHoldersBeforeTheChangeIsAcknowledged(t *testing.T) {
	s, addr := startTokenServer(t, 0)
	a, b := newTokenClient(t, addr, 1), newTokenClient(t, addr, 2)
	a.lookupLock(t, dirA)
	a.lookupLock(t, dirB)
	b.lookupLock(t, dirA)
	if n := s.LookupLocks(); n != 3 {
		t.Fatalf("%d lookup locks, want 3", n)
	}

	// b changes dirA: a is asked, b is not; the change waits for a.
	done := revokeAsync(s, b.id, []fid.FID{dirA}, false)
	dirs, seq := a.revoked(t)
	if !slices.Equal(dirs, []fid.FID{dirA}) {
		t.Fatalf("a was asked to give back %v, want only %s", dirs, dirA)
	}
	if returned(done, 200*time.Millisecond) {
		t.Fatal("the change was acknowledged before the holder gave its lock back")
	}
	if err := a.ack(seq); err != nil {
		t.Fatal(err)
	}
	if !returned(done, 3*time.Second) {
		t.Fatal("the change still waits after the holder acknowledged")
	}
	b.notRevoked(t)
	if n := s.LookupLocks(); n != 2 { // a's on dirB, b's on dirA
		t.Fatalf("%d lookup locks after the revocation, want 2", n)
	}
	if n := s.LookupRevocations(); n != 1 {
		t.Fatalf("%d revocations counted, want 1", n)
	}

	// A change to a directory nobody else holds waits for no one.
	if !returned(revokeAsync(s, a.id, []fid.FID{dirB}, false), time.Second) {
		t.Fatal("a change by the only holder waited")
	}
	a.notRevoked(t)

	// A repair takes every lock back, the changer's too (it has none).
	done = revokeAsync(s, 0, nil, true)
	dirs, seqA := a.revoked(t)
	if !slices.Equal(dirs, []fid.FID{dirB}) {
		t.Fatalf("a was asked to give back %v, want %s", dirs, dirB)
	}
	dirs, seqB := b.revoked(t)
	if !slices.Equal(dirs, []fid.FID{dirA}) {
		t.Fatalf("b was asked to give back %v, want %s", dirs, dirA)
	}
	a.ack(seqA)
	b.ack(seqB)
	if !returned(done, 3*time.Second) {
		t.Fatal("the repair still waits after both holders acknowledged")
	}
	if n := s.LookupLocks(); n != 0 {
		t.Fatalf("%d lookup locks after a repair, want 0", n)
	}
}

// A holder that does not acknowledge within revokeWait is evicted, and
// the change goes on; a session's end drops its client's locks; a release
// of a grant that a newer one overtook changes nothing.
func TestLookupLockHoldersThatDoNotAnswerAreEvicted(t *testing.T) {
	s, addr := startTokenServer(t, 0)
	a, b := newTokenClient(t, addr, 1), newTokenClient(t, addr, 2)
	a.lookupLock(t, dirA)
	start := time.Now()
	done := revokeAsync(s, b.id, []fid.FID{dirA}, false)
	a.revoked(t) // and never acknowledged
	if !returned(done, 5*time.Second) {
		t.Fatal("the change still waits for a holder that does not answer")
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("the change went on after %v, before the holder's time (%v) was up", waited, s.revokeWait)
	}
	for range a.lookups { // drains until the evicted session's stream ends
	}

	old := b.lookupLock(t, dirB)
	cur := b.lookupLock(t, dirB)
	b.ld.LookupLock(context.Background(), &pb.LookupLockRequest{ClientId: b.id, Fid: dirB.PB(), Release: true, Grant: old})
	if n := s.LookupLocks(); n != 1 {
		t.Fatalf("%d lookup locks after the release of an overtaken grant, want 1", n)
	}
	b.ld.LookupLock(context.Background(), &pb.LookupLockRequest{ClientId: b.id, Fid: dirB.PB(), Release: true, Grant: cur})
	if n := s.LookupLocks(); n != 0 {
		t.Fatalf("%d lookup locks after the release, want 0", n)
	}
	b.lookupLock(t, dirB)
	b.cancel()
	deadline := time.Now().Add(3 * time.Second)
	for s.LookupLocks() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the lookup locks of a client whose session ended were kept")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A client without a session gets no lookup lock (Unavailable: it
// retries once its session is back), so a lock is always voided by a
// session's end.
func TestLookupLockNeedsASession(t *testing.T) {
	_, addr := startTokenServer(t, 0)
	_, err := sessionless(t, addr).LookupLock(context.Background(), &pb.LookupLockRequest{ClientId: 9, Fid: dirA.PB()})
	if errno.CodeOf(err) != errno.Unavailable {
		t.Fatalf("LookupLock without a session: %v, want Unavailable", err)
	}
}

// A replicated MDT grants no lookup lock: a new leader could not know
// the locks its predecessor granted.
func TestLookupLockIsRefusedByAReplicatedMDT(t *testing.T) {
	s, addr := startTokenServer(t, 0)
	a := newTokenClient(t, addr, 1)
	a.lookupLock(t, dirA)
	var replicated atomic.Bool
	replicated.Store(true)
	s.SetReplicated(replicated.Load)
	_, err := a.ld.LookupLock(context.Background(), &pb.LookupLockRequest{ClientId: a.id, Fid: dirB.PB()})
	if errno.CodeOf(err) != errno.FailedPrecondition {
		t.Fatalf("LookupLock on a replicated MDT: %v, want FailedPrecondition", err)
	}
	replicated.Store(false)
	a.lookupLock(t, dirB)
}
