package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
	"nacre/internal/mdrpc"
)

// Session is what a mounted client holds with the MDSs beyond single
// requests (api/lock.proto): a session stream per MDT that keeps its
// locks and open-unlinked files alive and brings cache invalidations from
// other clients, file locks served by the MDS, and the namespace commands
// of open files. A client's locks are dropped when its session ends
// (Close, process exit, network cut longer than ldlm.SessionTimeout).
type Session struct {
	c    *Client
	name string
	h    SessionHandlers

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	mdts map[uint32]*sessMDT

	waitSeq atomic.Uint64
}

type sessMDT struct {
	index uint32
	addr  string
	cc    *grpc.ClientConn
	ldlm  nacregrpc.LDLMClient
	open  nacregrpc.OpenFilesClient
	up    chan struct{} // closed once the first session stream is open
	once  sync.Once
	// epoch changes whenever a session stream is registered or ends: an
	// append token is valid only in the epoch it was granted in.
	epoch atomic.Uint64
}

// welcomeWait bounds how long a session stream waits to be registered by
// the MDT it was opened with.
const welcomeWait = 10 * time.Second

// sessionProbeEvery is how often a session with a replicated MDT asks its
// replica whether it is alive (watch): cheap, and it bounds how long a
// silent leader holds the session.
const sessionProbeEvery = 2 * time.Second

// pingInterval matches ldlm.PingInterval (the server ends a session that
// is silent for four of them).
const pingInterval = 5 * time.Second

// SessionHandlers are what a session calls on the client's behalf; each
// may be nil.
type SessionHandlers struct {
	// Invalidate is called with the files another client changed (the
	// caches of them must go) before the change is acknowledged.
	Invalidate func([]fid.FID)
	// RevokeAppend is called with the files whose append tokens the MDS
	// takes back (AppendToken) before that is acknowledged.
	RevokeAppend func([]fid.FID)
	// RevokeLookup is called with the directories whose lookup locks the
	// MDS takes back (LookupLock) before that is acknowledged.
	RevokeLookup func([]fid.FID)
	// AskClose is called with files another client removed while this
	// one had them open (SessionDown.ask_close); it must not block.
	AskClose func([]fid.FID)
	// SessionLost is called when a session stream with an MDT ended, and
	// returns before a new one is opened: every append token of that
	// session is void, and the appends under way with them must reach the
	// OSTs before a new leader may hand the tokens to another client.
	SessionLost func(mdt uint32)
	// OpenFIDs lists the files the client has open, for a new session to
	// tell its MDT (a new leader knows none; see Opened).
	OpenFIDs func() []fid.FID
}

// StartSession opens the client's session with every MDT.
func (c *Client) StartSession(ctx context.Context, name string, h SessionHandlers) (*Session, error) {
	// The name is for the servers' logs and travels in a protobuf string,
	// which must be UTF-8; a mount point need not be.
	name = strings.ToValidUTF8(name, "\uFFFD")
	s := &Session{c: c, name: name, h: h, mdts: map[uint32]*sessMDT{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	cfg, err := c.Config(ctx)
	if err != nil {
		return nil, err
	}
	for _, ti := range sortTargets(cfg.Targets) {
		if ti.Kind != pb.TargetKind_TARGET_MDT || s.mdts[ti.Index] != nil {
			continue
		}
		m, err := s.dial(ti.Index, ti.Addr)
		if err != nil {
			s.Close()
			return nil, err
		}
		s.wg.Add(1)
		go s.run(m)
	}
	if len(s.mdts) == 0 {
		return nil, fmt.Errorf("no MDT in the configuration of %s", c.Fsname())
	}
	// Wait (briefly) for the sessions, so that the first lock works.
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	for _, m := range s.mdts {
		select {
		case <-m.up:
		case <-t.C:
			c.log.Warn("session with an MDT not open yet; continuing", "mdt", m.index)
		case <-ctx.Done():
			s.Close()
			return nil, ctx.Err()
		}
	}
	return s, nil
}

func (s *Session) dial(index uint32, addr string) (*sessMDT, error) {
	cc, err := grpcx.Dial(addr, grpcx.WithTLS(s.c.cfg.TLS))
	if err != nil {
		return nil, err
	}
	m := &sessMDT{index: index, addr: addr, cc: cc, ldlm: nacregrpc.NewLDLMClient(cc), open: nacregrpc.NewOpenFilesClient(cc), up: make(chan struct{})}
	s.mu.Lock()
	s.mdts[index] = m
	s.mu.Unlock()
	return m, nil
}

// Close ends the sessions: the MDSs drop this client's locks.
func (s *Session) Close() error {
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range s.mdts {
		m.cc.Close()
	}
	return nil
}

// run keeps one MDT's session stream open until Close.
func (s *Session) run(m *sessMDT) {
	defer s.wg.Done()
	backoff := 100 * time.Millisecond
	for s.ctx.Err() == nil {
		start := time.Now()
		err := s.stream(m)
		if s.h.SessionLost != nil {
			s.h.SessionLost(m.index)
		}
		if s.ctx.Err() != nil {
			return
		}
		if time.Since(start) > 10*time.Second {
			backoff = 100 * time.Millisecond
		}
		s.c.log.Warn("session with MDT ended; reconnecting", "mdt", m.index, "err", err)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		// Short pauses: after a leader change the new leader is usually
		// there within a second or two, and locks wait for the session.
		backoff = min(2*backoff, 500*time.Millisecond)
		s.redial(m)
	}
}

// redial follows an MDT that moved (a new leader).
func (s *Session) redial(m *sessMDT) {
	// A replicated MDT: the leader the client's requests found is the
	// freshest news (replicas.go); the MGS's is a heartbeat old.
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	// Ask the replicas which one leads, for up to 3 s (an election takes
	// one to two): the MGS's view may still name a leader that died, and
	// a session opened towards a dead address waits for it.
	for deadline := time.Now().Add(3 * time.Second); ; {
		if a := s.c.probeLeader(ctx, m.index); a != "" {
			s.follow(m, a)
			return
		}
		if time.Now().After(deadline) || !s.c.replicated(m.index) {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
	cfg, err := s.c.Config(ctx)
	if err != nil {
		return
	}
	for _, ti := range sortTargets(cfg.Targets) {
		if ti.Kind == pb.TargetKind_TARGET_MDT && ti.Index == m.index && ti.Addr != m.addr && ti.State == "up" {
			cc, err := grpcx.Dial(ti.Addr, grpcx.WithTLS(s.c.cfg.TLS))
			if err != nil {
				return
			}
			s.mu.Lock()
			m.cc.Close()
			m.addr, m.cc, m.ldlm, m.open = ti.Addr, cc, nacregrpc.NewLDLMClient(cc), nacregrpc.NewOpenFilesClient(cc)
			s.mu.Unlock()
			return
		}
	}
}

// follow moves the session with one MDT to the replica at addr (its
// leader); the old connection's stream ends, and run opens a new one.
func (s *Session) follow(m *sessMDT, addr string) {
	s.mu.Lock()
	same := addr == "" || addr == m.addr
	s.mu.Unlock()
	if same {
		return
	}
	cc, err := grpcx.Dial(addr, grpcx.WithTLS(s.c.cfg.TLS))
	if err != nil {
		return
	}
	s.mu.Lock()
	old := m.cc
	m.addr, m.cc, m.ldlm, m.open = addr, cc, nacregrpc.NewLDLMClient(cc), nacregrpc.NewOpenFilesClient(cc)
	s.mu.Unlock()
	old.Close()
}

func (s *Session) stream(m *sessMDT) error {
	cctx, cancelCause := context.WithCancelCause(s.ctx)
	ctx, cancel := cctx, func() { cancelCause(nil) }
	defer cancel()
	s.mu.Lock()
	cli, addr := m.ldlm, m.addr
	s.mu.Unlock()
	if s.c.replicated(m.index) {
		// A leader that stops answering without closing the stream (a
		// paused process) kept the session, and the locks and open
		// files with it, for as long as it was silent: the session
		// moves on (run asks the replicas which one leads now) once
		// another replica leads. Only then: a session that ends drops
		// the client's locks, and a replica slow to answer on a loaded
		// machine must not cost them.
		leadsElsewhere := func() bool {
			l := s.c.probeLeader(ctx, m.index)
			return l != "" && l != addr
		}
		go watch(ctx, addr, s.c.cfg.TLS, ctx.Done(), cancelCause, sessionProbeEvery, sessionProbeEvery, leadsElsewhere)
	}
	// A session not welcomed within welcomeWait is given up, and run
	// asks again which replica leads: the address may be a replica that
	// died or left the group (the MGS still lists it), whose connection
	// never becomes ready, and the mount then had no session, so every
	// open failed, for as long as it ran.
	giveUp := time.AfterFunc(welcomeWait, cancel)
	defer giveUp.Stop()
	st, err := cli.Session(ctx, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	defer m.epoch.Add(1) // the tokens of this stream's session are void
	var sendMu sync.Mutex
	send := func(u *pb.SessionUp) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		return st.Send(u)
	}
	if err := send(&pb.SessionUp{ClientId: s.c.id, Name: s.name}); err != nil {
		return err
	}
	go func() {
		t := time.NewTicker(pingInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if send(&pb.SessionUp{}) != nil {
					cancel()
					return
				}
			}
		}
	}()
	for {
		d, err := st.Recv()
		if err != nil {
			return err
		}
		if d.Seq == 0 {
			// The server's welcome: the session is registered.
			giveUp.Stop()
			m.epoch.Add(1)
			m.once.Do(func() { close(m.up) })
			go s.replayOpens(ctx, m)
			continue
		}
		if len(d.Invalidate) > 0 && s.h.Invalidate != nil {
			fids := make([]fid.FID, len(d.Invalidate))
			for i, f := range d.Invalidate {
				fids[i] = fid.FromPB(f)
			}
			s.h.Invalidate(fids)
		}
		if len(d.RevokeAppend) > 0 {
			fids := make([]fid.FID, len(d.RevokeAppend))
			for i, f := range d.RevokeAppend {
				fids[i] = fid.FromPB(f)
			}
			if s.h.RevokeAppend != nil {
				s.h.RevokeAppend(fids)
			}
		}
		if len(d.RevokeLookup) > 0 && s.h.RevokeLookup != nil {
			fids := make([]fid.FID, len(d.RevokeLookup))
			for i, f := range d.RevokeLookup {
				fids[i] = fid.FromPB(f)
			}
			s.h.RevokeLookup(fids)
		}
		if len(d.AskClose) > 0 && s.h.AskClose != nil {
			fids := make([]fid.FID, len(d.AskClose))
			for i, f := range d.AskClose {
				fids[i] = fid.FromPB(f)
			}
			s.h.AskClose(fids)
		}
		if err := send(&pb.SessionUp{Ack: d.Seq}); err != nil {
			return err
		}
	}
}

// mdt returns the session's connection to the MDT that owns f.
func (s *Session) mdt(f fid.FID) (*sessMDT, error) {
	mc, err := s.c.mdtFor(f)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.mdts[mc.index]
	if m == nil {
		return nil, fmt.Errorf("no session with MDT%04x", mc.index)
	}
	return m, nil
}

func (s *Session) clients(f fid.FID) (nacregrpc.LDLMClient, nacregrpc.OpenFilesClient, error) {
	m, err := s.mdt(f)
	if err != nil {
		return nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return m.ldlm, m.open, nil
}

// mutate is Client.mutate through the OpenFiles service.
func (s *Session) mutate(ctx context.Context, what string, f fid.FID, cmd *pb.Command) (*pb.Reply, error) {
	c := s.c
	id, ack := c.beginReq()
	defer c.endReq(id)
	cmd.ClientId, cmd.RequestId, cmd.AckedBelow, cmd.Cred = c.id, id, ack, c.cred(ctx)
	var rep *pb.Reply
	err := c.retry(ctx, what, f, func(ctx context.Context) error {
		m, err := s.mdt(f)
		if err != nil {
			return err
		}
		s.mu.Lock()
		open, addr := m.open, m.addr
		s.mu.Unlock()
		err = s.watchedIfReplicated(ctx, m.index, addr, func(ctx context.Context) (err error) {
			rep, err = open.Mutate(ctx, cmd)
			return err
		})
		if errno.Retryable(err) {
			// The replica does not lead, or is gone: move the session
			// (locks, open files) to the leader before retrying. The
			// replicas say which one leads; a hint in the error may name
			// a leader that has just died.
			if m, merr := s.mdt(f); merr == nil {
				s.follow(m, c.probeLeader(ctx, m.index))
			}
		}
		return err
	})
	if err != nil {
		return nil, c.mdtError(what, f, err)
	}
	if rep.Errno != 0 {
		return rep, errno.NewErrno(what, rep.Errno, rep.Message)
	}
	return rep, nil
}

// watchedIfReplicated runs a call over the session's connection to a
// replica at addr, given up on if that replica stops answering (watched:
// a paused leader held unlinks and renames through a mount for as long
// as it was paused), when the MDT has other replicas to go to.
func (s *Session) watchedIfReplicated(ctx context.Context, mdt uint32, addr string, f func(context.Context) error) error {
	if !s.c.replicated(mdt) {
		return f(ctx)
	}
	err := watched(ctx, addr, s.c.cfg.TLS, f)
	if errors.Is(err, errSilent) {
		return errno.Errorf(errno.Unavailable, "MDT%04x replica at %s: %v; trying another", mdt, addr, err)
	}
	return err
}

func pbFIDs(fs []fid.FID) []*pb.FID {
	out := make([]*pb.FID, len(fs))
	for i, f := range fs {
		out[i] = f.PB()
	}
	return out
}

// Unlink removes a name (dir: an empty directory, as rmdir); if it was
// the last name of one of open (files and directories this client has
// open), the object is kept as an orphan until ReleaseOrphans. The result
// is the object's state after the removal.
func (s *Session) Unlink(ctx context.Context, parent fid.FID, name string, dir bool, open []fid.FID) (*pb.Inode, error) {
	what := "unlink "
	if dir {
		what = "rmdir "
	}
	rep, err := s.mutate(ctx, what+name, parent, &pb.Command{Op: &pb.Command_OpenUnlink{OpenUnlink: &pb.OpenUnlinkOp{
		Unlink: &pb.UnlinkOp{Parent: parent.PB(), Name: []byte(name), Dir: dir}, Open: pbFIDs(open)}}})
	if err != nil {
		return nil, err
	}
	return rep.Inode, nil
}

// Rename is Client.Rename keeping a replaced file that is one of open as
// an orphan.
func (s *Session) Rename(ctx context.Context, sp fid.FID, sn string, dp fid.FID, dn string, flags uint32, open []fid.FID) (*pb.Inode, error) {
	rep, err := s.mutate(ctx, "rename "+sn+" to "+dn, sp, &pb.Command{Op: &pb.Command_OpenRename{OpenRename: &pb.OpenRenameOp{
		Rename: &pb.RenameOp{SrcParent: sp.PB(), SrcName: []byte(sn), DstParent: dp.PB(), DstName: []byte(dn), Flags: flags}, Open: pbFIDs(open)}}})
	if err != nil {
		return nil, err
	}
	return rep.Inode, nil
}

// Tmpfile makes a regular file in no directory (O_TMPFILE), an orphan of
// this client until it is linked somewhere or released.
func (s *Session) Tmpfile(ctx context.Context, parent fid.FID, mode, umask uint32, l *pb.Layout) (*pb.Inode, error) {
	rep, err := s.mutate(ctx, "tmpfile", parent, &pb.Command{Op: &pb.Command_Tmpfile{Tmpfile: &pb.TmpfileOp{
		Parent: parent.PB(), Mode: mode, Umask: umask, Layout: l}}})
	if err != nil {
		return nil, err
	}
	return rep.Inode, nil
}

// Opened tells the MDT of f that this client opened f (its first open
// here), so that f is kept if another client removes its last name while
// it is open here (until Closed). It returns f's attributes as of then,
// or ENOENT if f is gone: a removal under way when f was opened came
// first. Against an MDS that does not know opens it returns (nil, nil).
func (s *Session) Opened(ctx context.Context, f fid.FID) (*pb.Inode, error) {
	c := s.c
	rep, err := s.opens(ctx, "open", f, &pb.OpensRequest{ClientId: c.id, Opened: []*pb.FID{f.PB()}})
	if errno.CodeOf(err) == errno.Unimplemented {
		return nil, nil
	}
	if err != nil {
		return nil, c.mdtError("open", f, err)
	}
	if len(rep.Inodes) != 1 || rep.Inodes[0].GetFid() == nil {
		return nil, errno.NewErrno("open "+f.String(), int32(syscall.ENOENT), "removed")
	}
	return rep.Inodes[0], nil
}

// Closed tells the MDT of f that this client closed f for the last time.
// A failure is only logged: the MDT keeps a removed file longer than it
// needs to, until the session's next list of open files.
func (s *Session) Closed(ctx context.Context, fids []fid.FID) {
	// One request per MDT: each keeps the opens of its own files.
	for _, list := range s.c.byMDT(fids) {
		_, err := s.opens(ctx, "close", list[0], &pb.OpensRequest{ClientId: s.c.id, Closed: pbFIDs(list)})
		if err != nil && errno.CodeOf(err) != errno.Unimplemented && s.ctx.Err() == nil {
			s.c.log.Warn("tell the MDT files are closed", "files", len(list), "err", err)
		}
	}
}

// byMDT splits fids by the MDT that holds them, in the order of their
// first FIDs. A FID no MDT is known for goes with MDT0's: the request
// fails there for it, and says so.
func (c *Client) byMDT(fids []fid.FID) [][]fid.FID {
	var out [][]fid.FID
	at := map[uint32]int{}
	for _, f := range fids {
		idx, err := c.MDTOf(f)
		if err != nil {
			idx = 0
		}
		i, ok := at[idx]
		if !ok {
			i = len(out)
			at[idx] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], f)
	}
	return out
}

// opens calls Opens on the leader of f's MDT: over the framed RPC of the
// client's requests when it serves it (one round trip as cheap as a
// lookup), else over the session's gRPC connection.
func (s *Session) opens(ctx context.Context, what string, f fid.FID, req *pb.OpensRequest) (*pb.OpensReply, error) {
	c := s.c
	var rep *pb.OpensReply
	framed := true
	err := c.retry(ctx, what, f, func(ctx context.Context) error {
		var err error
		if framed {
			var m *mdtConn
			if m, err = c.mdtFor(f); err != nil {
				return err
			}
			if o, ok := m.cli.(mdrpc.Opener); ok {
				rep, err = o.Opens(ctx, req)
				if errno.CodeOf(err) != errno.Unimplemented {
					return err
				}
			}
			framed = false
		}
		m, err := s.mdt(f)
		if err != nil {
			return err
		}
		s.mu.Lock()
		open, addr := m.open, m.addr
		s.mu.Unlock()
		err = s.watchedIfReplicated(ctx, m.index, addr, func(ctx context.Context) (err error) {
			rep, err = open.Opens(ctx, req)
			return err
		})
		if errno.Retryable(err) {
			if m, merr := s.mdt(f); merr == nil {
				s.follow(m, c.probeLeader(ctx, m.index))
			}
		}
		return err
	})
	return rep, err
}

// replayOpens tells a new session's MDT every file open here that it
// owns.
func (s *Session) replayOpens(ctx context.Context, m *sessMDT) {
	var mine []*pb.FID
	if s.h.OpenFIDs != nil {
		for _, f := range s.h.OpenFIDs() {
			if mc, err := s.c.mdtFor(f); err == nil && mc.index == m.index {
				mine = append(mine, f.PB())
			}
		}
	}
	s.mu.Lock()
	open := m.open
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := open.Opens(cctx, &pb.OpensRequest{ClientId: s.c.id, Opened: mine, Replace: true}); err != nil && errno.CodeOf(err) != errno.Unimplemented && ctx.Err() == nil {
		s.c.log.Warn("tell a new session's MDT the open files", "mdt", m.index, "files", len(mine), "err", err)
	}
}

// ReleaseOrphans tells the MDT this client closed the files for the last
// time: the orphans among them are destroyed.
func (s *Session) ReleaseOrphans(ctx context.Context, fids []fid.FID) error {
	if len(fids) == 0 {
		return nil
	}
	var first error
	for _, list := range s.c.byMDT(fids) {
		_, err := s.mutate(ctx, "release", list[0], &pb.Command{Op: &pb.Command_OrphanRelease{OrphanRelease: &pb.OrphanReleaseOp{Fids: pbFIDs(list)}}})
		if first == nil {
			first = err
		}
	}
	return first
}

// LockSpec describes a file lock request or a held lock.
type LockSpec struct {
	Flock  bool        // BSD flock (whole file); else POSIX byte range
	Owner  uint64      // lock owner (from the kernel)
	Handle uint64      // open file it comes through
	Pid    uint32      // for F_GETLK
	Type   pb.LockType // LOCK_UNLOCK releases
	Start  uint64
	End    uint64 // inclusive; 1<<63-1 = to the end of the file
}

func (s *Session) lockReq(f fid.FID, l LockSpec) *pb.LockRequest {
	return &pb.LockRequest{ClientId: s.c.id, Fid: f.PB(), Flock: l.Flock, Owner: l.Owner, Handle: l.Handle, Pid: l.Pid,
		Type: l.Type, Start: l.Start, End: l.End}
}

// ldlmCall runs a call on the lock manager of f's MDT, again while it is
// unavailable (a new leader, the session reconnecting) for up to 10 s.
func (s *Session) ldlmCall(ctx context.Context, f fid.FID, call func(ld nacregrpc.LDLMClient) error) error {
	var noMDT error // not retried: only the lock manager's answers are
	err := whileUnavailable(ctx, time.Now().Add(10*time.Second), 200*time.Millisecond, 200*time.Millisecond, func() error {
		ld, _, err := s.clients(f)
		if err != nil {
			noMDT = err
			return nil
		}
		return call(ld)
	})
	if noMDT != nil {
		return noMDT
	}
	return err
}

// SetLock takes, changes or releases a lock. Without wait a conflict is
// EAGAIN. With wait it blocks until granted; closing interrupt cancels the
// wait (EINTR, unless the lock was granted first). Errors are
// syscall.Errno values.
func (s *Session) SetLock(ctx context.Context, f fid.FID, l LockSpec, wait bool, interrupt <-chan struct{}) error {
	req := s.lockReq(f, l)
	if !wait {
		return s.lockCall(ctx, f, req)
	}
	req.Wait = true
	req.WaitId = s.waitSeq.Add(1)
	done := make(chan error, 1)
	go func() {
		// A session may be reconnecting; waiting needs one.
		for i := 0; ; i++ {
			err := s.lockCall(ctx, f, req)
			if errors.Is(err, errNoSession) && i < 50 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			done <- err
			return
		}
	}()
	select {
	case err := <-done:
		return err
	case <-interrupt:
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		s.ldlmCall(cctx, f, func(ld nacregrpc.LDLMClient) error {
			_, err := ld.CancelWait(cctx, &pb.CancelWaitRequest{ClientId: s.c.id, WaitId: req.WaitId})
			return err
		})
		cancel()
		return <-done
	}
}

var errNoSession = errors.New("no session")

func (s *Session) lockCall(ctx context.Context, f fid.FID, req *pb.LockRequest) error {
	var r *pb.LockReply
	err := s.ldlmCall(ctx, f, func(ld nacregrpc.LDLMClient) (err error) {
		r, err = ld.Lock(ctx, req, grpc.WaitForReady(true))
		return err
	})
	if err != nil {
		if errno.CodeOf(err) == errno.FailedPrecondition {
			return errNoSession
		}
		s.c.log.Warn("lock request failed", "err", err)
		return syscall.ENOLCK
	}
	if r.Errno != 0 {
		return syscall.Errno(r.Errno)
	}
	return nil
}

// GetLock returns the first lock that conflicts with l (F_GETLK); found
// is false if there is none.
func (s *Session) GetLock(ctx context.Context, f fid.FID, l LockSpec) (LockSpec, bool, error) {
	var r *pb.LockReply
	err := s.ldlmCall(ctx, f, func(ld nacregrpc.LDLMClient) (err error) {
		r, err = ld.GetLock(ctx, s.lockReq(f, l), grpc.WaitForReady(true))
		return err
	})
	if err != nil {
		return LockSpec{}, false, syscall.ENOLCK
	}
	if r.Errno != 0 {
		return LockSpec{}, false, syscall.Errno(r.Errno)
	}
	if r.Type == pb.LockType_LOCK_UNLOCK {
		return LockSpec{}, false, nil
	}
	return LockSpec{Flock: l.Flock, Type: r.Type, Start: r.Start, End: r.End, Pid: r.Pid}, true, nil
}

// ReleaseLocks drops on f the POSIX locks of posixOwner, the flock locks
// of flockOwner and every lock taken through handle (0 selects nothing).
func (s *Session) ReleaseLocks(ctx context.Context, f fid.FID, posixOwner, flockOwner, handle uint64) error {
	return s.ldlmCall(ctx, f, func(ld nacregrpc.LDLMClient) error {
		_, err := ld.ReleaseLocks(ctx, &pb.ReleaseLocksRequest{ClientId: s.c.id, Fid: f.PB(), PosixOwner: posixOwner, FlockOwner: flockOwner, Handle: handle})
		return err
	})
}

// Invalidate makes every other client drop what it caches of fids, and
// returns once they acknowledged (or after a short timeout).
func (s *Session) Invalidate(ctx context.Context, fids []fid.FID) error {
	if len(fids) == 0 {
		return nil
	}
	byMDT := map[*sessMDT][]fid.FID{}
	for _, f := range fids {
		m, err := s.mdt(f)
		if err != nil {
			return err
		}
		byMDT[m] = append(byMDT[m], f)
	}
	for _, fs := range byMDT {
		err := s.ldlmCall(ctx, fs[0], func(ld nacregrpc.LDLMClient) error {
			_, err := ld.Invalidate(ctx, &pb.InvalidateRequest{ClientId: s.c.id, Fids: pbFIDs(fs)})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// AppendToken takes the append token of f (api/lock.proto), waiting while
// its holder gives it back, and returns the grant and the session epoch
// the token is valid in (LockValid).
func (s *Session) AppendToken(ctx context.Context, f fid.FID) (grant, epoch uint64, err error) {
	m, err := s.mdt(f)
	if err != nil {
		return 0, 0, err
	}
	for {
		e := m.epoch.Load()
		var rep *pb.AppendTokenReply
		err := s.ldlmCall(ctx, f, func(ld nacregrpc.LDLMClient) error {
			var err error
			rep, err = ld.AppendToken(ctx, &pb.AppendTokenRequest{ClientId: s.c.id, Fid: f.PB()})
			return err
		})
		if err != nil {
			return 0, 0, fmt.Errorf("append token of %s: %w", f, err)
		}
		// Granted within the session of epoch e, unless a stream was
		// registered or ended meanwhile: then ask again.
		if m.epoch.Load() == e {
			return rep.Grant, e, nil
		}
	}
}

// ReleaseAppendToken gives back the token of a grant (best effort: the
// session's end releases it too).
func (s *Session) ReleaseAppendToken(ctx context.Context, f fid.FID, grant uint64) error {
	ld, _, err := s.clients(f)
	if err != nil {
		return err
	}
	_, err = ld.AppendToken(ctx, &pb.AppendTokenRequest{ClientId: s.c.id, Fid: f.PB(), Release: true, Grant: grant})
	return err
}

// errLockOvertaken is LookupLock's answer when the session the lock was
// granted in ended before the grant arrived: the lock is void.
var errLockOvertaken = errors.New("the session ended while the lock was granted")

// LookupLock takes the lookup lock of directory dir (api/services.proto,
// LDLM.LookupLock) and returns the grant and the session epoch it is
// valid in (LockValid). It holds until the MDS revokes it through the
// session (SessionHandlers.RevokeLookup), the client releases it, or the
// session ends.
func (s *Session) LookupLock(ctx context.Context, dir fid.FID) (grant, epoch uint64, err error) {
	m, err := s.mdt(dir)
	if err != nil {
		return 0, 0, err
	}
	e := m.epoch.Load()
	var rep *pb.LookupLockReply
	err = s.ldlmCall(ctx, dir, func(ld nacregrpc.LDLMClient) error {
		var err error
		rep, err = ld.LookupLock(ctx, &pb.LookupLockRequest{ClientId: s.c.id, Fid: dir.PB()})
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("lookup lock of %s: %w", dir, err)
	}
	if m.epoch.Load() != e {
		return 0, 0, fmt.Errorf("lookup lock of %s: %w", dir, errLockOvertaken)
	}
	return rep.Grant, e, nil
}

// LookupLocksServed reports whether the MDT that owns dir grants lookup
// locks: a replicated one does not (internal/ldlm, lookuplock.go).
func (s *Session) LookupLocksServed(dir fid.FID) bool {
	mc, err := s.c.mdtFor(dir)
	return err == nil && !s.c.replicated(mc.index)
}

// LockValid reports whether a lock on f granted in epoch (an append token
// or a lookup lock) is still valid: the session it was granted in has not
// ended.
func (s *Session) LockValid(f fid.FID, epoch uint64) bool {
	m, err := s.mdt(f)
	return err == nil && m.epoch.Load() == epoch
}

// ReleaseLookupLock gives back the lookup lock of a grant (best effort:
// the session's end releases it too).
func (s *Session) ReleaseLookupLock(ctx context.Context, dir fid.FID, grant uint64) error {
	ld, _, err := s.clients(dir)
	if err != nil {
		return err
	}
	_, err = ld.LookupLock(ctx, &pb.LookupLockRequest{ClientId: s.c.id, Fid: dir.PB(), Release: true, Grant: grant})
	return err
}
