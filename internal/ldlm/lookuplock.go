package ldlm

import (
	"context"
	"sync"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

// Lookup locks.
//
// Creating a file through the kernel costs two requests: a lookup that
// finds the name missing, then the create. A client that knows all of a
// directory's names can answer the first itself, but only while no other
// client changes them. Lustre's clients hold a LOOKUP lock on the
// directory for that; CephFS's hold shared capabilities on a directory
// they cached whole. Here the MDS grants a lookup lock per directory to
// any number of clients, and takes it back (SessionDown.revoke_lookup)
// from every holder but the changer before it acknowledges a change to
// the directory's names: the change is applied first, so a client granted
// a lock after that reads the change when it lists the directory, and a
// holder learns of it before the changer does. A holder that does not
// acknowledge within revokeWait is evicted. The checker's repairs and
// injected damage revoke every lock.
//
// Locks live in the server's memory, like append tokens: a session's end
// voids its client's locks on both sides, and a restarted MDS, having no
// predecessor whose sessions could still be open, starts with none. Only a
// single-replica MDT grants them. A new leader of a replicated MDT would
// know nothing of the locks its predecessor granted, and the predecessor
// ends its sessions only once it notices that it no longer leads, up to
// about a second later: covering that window would hold every namespace
// change back for as long after each leader change. So a replicated MDT
// refuses lookup locks (FailedPrecondition), and an MDT that becomes
// replicated revokes every lock it granted (the MDS calls RevokeLookups).

// lookupHolders maps a client to its grant on one directory.
type lookupHolders map[uint64]uint64

// SetReplicated tells the server how to learn whether its MDT has other
// replicas (then it grants no lookup lock). nil, the default, means a
// single replica.
func (s *Server) SetReplicated(f func() bool) {
	s.mu.Lock()
	s.replicated = f
	s.mu.Unlock()
}

// LookupLock grants, or with release gives back, a directory's lookup lock.
func (s *Server) LookupLock(ctx context.Context, r *pb.LookupLockRequest) (*pb.LookupLockReply, error) {
	if !s.leading() {
		return nil, errNotLeader
	}
	if r.ClientId == 0 || r.Fid == nil {
		return nil, errno.New(errno.InvalidArgument, "lookup lock request without a client id or a directory")
	}
	f := fid.FromPB(r.Fid)
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Release {
		if h := s.lookups[f]; h != nil && h[r.ClientId] == r.Grant {
			s.dropLookup(f, h, r.ClientId)
		}
		return &pb.LookupLockReply{}, nil
	}
	if s.sessions[r.ClientId] == nil {
		// Unavailable: the client retries once its session is back.
		return nil, errno.New(errno.Unavailable, "no session of this client: lookup locks are held within a session")
	}
	if s.replicated != nil && s.replicated() {
		return nil, errno.New(errno.FailedPrecondition, "a replicated MDT grants no lookup locks")
	}
	h := s.lookups[f]
	if h == nil {
		h = lookupHolders{}
		s.lookups[f] = h
	}
	if _, held := h[r.ClientId]; !held {
		s.lookupCount++
	}
	s.grantSeq++
	h[r.ClientId] = s.grantSeq
	return &pb.LookupLockReply{Grant: s.grantSeq}, nil
}

// dropLookup removes client's lock on f (s.mu held).
func (s *Server) dropLookup(f fid.FID, h lookupHolders, client uint64) {
	delete(h, client)
	s.lookupCount--
	if len(h) == 0 {
		delete(s.lookups, f)
	}
}

// LookupRevocations counts the lookup locks taken back from a holder.
func (s *Server) LookupRevocations() uint64 { return s.lookupRevs.Load() }

// LookupLocks is the number of lookup locks granted and not revoked.
func (s *Server) LookupLocks() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lookupCount
}

// RevokeLookups takes back the lookup locks on dirs (on every directory,
// with all) from every client but except, and returns once each holder
// has acknowledged, its session has ended, or it was evicted for not
// answering within revokeWait. The caller has applied the change already.
// It does not give up when ctx ends: a changer that stops waiting may
// retry and find its change in the reply cache, which revokes nothing.
func (s *Server) RevokeLookups(except uint64, dirs []fid.FID, all bool) {
	s.mu.Lock()
	if len(s.lookups) == 0 {
		s.mu.Unlock()
		return
	}
	var byClient map[uint64][]*pb.FID // allocated for the first holder: most changes find only the changer's lock
	take := func(f fid.FID, h lookupHolders) {
		for c := range h {
			if c != except {
				if byClient == nil {
					byClient = map[uint64][]*pb.FID{}
				}
				byClient[c] = append(byClient[c], f.PB())
				s.dropLookup(f, h, c)
				s.lookupRevs.Add(1)
			}
		}
	}
	if all {
		for f, h := range s.lookups {
			take(f, h)
		}
	} else {
		for _, f := range dirs {
			if h := s.lookups[f]; h != nil {
				take(f, h)
			}
		}
	}
	if byClient == nil {
		s.mu.Unlock()
		return
	}
	holders := make(map[*session][]*pb.FID, len(byClient))
	for c, fids := range byClient {
		if ss := s.sessions[c]; ss != nil {
			holders[ss] = fids
		}
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for ss, fids := range holders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.revokeLookupsOf(ss, fids)
		}()
	}
	wg.Wait()
}

// revokeLookupsOf sends one holder its revocation and waits for it to be
// acknowledged (or the session to end).
func (s *Server) revokeLookupsOf(ss *session, fids []*pb.FID) {
	ch, err := ss.send(&pb.SessionDown{RevokeLookup: fids})
	if err != nil {
		ch = nil // the stream is broken: its session ends (below, or by itself)
	}
	timer := time.NewTimer(s.revokeWait)
	defer timer.Stop()
	select {
	case <-ch:
	case <-ss.done: // a session's end voids its locks
	case <-timer.C:
		s.log.Warn("client did not give back a lookup lock in time; ending its session", "client", ss.client, "name", ss.name, "dirs", len(fids), "waited", s.revokeWait)
		ss.evict()
		<-ss.done
	}
}

// dropLookups removes the lookup locks of a client whose session ended
// (s.mu held).
func (s *Server) dropLookups(client uint64) int {
	n := 0
	for f, h := range s.lookups {
		if _, ok := h[client]; ok {
			s.dropLookup(f, h, client)
			n++
		}
	}
	return n
}
