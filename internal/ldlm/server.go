package ldlm

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

// Session timing: a client sends something at least every PingInterval;
// a session silent for SessionTimeout is ended (the client is evicted).
const (
	PingInterval   = 5 * time.Second
	SessionTimeout = 4 * PingInterval
	// invalidateWait bounds how long Invalidate waits for other clients.
	invalidateWait = 2 * time.Second
)

// Server is the LDLM gRPC service: sessions, locks and invalidations.
type Server struct {
	nacregrpc.UnimplementedLDLMServer
	M   *Manager
	log *slog.Logger

	// leading reports whether this MDS leads its MDT: locks and sessions
	// live on the leader only, and end when it stops leading.
	leading     func() bool
	leaderSince func() time.Time

	mu       sync.Mutex
	sessions map[uint64]*session
	gone     map[uint64]time.Time
	started  time.Time
	tokens   map[fid.FID]*token              // append tokens (appendtoken.go)
	opens    map[uint64]map[fid.FID]*session // open files by client, with the session that noted each (opens.go)
	grantSeq uint64
	// lookups holds the lookup locks (lookuplock.go), lookupCount how
	// many; replicated reports whether the MDT has other replicas.
	lookups     map[fid.FID]lookupHolders
	lookupCount int
	lookupRevs  atomic.Uint64
	replicated  func() bool
	// revokeWait and tokenGrace (appendtoken.go), shorter in tests.
	revokeWait, tokenGrace time.Duration
}

var errNotLeader = errno.New(errno.Unavailable, "not the MDT's leader: locks and sessions are served by the leader")

type session struct {
	client uint64
	name   string
	stream nacregrpc.LDLM_SessionServer

	sendMu sync.Mutex
	mu     sync.Mutex
	seq    uint64
	acks   map[uint64]chan struct{}
	done   chan struct{}
	// kick ends the session from the server's side (evict).
	kick     chan struct{}
	kickOnce sync.Once
}

// evict ends the session: the client's locks and tokens go, and the
// client learns it when its stream ends.
func (ss *session) evict() { ss.kickOnce.Do(func() { close(ss.kick) }) }

// NewServer returns the service over a new lock manager; leading (nil:
// always) tells whether this server may serve locks, and leaderSince (nil:
// since the server started) since when.
func NewServer(log *slog.Logger, leading func() bool, leaderSince func() time.Time) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if leading == nil {
		leading = func() bool { return true }
	}
	started := time.Now()
	if leaderSince == nil {
		leaderSince = func() time.Time { return started }
	}
	return &Server{M: NewManager(), log: log, leading: leading, leaderSince: leaderSince, tokenGrace: tokenGrace, lookups: map[fid.FID]lookupHolders{}, sessions: map[uint64]*session{}, gone: map[uint64]time.Time{}, started: started, tokens: map[fid.FID]*token{}, opens: map[uint64]map[fid.FID]*session{}, revokeWait: revokeWait}
}

// ClientGone reports whether the client has no session, and since when
// (its last session's end, or the server's start if it never had one).
func (s *Server) ClientGone(client uint64) (bool, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sessions[client] != nil {
		return false, time.Time{}
	}
	if t, ok := s.gone[client]; ok {
		return true, t
	}
	return true, s.started
}

// Sessions is the number of connected clients.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

// Session serves one client's session stream.
func (s *Server) Session(stream nacregrpc.LDLM_SessionServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if first.ClientId == 0 {
		return errno.New(errno.InvalidArgument, "session without a client id")
	}
	if !s.leading() {
		return errNotLeader
	}
	ss := &session{client: first.ClientId, name: first.Name, stream: stream, acks: map[uint64]chan struct{}{}, done: make(chan struct{}), kick: make(chan struct{})}
	s.mu.Lock()
	old := s.sessions[ss.client]
	s.sessions[ss.client] = ss
	delete(s.gone, ss.client)
	s.mu.Unlock()
	ss.sendMu.Lock()
	err = stream.Send(&pb.SessionDown{}) // welcome: registered
	ss.sendMu.Unlock()
	if err != nil {
		s.endSession(ss, err)
		return err
	}
	if old != nil {
		s.log.Info("client session replaced", "client", ss.client, "name", ss.name)
	} else {
		s.log.Info("client session started", "client", ss.client, "name", ss.name)
	}
	msgs := make(chan *pb.SessionUp)
	errc := make(chan error, 1)
	go func() {
		for {
			m, err := stream.Recv()
			if err != nil {
				errc <- err
				return
			}
			select {
			case msgs <- m:
			case <-ss.done:
				return
			}
		}
	}()
	timer := time.NewTimer(SessionTimeout)
	defer timer.Stop()
	lead := time.NewTicker(time.Second)
	defer lead.Stop()
	var endErr error
loop:
	for {
		select {
		case <-lead.C:
			if !s.leading() {
				endErr = errNotLeader
				break loop
			}
		case m := <-msgs:
			timer.Reset(SessionTimeout)
			if m.Ack != 0 {
				ss.mu.Lock()
				if ch := ss.acks[m.Ack]; ch != nil {
					close(ch)
					delete(ss.acks, m.Ack)
				}
				ss.mu.Unlock()
			}
		case err := <-errc:
			endErr = err
			break loop
		case <-timer.C:
			endErr = errno.New(errno.DeadlineExceeded, "session silent too long")
			break loop
		case <-ss.kick:
			endErr = errno.New(errno.Aborted, "evicted: an append token or a lookup lock was not given back in time")
			break loop
		case <-stream.Context().Done():
			break loop
		}
	}
	s.endSession(ss, endErr)
	return nil
}

func (s *Server) endSession(ss *session, why error) {
	close(ss.done)
	s.mu.Lock()
	current := s.sessions[ss.client] == ss
	tokens, lookups := 0, 0
	if current {
		delete(s.sessions, ss.client)
		s.gone[ss.client] = time.Now()
		tokens = s.dropTokens(ss.client)
		lookups = s.dropLookups(ss.client)
	}
	s.mu.Unlock()
	if current {
		n := s.M.DropClient(ss.client)
		s.log.Info("client session ended; its locks dropped", "client", ss.client, "name", ss.name, "locks", n, "append_tokens", tokens, "lookup_locks", lookups, "reason", why)
	}
}

// notify sends an invalidation and returns a channel closed on its ack.
func (ss *session) notify(fids []*pb.FID) (chan struct{}, error) {
	return ss.send(&pb.SessionDown{Invalidate: fids})
}

// send sends d with the next sequence number and returns a channel closed
// on its ack.
func (ss *session) send(d *pb.SessionDown) (chan struct{}, error) {
	ss.mu.Lock()
	ss.seq++
	seq := ss.seq
	ch := make(chan struct{})
	ss.acks[seq] = ch
	ss.mu.Unlock()
	d.Seq = seq
	ss.sendMu.Lock()
	err := ss.stream.Send(d)
	ss.sendMu.Unlock()
	return ch, err
}

func lockType(t pb.LockType) Type {
	switch t {
	case pb.LockType_LOCK_READ:
		return Read
	case pb.LockType_LOCK_WRITE:
		return Write
	}
	return Unlock
}

func pbType(t Type) pb.LockType {
	switch t {
	case Read:
		return pb.LockType_LOCK_READ
	case Write:
		return pb.LockType_LOCK_WRITE
	}
	return pb.LockType_LOCK_UNLOCK
}

func request(r *pb.LockRequest) Request {
	o := Owner{Client: r.ClientId, ID: r.Owner}
	return Request{
		Key: Key{FID: fid.FromPB(r.Fid), Flock: r.Flock},
		Lock: Lock{Owner: o, Handle: r.Handle, Pid: r.Pid,
			Type: lockType(r.Type), Start: r.Start, End: r.End},
		Wait: r.Wait, WaitID: r.WaitId,
	}
}

// Lock serves F_SETLK, F_SETLKW and flock(2).
func (s *Server) Lock(ctx context.Context, r *pb.LockRequest) (*pb.LockReply, error) {
	if r.ClientId == 0 || r.Fid == nil {
		return &pb.LockReply{Errno: int32(syscall.EINVAL)}, nil
	}
	if !s.leading() {
		return nil, errNotLeader
	}
	if r.Wait {
		s.mu.Lock()
		live := s.sessions[r.ClientId] != nil
		s.mu.Unlock()
		if !live {
			// A client must hold a session to wait: otherwise nothing
			// would cancel its requests if it went away.
			return nil, errno.New(errno.FailedPrecondition, "no session for this client; cannot wait for a lock")
		}
	}
	e := s.M.Lock(ctx, request(r))
	return &pb.LockReply{Errno: int32(e)}, nil
}

// GetLock serves F_GETLK.
func (s *Server) GetLock(ctx context.Context, r *pb.LockRequest) (*pb.LockReply, error) {
	if r.Fid == nil {
		return &pb.LockReply{Errno: int32(syscall.EINVAL)}, nil
	}
	if !s.leading() {
		return nil, errNotLeader
	}
	l, found := s.M.Test(request(r))
	if !found {
		return &pb.LockReply{Type: pb.LockType_LOCK_UNLOCK}, nil
	}
	return &pb.LockReply{Type: pbType(l.Type), Start: l.Start, End: l.End, Pid: l.Pid}, nil
}

// CancelWait cancels a waiting Lock.
func (s *Server) CancelWait(ctx context.Context, r *pb.CancelWaitRequest) (*pb.CancelWaitReply, error) {
	s.M.CancelWait(r.ClientId, r.WaitId)
	return &pb.CancelWaitReply{}, nil
}

// ReleaseLocks drops the locks a close releases.
func (s *Server) ReleaseLocks(ctx context.Context, r *pb.ReleaseLocksRequest) (*pb.ReleaseLocksReply, error) {
	if r.Fid != nil {
		s.M.Release(r.ClientId, fid.FromPB(r.Fid), r.PosixOwner, r.FlockOwner, r.Handle)
	}
	return &pb.ReleaseLocksReply{}, nil
}

// Invalidate fans an invalidation out to every other session and waits
// up to two seconds for their acknowledgements.
func (s *Server) Invalidate(ctx context.Context, r *pb.InvalidateRequest) (*pb.InvalidateReply, error) {
	if !s.leading() {
		return nil, errNotLeader
	}
	s.mu.Lock()
	var others []*session
	for c, ss := range s.sessions {
		if c != r.ClientId {
			others = append(others, ss)
		}
	}
	s.mu.Unlock()
	out := &pb.InvalidateReply{}
	if len(others) == 0 || len(r.Fids) == 0 {
		return out, nil
	}
	wctx, cancel := context.WithTimeout(ctx, invalidateWait)
	defer cancel()
	acked := make(chan bool, len(others))
	for _, ss := range others {
		go func(ss *session) {
			ch, err := ss.notify(r.Fids)
			if err != nil {
				acked <- false
				return
			}
			select {
			case <-ch:
				acked <- true
			case <-ss.done:
				acked <- false
			case <-wctx.Done():
				acked <- false
			}
		}(ss)
	}
	for range others {
		select {
		case ok := <-acked:
			if ok {
				out.Notified++
			} else {
				out.Late++
			}
		case <-wctx.Done():
			if ctx.Err() != nil {
				return nil, errno.From(ctx.Err())
			}
			out.Late = uint32(len(others)) - out.Notified
			return out, nil
		}
	}
	return out, nil
}
