package mds

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"sync"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/mdrpc"
	"nacre/internal/mdt"
	"nacre/internal/pki"
	"nacre/internal/raftgroup"
)

// Fault points of a cross-MDT transaction, in the coordinator's MDS
// (docs/architecture.md, "Several MDTs"; the state machine's half is
// internal/mdt/dtx.go).
const (
	FaultDtxBeforePrepare = "mds.dtx.before_prepare"
	FaultDtxAfterPrepare  = "mds.dtx.after_prepare"
	FaultDtxAfterCommit   = "mds.dtx.after_commit"
	FaultDtxAfterFinish   = "mds.dtx.after_finish"
	// FaultDtxServed is the participant's: a step applied, not answered.
	FaultDtxServed = "mds.dtx.served"
)

// DefaultDtxResolveAfter is how long a participant's intent may stay
// pending before its MDS asks the coordinator (Options.DtxResolveAfter);
// a transaction's steps take milliseconds, so an intent this old lost its
// coordinator's MDS. dtxTendEvery is how often the leader looks.
const (
	DefaultDtxResolveAfter = 5 * time.Second
	dtxTendEvery           = time.Second
)

// mdtPeers reaches the other MDTs' servers through the metadata RPC, as
// the MGS lists them, and routes FIDs through the FLD.
type mdtPeers struct {
	self  uint32
	creds *pki.Creds // this target's, to dial the others with (nil: no TLS)
	fs    string

	mu   sync.Mutex
	reps map[uint32][]*peerRep
	good map[uint32]uint64 // the replica that answered last, by MDT
	fld  []*pb.SeqRange
}

type peerRep struct {
	id   uint64
	addr string
	cli  *mdrpc.MDS
}

func newMDTPeers(self uint32, fsname string, creds *pki.Creds) *mdtPeers {
	return &mdtPeers{self: self, fs: fsname, creds: creds, reps: map[uint32][]*peerRep{}, good: map[uint32]uint64{}}
}

// update takes the MDT replicas and the FLD from a configuration read.
func (p *mdtPeers) update(cfg *pb.ClusterConfig) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fld = cfg.Fld
	seen := map[uint32]map[uint64]bool{}
	for _, ti := range cfg.Targets {
		if ti.Kind != pb.TargetKind_TARGET_MDT || ti.Index == p.self || ti.DataAddr == "" {
			continue
		}
		if seen[ti.Index] == nil {
			seen[ti.Index] = map[uint64]bool{}
		}
		seen[ti.Index][ti.ReplicaId] = true
		var have *peerRep
		for _, r := range p.reps[ti.Index] {
			if r.id == ti.ReplicaId {
				have = r
			}
		}
		if have != nil && have.addr == ti.DataAddr {
			continue
		}
		if have != nil {
			have.cli.Close()
			have.addr = ti.DataAddr
		} else {
			have = &peerRep{id: ti.ReplicaId, addr: ti.DataAddr}
			p.reps[ti.Index] = append(p.reps[ti.Index], have)
		}
		if p.creds != nil {
			have.cli = mdrpc.NewMDS(ti.DataAddr, p.fs, p.creds.ClientConfig())
		} else {
			have.cli = mdrpc.NewMDS(ti.DataAddr, p.fs, nil)
		}
	}
	for idx, rs := range p.reps {
		kept := rs[:0]
		for _, r := range rs {
			if seen[idx][r.id] {
				kept = append(kept, r)
			} else {
				r.cli.Close()
			}
		}
		p.reps[idx] = kept
	}
}

func (p *mdtPeers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rs := range p.reps {
		for _, r := range rs {
			r.cli.Close()
		}
	}
	p.reps = map[uint32][]*peerRep{}
}

// mdtOf is the MDT that holds f (ok false: the FLD read last does not
// know f's sequence).
func (p *mdtPeers) mdtOf(f fid.FID) (uint32, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return fid.MDTOf(p.fld, f)
}

// remoteDir reports whether an rmdir removes a remote directory, and
// which (a plain unlink is not looked at: remote entries are directories).
func (s *Server) remoteDir(u *pb.UnlinkOp) (fid.FID, bool) {
	if u == nil || !u.Dir {
		return fid.FID{}, false
	}
	return s.remoteEntry(u.Parent, u.Name)
}

// remoteEntry reports whether parent/name leads to another MDT, and
// where. It reads the store even with one MDT: the configuration, which
// lists the others, is not read yet right after a start.
func (s *Server) remoteEntry(parent *pb.FID, name []byte) (fid.FID, bool) {
	f, remote, err := s.t.Entry(fid.FromPB(parent), string(name))
	return f, err == nil && remote
}

func (p *mdtPeers) known(index uint32) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reps[index]) > 0
}

// order lists an MDT's replicas, the one that answered last first.
func (p *mdtPeers) order(index uint32) []*peerRep {
	p.mu.Lock()
	defer p.mu.Unlock()
	rs := append([]*peerRep(nil), p.reps[index]...)
	for i, r := range rs {
		if r.id == p.good[index] {
			rs[0], rs[i] = rs[i], rs[0]
		}
	}
	return rs
}

// call sends an MDT-internal command to MDT index, trying its replicas
// until the leader answers or ctx ends.
func (p *mdtPeers) call(ctx context.Context, index uint32, cmd *pb.Command) (*pb.Reply, error) {
	var rep *pb.Reply
	err := p.with(ctx, index, func(c *mdrpc.MDS) (err error) {
		rep, err = c.Mutate(ctx, cmd)
		return err
	})
	return rep, err
}

// with runs fn on MDT index's replicas in turn until one answers (the
// leader, for what only a leader serves) or ctx ends.
func (p *mdtPeers) with(ctx context.Context, index uint32, fn func(c *mdrpc.MDS) error) error {
	var last error
	for attempt := 0; ; attempt++ {
		rs := p.order(index)
		if len(rs) == 0 {
			last = fmt.Errorf("MDT%04x is not in the configuration the MGS gave", index)
		}
		for _, r := range rs {
			err := fn(r.cli)
			if err == nil {
				p.mu.Lock()
				p.good[index] = r.id
				p.mu.Unlock()
				return nil
			}
			last = err
			if ctx.Err() != nil {
				return fmt.Errorf("MDT%04x: %w", index, last)
			}
		}
		if err := sleepCtx(ctx, min(20*time.Millisecond<<min(attempt, 6), time.Second)); err != nil {
			return fmt.Errorf("MDT%04x did not answer: %w", index, last)
		}
	}
}

// newTxid is a transaction id this MDS has not used (mdt.DtxID).
func (s *Server) newTxid(participant uint32) uint64 {
	var b [4]byte
	rand.Read(b[:])
	return mdt.DtxID(binary.LittleEndian.Uint32(b[:])|1, uint16(s.id.Index), uint16(participant))
}

// fromPeer refuses an MDT-internal command from anyone but another
// target (a node certificate) when links are authenticated.
func (s *Server) fromPeer(ctx context.Context) error {
	if s.tls == nil {
		return nil
	}
	if c := peerCert(ctx); c == nil || pki.RoleOf(c) != pki.RoleNode {
		return errno.Errorf(errno.PermissionDenied, "%s: cross-MDT transaction steps come from other MDTs only (a node certificate)", s.id.Label())
	}
	return nil
}

// serveDtx applies one step another MDS sends: prepare and finish as the
// participant, resolve and forget as the coordinator, a remote entry the
// checker of another MDT puts back; status is read only.
func (s *Server) serveDtx(ctx context.Context, cmd *pb.Command) (*pb.Reply, error) {
	if err := s.fromPeer(ctx); err != nil {
		return nil, err
	}
	if !s.group.IsLeader() {
		return nil, s.groupErr(&raftgroup.NotLeaderError{Leader: s.group.Leader()})
	}
	cmd.ClientId, cmd.RequestId, cmd.Cred = 0, 0, nil // idempotent by txid, not by the reply cache
	cmd.NowNs = time.Now().UnixNano()
	switch o := cmd.Op.(type) {
	case *pb.Command_DtxStatus:
		pending, err := s.t.DtxPending(o.DtxStatus.Txid)
		if err != nil {
			return nil, errno.Errorf(errno.Internal, "%v", err)
		}
		if !pending {
			return &pb.Reply{Errno: int32(syscall.ENOENT)}, nil
		}
		return &pb.Reply{}, nil
	case *pb.Command_DtxPrepare:
		if o.DtxPrepare.Kind == pb.DtxKind_DTX_MKDIR {
			if err := s.waitFIDs(ctx); err != nil {
				return nil, err
			}
		}
	}
	r, err := s.propose(ctx, cmd)
	if err == nil {
		if err := fault.Hit(FaultDtxServed); err != nil {
			return nil, err
		}
	}
	return r, err
}

// remoteMkdir makes a directory on another MDT (nacre mkdir -i): the
// directory there, then its name here, in one transaction.
func (s *Server) remoteMkdir(ctx context.Context, cmd *pb.Command, op *pb.CreateOp, on uint32) (*pb.Reply, error) {
	if op.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return &pb.Reply{Errno: int32(syscall.EINVAL), Message: "only a directory may be made on another MDT (nacre mkdir -i)"}, nil
	}
	if !s.peers.known(on) {
		s.freshConfig()
		if !s.peers.known(on) {
			return &pb.Reply{Errno: int32(syscall.EINVAL), Message: fmt.Sprintf("there is no MDT%04x in this file system (nacre df lists the MDTs)", on)}, nil
		}
	}
	ino, access, def, err := s.t.RemoteDir(fid.FromPB(op.Parent), string(op.Name), op.Mode, op.Umask, cmd.Cred, cmd.NowNs)
	if err != nil {
		return &pb.Reply{Errno: errnoOf(err), Message: err.Error()}, nil
	}
	return s.transact(ctx, cmd, "mkdir "+string(op.Name), on,
		&pb.DtxPrepareOp{Kind: pb.DtxKind_DTX_MKDIR, Parent: op.Parent, Name: op.Name, Inode: ino, AclAccess: access, AclDefault: def},
		func(remote *pb.Inode, txid uint64) { op.Remote, op.Txid = remote, txid })
}

// remoteRmdir removes a remote directory: checked empty (and closed to
// new names) on its MDT, its name removed here, then the directory there.
func (s *Server) remoteRmdir(ctx context.Context, cmd *pb.Command, op *pb.UnlinkOp, f fid.FID) (*pb.Reply, error) {
	on, err := s.mdtOfFID(f)
	if err != nil {
		return nil, err
	}
	return s.transact(ctx, cmd, "rmdir "+string(op.Name), on,
		&pb.DtxPrepareOp{Kind: pb.DtxKind_DTX_RMDIR, Parent: op.Parent, Name: op.Name, Fid: f.PB()},
		func(remote *pb.Inode, txid uint64) { op.Remote, op.Txid = remote, txid })
}

// remoteRename moves the name of a directory of another MDT between
// directories of this one: its MDT checks it is there and keeps an
// intent, the move here decides, and its linkEA follows at the finish.
func (s *Server) remoteRename(ctx context.Context, cmd *pb.Command, op *pb.RenameOp, f fid.FID) (*pb.Reply, error) {
	on, err := s.mdtOfFID(f)
	if err != nil {
		return nil, err
	}
	return s.transact(ctx, cmd, "rename "+string(op.SrcName), on,
		&pb.DtxPrepareOp{Kind: pb.DtxKind_DTX_RENAME, Parent: op.DstParent, Name: op.DstName, Fid: f.PB(), OldParent: op.SrcParent, OldName: op.SrcName},
		func(remote *pb.Inode, txid uint64) { op.Remote, op.Txid = remote, txid })
}

// mdtOfFID is the MDT that holds f, reading the FLD again if it does not
// know f's sequence yet.
func (s *Server) mdtOfFID(f fid.FID) (uint32, error) {
	on, ok := s.peers.mdtOf(f)
	if !ok {
		s.freshConfig()
		if on, ok = s.peers.mdtOf(f); !ok {
			return 0, errno.Errorf(errno.Unavailable, "no MDT serves the sequence of %s in the FLD the MGS gave", f)
		}
	}
	return on, nil
}

// transact runs a cross-MDT transaction with MDT on: prep there (its
// txid and coordinator filled here), then set puts what it answered and
// the txid in the client's command, which decides.
func (s *Server) transact(ctx context.Context, cmd *pb.Command, what string, on uint32, prep *pb.DtxPrepareOp, set func(remote *pb.Inode, txid uint64)) (*pb.Reply, error) {
	txid := s.newTxid(on)
	prep.Txid, prep.Coordinator = txid, s.id.Index
	if err := fault.Hit(FaultDtxBeforePrepare); err != nil {
		return nil, err
	}
	var rep *pb.Reply
	for wait := time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		var err error
		if rep, err = s.peers.call(ctx, on, &pb.Command{Op: &pb.Command_DtxPrepare{DtxPrepare: prep}}); err != nil {
			return nil, errno.Errorf(errno.Unavailable, "%s on MDT%04x: %v", what, on, err)
		}
		if rep.Errno != int32(syscall.EAGAIN) {
			break
		}
		// The directory is in another transaction still (its finish
		// is on its way, or its coordinator crashed and the outcome is
		// being resolved).
		if err := sleepCtx(ctx, wait); err != nil {
			return nil, errno.Errorf(errno.Unavailable, "%s on MDT%04x: %s", what, on, rep.Message)
		}
	}
	if rep.Errno != 0 {
		return &pb.Reply{Errno: rep.Errno, Message: rep.Message}, nil
	}
	if err := fault.Hit(FaultDtxAfterPrepare); err != nil {
		return nil, err
	}
	set(rep.Inode, txid)
	return s.decide(ctx, cmd, on, txid)
}

// decide proposes the client's command, which decides txid, synced (the
// participant acts on the outcome, so it must outlive a crash here), and
// answers; telling the participant and forgetting the outcome follow in
// the background, off the client's path (a crash there leaves them to
// tendDtx). The participant's half is then seconds at most behind: an
// aborted or removed directory is already out of the namespace, and a
// made one is usable at once.
func (s *Server) decide(ctx context.Context, cmd *pb.Command, on uint32, txid uint64) (*pb.Reply, error) {
	r, err := s.propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	if err := fault.Hit(FaultDtxAfterCommit); err != nil {
		return nil, err
	}
	committed := r.Errno == 0
	s.background(func() {
		ctx, cancel := s.ctx(10 * time.Second)
		defer cancel()
		if _, err := s.peers.call(ctx, on, &pb.Command{Op: &pb.Command_DtxFinish{DtxFinish: &pb.DtxFinishOp{Txid: txid, Committed: committed}}}); err != nil {
			s.log.Warn("cross-MDT transaction decided but not yet finished on its participant; finishing it in the background", "txid", fmt.Sprintf("%#x", txid), "mdt", fmt.Sprintf("MDT%04x", on), "err", err)
			return
		}
		if fault.Hit(FaultDtxAfterFinish) != nil {
			return
		}
		if _, err := s.propose(ctx, &pb.Command{NowNs: time.Now().UnixNano(), Op: &pb.Command_DtxForget{DtxForget: &pb.DtxForgetOp{Txid: txid}}}); err != nil {
			s.log.Debug("forget a finished transaction (the background tending will)", "txid", fmt.Sprintf("%#x", txid), "err", err)
		}
	})
	return r, nil
}

// background runs f on a goroutine of its own that Stop waits for, unless
// the server is stopping (then f does not run: what it would have done is
// left to tendDtx after the next start).
func (s *Server) background(f func()) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.bgStopped {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f()
	}()
}

// tendDtx finishes, while this replica leads, what crashes left of
// cross-MDT transactions: an intent pending here for longer than
// dtxResolveAfter gets the coordinator's outcome (or its abort) and is
// finished; an outcome kept here whose participant has finished is
// forgotten.
func (s *Server) tendDtx() {
	defer s.wg.Done()
	t := time.NewTicker(dtxTendEvery)
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
		recs, err := s.t.DtxRecords()
		if err != nil {
			s.log.Warn("read cross-MDT transactions", "err", err)
			continue
		}
		s.m.dtxOpen.Set(float64(len(recs)))
		if !s.group.IsLeader() || s.rec.active.Load() {
			continue
		}
		for _, rec := range recs {
			if time.Since(time.Unix(0, rec.TimeNs)) < grace(s.opts.DtxResolveAfter, DefaultDtxResolveAfter) {
				continue
			}
			ctx, cancel := s.ctx(5 * time.Second)
			if err := s.tendOne(ctx, rec); err != nil {
				s.log.Info("cross-MDT transaction still open; trying again", "txid", fmt.Sprintf("%#x", rec.Txid), "peer", fmt.Sprintf("MDT%04x", rec.Peer), "err", err)
			}
			cancel()
		}
	}
}

func (s *Server) tendOne(ctx context.Context, rec *pb.DtxRecord) error {
	if rec.Coordinator {
		st, err := s.peers.call(ctx, rec.Peer, &pb.Command{Op: &pb.Command_DtxStatus{DtxStatus: &pb.DtxStatusOp{Txid: rec.Txid}}})
		if err != nil {
			return err
		}
		if st.Errno == 0 {
			return nil // its participant has not finished: it will ask
		}
		_, err = s.propose(ctx, &pb.Command{NowNs: time.Now().UnixNano(), Op: &pb.Command_DtxForget{DtxForget: &pb.DtxForgetOp{Txid: rec.Txid}}})
		return err
	}
	res, err := s.peers.call(ctx, rec.Peer, &pb.Command{Op: &pb.Command_DtxResolve{DtxResolve: &pb.DtxResolveOp{Txid: rec.Txid, Participant: s.id.Index}}})
	if err != nil {
		return err
	}
	if res.Errno != 0 && res.Errno != int32(syscall.ECANCELED) {
		return fmt.Errorf("resolve: %s", res.Message)
	}
	committed := res.Errno == 0
	s.log.Info("finishing a cross-MDT transaction its coordinator left open", "txid", fmt.Sprintf("%#x", rec.Txid), "kind", rec.Kind.String(), "outcome", map[bool]string{true: "committed", false: "aborted"}[committed])
	_, err = s.propose(ctx, &pb.Command{NowNs: time.Now().UnixNano(), Op: &pb.Command_DtxFinish{DtxFinish: &pb.DtxFinishOp{Txid: rec.Txid, Committed: committed}}})
	return err
}

// carriesDtx reports whether a client's command carries what only an MDS
// may set: a transaction to decide.
func carriesDtx(cmd *pb.Command) bool {
	switch o := cmd.Op.(type) {
	case *pb.Command_Create:
		return o.Create.Txid != 0 || o.Create.Remote != nil
	case *pb.Command_Unlink:
		return o.Unlink.Txid != 0 || o.Unlink.Remote != nil
	case *pb.Command_Rename:
		return o.Rename.Txid != 0 || o.Rename.Remote != nil
	}
	return false
}

// notHere refuses, with EXDEV, a link or rename that needs an object or
// directory of another MDT: cross-MDT links and renames are not supported
// yet, and EXDEV is what makes mv copy instead.
func (s *Server) notHere(f fid.FID, what string) *pb.Reply {
	on, ok := s.peers.mdtOf(f)
	if !ok || on == s.id.Index {
		return nil
	}
	return &pb.Reply{Errno: int32(syscall.EXDEV), Message: fmt.Sprintf("%s: %s is on MDT%04x, and this directory on %s (cross-MDT %ss are not supported yet)", what, f, on, s.id.Label(), what)}
}

// remoteMDTs is the checker's view of the other MDTs (lfsck.Remote).
type remoteMDTs struct{ s *Server }

func (m remoteMDTs) mdtOf(f fid.FID) (uint32, error) { return m.s.mdtOfFID(f) }

// replyErr turns an errno reply into an error that unwraps to it.
func replyErr(what string, errNo int32, msg string) error {
	if errNo == 0 {
		return nil
	}
	return fmt.Errorf("%s: %s: %w", what, msg, syscall.Errno(errNo))
}

func (m remoteMDTs) Getattr(ctx context.Context, f fid.FID) (*pb.Inode, error) {
	idx, err := m.mdtOf(f)
	if err != nil {
		return nil, err
	}
	var rep *pb.Reply
	if err := m.s.peers.with(ctx, idx, func(c *mdrpc.MDS) (err error) {
		rep, err = c.Getattr(ctx, &pb.GetattrRequest{Fid: f.PB(), WantLinks: true})
		return err
	}); err != nil {
		return nil, err
	}
	return rep.Inode, replyErr("getattr "+f.String(), rep.Errno, rep.Message)
}

func (m remoteMDTs) Lookup(ctx context.Context, parent fid.FID, name string) (fid.FID, bool, error) {
	idx, err := m.mdtOf(parent)
	if err != nil {
		return fid.FID{}, false, err
	}
	var rep *pb.Reply
	if err := m.s.peers.with(ctx, idx, func(c *mdrpc.MDS) (err error) {
		rep, err = c.Lookup(ctx, &pb.LookupRequest{Parent: parent.PB(), Name: []byte(name)})
		return err
	}); err != nil {
		return fid.FID{}, false, err
	}
	if err := replyErr(fmt.Sprintf("lookup %q in %s", name, parent), rep.Errno, rep.Message); err != nil {
		return fid.FID{}, false, err
	}
	return fid.FromPB(rep.Inode.Fid), rep.Inode.Flags&uint32(pb.InodeFlag_INODE_FLAG_REMOTE) != 0, nil
}

func (m remoteMDTs) Relink(ctx context.Context, parent fid.FID, name string, f fid.FID, typ uint32) error {
	idx, err := m.mdtOf(parent)
	if err != nil {
		return err
	}
	rep, err := m.s.peers.call(ctx, idx, &pb.Command{Op: &pb.Command_RemoteEntry{RemoteEntry: &pb.RemoteEntryOp{Parent: parent.PB(), Name: []byte(name), Fid: f.PB(), Type: typ}}})
	if err != nil {
		return err
	}
	return replyErr(fmt.Sprintf("put back %q in %s", name, parent), rep.Errno, rep.Message)
}

// renameWhiteout is RENAME_WHITEOUT: the rename leaves a new object (the
// whiteout) at the old name.
const renameWhiteout = 4
