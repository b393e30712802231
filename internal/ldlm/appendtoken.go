package ldlm

import (
	"context"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

// Append tokens.
//
// An O_APPEND write goes at the end of the file, and between clients that
// end is only known to one that excludes the others while it appends:
// Lustre takes a PW extent lock to the end of the file for each append
// and caches it on the client. Here the MDS grants an append token per
// file, which one client holds at a time and keeps, so a lone appender
// pays one RPC per open file and none per append. When another client
// asks, the MDS revokes the token through the holder's session; the holder
// lets no new append start, waits until its appends under way reached the
// OSTs, and acknowledges, and only then is the token granted to the next
// client, which fetches the file's end afresh. A holder that does not
// answer within revokeWait is evicted (its session ends, which voids its
// tokens on both sides). Tokens live in the leader's memory: a session's
// end drops its client's tokens, and a new leader (or a restarted MDS)
// starts with none. It grants none for tokenGrace after it took over: a
// client that held a token from the old leader has by then seen its
// session end, and waits for its appends under way before it opens a new
// one (internal/client, Handlers.SessionLost), so the next holder does not
// fetch an end that those appends are still moving.

// revokeWait bounds how long a holder may take to give a token back: its
// appends under way must reach the OSTs first.
const revokeWait = SessionTimeout

// tokenGrace is how long a new leader waits before it grants tokens. An
// old leader ends its sessions within a fraction of a second of losing
// leadership, and a killed one at once.
const tokenGrace = 2 * time.Second

type token struct {
	client uint64
	grant  uint64
	// revoking is closed when the revocation under way ends.
	revoking chan struct{}
}

// AppendToken grants, or with release gives back, a file's append token.
func (s *Server) AppendToken(ctx context.Context, r *pb.AppendTokenRequest) (*pb.AppendTokenReply, error) {
	if !s.leading() {
		return nil, errNotLeader
	}
	if r.ClientId == 0 || r.Fid == nil {
		return nil, errno.New(errno.InvalidArgument, "append token request without a client id or a file")
	}
	f := fid.FromPB(r.Fid)
	if !r.Release {
		if wait := s.tokenGrace - time.Since(s.leaderSince()); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, errno.From(ctx.Err())
			}
			if !s.leading() {
				return nil, errNotLeader
			}
		}
	}
	if r.Release {
		s.mu.Lock()
		if t := s.tokens[f]; t != nil && t.client == r.ClientId && t.grant == r.Grant && t.revoking == nil {
			delete(s.tokens, f)
		}
		s.mu.Unlock()
		return &pb.AppendTokenReply{}, nil
	}
	for {
		s.mu.Lock()
		if s.sessions[r.ClientId] == nil {
			s.mu.Unlock()
			// Unavailable: the client retries once its session is back.
			return nil, errno.New(errno.Unavailable, "no session of this client: append tokens are held within a session")
		}
		t := s.tokens[f]
		if t == nil || (t.client == r.ClientId && t.revoking == nil) {
			s.grantSeq++
			s.tokens[f] = &token{client: r.ClientId, grant: s.grantSeq}
			g := s.grantSeq
			s.mu.Unlock()
			return &pb.AppendTokenReply{Grant: g}, nil
		}
		if t.revoking == nil {
			t.revoking = make(chan struct{})
			go s.revoke(f, t)
		}
		ch := t.revoking
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, errno.From(ctx.Err())
		}
	}
}

// revoke takes t back from its holder and removes it.
func (s *Server) revoke(f fid.FID, t *token) {
	s.mu.Lock()
	ss := s.sessions[t.client]
	s.mu.Unlock()
	if ss != nil {
		ch, err := ss.send(&pb.SessionDown{RevokeAppend: []*pb.FID{f.PB()}})
		timer := time.NewTimer(s.revokeWait)
		if err != nil {
			ch = nil // the stream is broken: its session ends (below, or by itself)
		}
		select {
		case <-ch:
		case <-ss.done: // a session's end voids its tokens
		case <-timer.C:
			s.log.Warn("client did not give back an append token in time; ending its session", "client", t.client, "name", ss.name, "fid", f, "waited", s.revokeWait)
			ss.evict()
			<-ss.done
		}
		timer.Stop()
	}
	s.mu.Lock()
	if s.tokens[f] == t {
		delete(s.tokens, f)
	}
	close(t.revoking)
	s.mu.Unlock()
}

// dropTokens removes the tokens of a client whose session ended (s.mu
// held); revocations under way remove theirs.
func (s *Server) dropTokens(client uint64) int {
	n := 0
	for f, t := range s.tokens {
		if t.client == client && t.revoking == nil {
			delete(s.tokens, f)
			n++
		}
	}
	return n
}
