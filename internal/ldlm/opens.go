package ldlm

import (
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

// Open files of clients, as their sessions report them (the leader's
// memory only, like locks). The MDS keeps a file removed through one
// client while another has it open (internal/mds/open.go); it asks here.
//
// A client's opens outlive its session for a grace period, as its
// orphans do: a client cut off for a moment, or reconnecting to a new
// leader, still has its files open. A new leader knows no opens at all
// until the clients' new sessions report them: the MDS treats every
// removal in a new leadership's first moments as if others had files
// open (internal/mds/shared.go).

// NoteOpens records what client opened (first open on the client) and
// closed (last close); with replace, opened is all it had open when its
// current session began. The client needs a session here (else
// Unavailable: the session is being opened, retry).
//
// A replace drops only the opens noted under an earlier session: the
// client sends its list once the session is registered, and an open
// noted in the same session may have come first (a file opened as the
// session began, which the list, made before, lacks). Dropping it made
// the MDS destroy a file removed elsewhere while it was open there.
func (s *Server) NoteOpens(client uint64, opened, closed []fid.FID, replace bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[client]
	if ss == nil {
		return errno.New(errno.Unavailable, "no session of this client here yet: open files are recorded with the session")
	}
	set := s.opens[client]
	if set == nil {
		set = map[fid.FID]*session{}
		s.opens[client] = set
	}
	if replace {
		for f, by := range set {
			if by != ss {
				delete(set, f)
			}
		}
	}
	for _, f := range opened {
		set[f] = ss
	}
	for _, f := range closed {
		delete(set, f)
	}
	if len(set) == 0 {
		delete(s.opens, client)
	}
	return nil
}

// counts reports whether client's opens still count (with s.mu held):
// it has a session, or lost it less than grace ago.
func (s *Server) counts(client uint64, grace time.Duration) bool {
	if s.sessions[client] != nil {
		return true
	}
	t, ok := s.gone[client]
	if !ok || time.Since(t) >= grace {
		delete(s.opens, client)
		return false
	}
	return true
}

// OpenElsewhere reports whether a client other than client has files
// open (a client's opens count for grace after its session ended).
func (s *Server) OpenElsewhere(client uint64, grace time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, set := range s.opens {
		if c != client && len(set) > 0 && s.counts(c, grace) {
			return true
		}
	}
	return false
}

// AskClose asks every client but except that the MDS counts as having f
// open to tell its close now if it holds f closed already (a close it
// batches): another client removed f, whose space is freed once no
// client has it open. Nothing waits for the answer.
func (s *Server) AskClose(f fid.FID, except uint64) {
	s.mu.Lock()
	var to []*session
	for c, set := range s.opens {
		if c == except || set[f] == nil {
			continue
		}
		if ss := s.sessions[c]; ss != nil {
			to = append(to, ss)
		}
	}
	s.mu.Unlock()
	for _, ss := range to {
		go ss.send(&pb.SessionDown{AskClose: []*pb.FID{f.PB()}})
	}
}

// HeldOpen reports whether a client other than except (0: any) has f
// open.
func (s *Server) HeldOpen(f fid.FID, except uint64, grace time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, set := range s.opens {
		if c != except && set[f] != nil && s.counts(c, grace) {
			return true
		}
	}
	return false
}
