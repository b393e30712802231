package mds

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/ldlm"
	"nacre/internal/mdt"
	"nacre/internal/raftgroup"
)

// Files removed through one client while another has them open.
//
// A mount tells the leader which files it has open (OpenFiles.Opens: at
// its first open of a file and its last close, and its whole list when a
// session starts). While any client other than the remover may have files
// open, the leader marks a removal (unlink, rename over a file) shared:
// apply then keeps a regular file whose last name goes as an orphan of no
// client in particular (mdt.SharedOrphanOwner), and the leader destroys it
// once no client has it open (releaseShared). A client's own orphan that
// other clients still have open when it releases it becomes shared too.
// Lustre keeps such files by the open handles its MDS holds.
//
// Ordering: Opens answers only after every removal that began before the
// open was noted has been applied, and with the file's attributes as of
// then, so an open either sees the file gone or is seen by every later
// removal. A new leader knows no opens until the clients' sessions come
// back; for OpenGrace after it starts leading it marks every removal
// shared (once clients have ever reported opens: the MDT records that),
// and destroys no shared orphan.

// OpenGrace is how long a new leader treats every client as possibly
// having files open (clients re-open their sessions within seconds of a
// leader change), unless Options.OpenGrace says otherwise.
const OpenGrace = 10 * time.Second

// removals tracks the removals being proposed, so that Opens can wait
// for those that began before it.
type removals struct {
	mu      sync.Mutex
	next    uint64
	active  map[uint64]bool
	changed chan struct{}
}

func (r *removals) begin() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.active == nil {
		r.active, r.changed = map[uint64]bool{}, make(chan struct{})
	}
	r.next++
	r.active[r.next] = true
	return r.next
}

func (r *removals) end(t uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.active, t)
	close(r.changed)
	r.changed = make(chan struct{})
}

// quiet reports whether no removal is under way, and the tickets given
// so far: with unchanged, it proves that no removal was applied between
// the two calls (noteCreateOpen).
func (r *removals) quiet() (given uint64, idle bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next, len(r.active) == 0
}

// unchanged reports whether no removal began since quiet gave given.
func (r *removals) unchanged(given uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next == given
}

// mark is the ticket the next removal will get.
func (r *removals) mark() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next + 1
}

// waitBefore returns once no removal with a ticket below t is under way.
func (r *removals) waitBefore(ctx context.Context, t uint64) error {
	for {
		r.mu.Lock()
		busy := false
		for a := range r.active {
			if a < t {
				busy = true
				break
			}
		}
		ch := r.changed
		r.mu.Unlock()
		if !busy {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func isRemoval(cmd *pb.Command) bool {
	switch o := cmd.Op.(type) {
	case *pb.Command_Unlink:
		return !o.Unlink.Dir
	case *pb.Command_Rename, *pb.Command_OpenRename:
		return true
	case *pb.Command_OpenUnlink:
		return o.OpenUnlink.Unlink != nil && !o.OpenUnlink.Unlink.Dir
	}
	return false
}

// markShared makes a removal keep a file other clients may have open
// (before it is proposed, within its removal ticket).
func (s *Server) markShared(cmd *pb.Command) {
	lm := s.LDLM()
	if lm == nil {
		return
	}
	// A new leadership does not know the opens yet, if clients ever
	// told any (a file system only ever used through the library has
	// none to wait for).
	young := time.Since(s.group.LeaderSince()) < s.openGrace && s.t.OpensSeen()
	if !young && !lm.OpenElsewhere(cmd.ClientId, s.orphanGrace) {
		return
	}
	switch o := cmd.Op.(type) {
	case *pb.Command_Unlink:
		cmd.Op = &pb.Command_OpenUnlink{OpenUnlink: &pb.OpenUnlinkOp{Unlink: o.Unlink, Shared: true}}
	case *pb.Command_Rename:
		cmd.Op = &pb.Command_OpenRename{OpenRename: &pb.OpenRenameOp{Rename: o.Rename, Shared: true}}
	case *pb.Command_OpenUnlink:
		o.OpenUnlink.Shared = true
	case *pb.Command_OpenRename:
		o.OpenRename.Shared = true
	}
}

// proposeRemoval proposes cmd; a removal is marked shared if need be and
// counted for Opens.
func (s *Server) proposeRemoval(ctx context.Context, cmd *pb.Command, lazy bool) (*pb.Reply, error) {
	if !isRemoval(cmd) {
		return s.proposeCmd(ctx, cmd, lazy)
	}
	t := s.rm.begin()
	defer s.rm.end(t)
	s.markShared(cmd)
	r, err := s.proposeCmd(ctx, cmd, lazy)
	if err == nil && r.Errno == 0 {
		s.askCloses(cmd, r)
	}
	return r, err
}

// askCloses asks the clients that have a file open which a shared removal
// kept (its last name gone) to tell their closes now if they hold it
// closed already: they batch closes, and the file's space would stay
// taken until the batch goes.
func (s *Server) askCloses(cmd *pb.Command, r *pb.Reply) {
	u, ok := cmd.Op.(*pb.Command_OpenUnlink)
	lm := s.LDLM()
	if !ok || !u.OpenUnlink.Shared || lm == nil || r.Inode == nil || r.Inode.Nlink != 0 || !isRegular(r.Inode.Mode) {
		return
	}
	lm.AskClose(fid.FromPB(r.Inode.Fid), cmd.ClientId)
}

// shareReleased moves, in a client's release of its orphans, those that
// other clients still have open to Share: they are kept, shared.
func (s *Server) shareReleased(cmd *pb.Command) {
	o, ok := cmd.Op.(*pb.Command_OrphanRelease)
	lm := s.LDLM()
	if !ok || lm == nil || cmd.ClientId == 0 {
		return
	}
	var keep, share []*pb.FID
	for _, f := range o.OrphanRelease.Fids {
		if lm.HeldOpen(fid.FromPB(f), cmd.ClientId, s.orphanGrace) {
			share = append(share, f)
		} else {
			keep = append(keep, f)
		}
	}
	o.OrphanRelease.Fids, o.OrphanRelease.Share = keep, append(o.OrphanRelease.Share, share...)
}

// Opens records a client's opens and closes (see above).
func (o *openFiles) Opens(ctx context.Context, req *pb.OpensRequest) (*pb.OpensReply, error) {
	return o.s.Opens(ctx, req)
}

// Opens is OpenFiles.Opens, also served over the metadata RPC (internal/mdrpc).
func (s *Server) Opens(ctx context.Context, req *pb.OpensRequest) (*pb.OpensReply, error) {
	start := time.Now()
	defer func() { s.m.observe("opens", start, 0) }()
	if err := s.serving(); err != nil {
		return nil, err
	}
	if !s.group.IsLeader() {
		return nil, s.groupErr(&raftgroup.NotLeaderError{Leader: s.group.Leader()})
	}
	opened := fromPBs(req.Opened)
	if err := s.LDLM().NoteOpens(req.ClientId, opened, fromPBs(req.Closed), req.Replace); err != nil {
		return nil, err
	}
	switch {
	case len(opened) == 0:
		return &pb.OpensReply{}, nil
	case req.Replace:
		return &pb.OpensReply{}, s.noteOpensSeen(ctx)
	}
	inodes, err := s.afterOpens(ctx, opened)
	if err != nil {
		return nil, err
	}
	return &pb.OpensReply{Inodes: inodes}, nil
}

// afterOpens follows the recording of opens: it waits until the removals
// that began before are applied and returns each file's attributes then
// (an Inode without a fid: gone).
func (s *Server) afterOpens(ctx context.Context, fids []fid.FID) ([]*pb.Inode, error) {
	if err := s.noteOpensSeen(ctx); err != nil {
		return nil, err
	}
	if err := s.rm.waitBefore(ctx, s.rm.mark()); err != nil {
		return nil, err
	}
	out := make([]*pb.Inode, len(fids))
	for i, f := range fids {
		var ino *pb.Inode
		err := s.afterOI(ctx, func() (err error) {
			ino, err = s.t.Getattr(f, false)
			return err
		})
		if err != nil {
			ino = &pb.Inode{}
		}
		out[i] = ino
	}
	return out, nil
}

// noteCreateOpen records the file a create made or found as open by the
// client (CreateOp.open), with Opens' ordering: a removal that began
// before the open was recorded has been applied when the reply goes, and
// if it took the file the create answers ENOENT. When no removal was
// under way from before the create was proposed (quiet, taken then) until
// the open is recorded, none can have taken the file, and the read that
// would look for it is skipped. The reply cache's copy is not changed.
func (s *Server) noteCreateOpen(ctx context.Context, client uint64, r *pb.Reply, given uint64, idle bool) (*pb.Reply, error) {
	lm := s.LDLM()
	f := fid.FromPB(r.Inode.Fid)
	if lm == nil || lm.NoteOpens(client, []fid.FID{f}, nil, false) != nil {
		return r, nil // no session (a library client): nothing to record
	}
	out := proto.Clone(r).(*pb.Reply)
	out.Opened = true
	if idle && s.rm.unchanged(given) {
		return out, s.noteOpensSeen(ctx)
	}
	inodes, err := s.afterOpens(ctx, []fid.FID{f})
	if err != nil {
		return nil, err
	}
	if inodes[0].Fid == nil {
		out.Opened = false
		out.Errno, out.Message = int32(syscall.ENOENT), fmt.Sprintf("%s was removed through another client as it was opened", f)
	}
	return out, nil
}

// noteOpensSeen records, once per file system, that clients report open
// files: from then on new leaderships wait for their lists (markShared).
// The answer is kept in memory once true (it never goes back).
func (s *Server) noteOpensSeen(ctx context.Context) error {
	if s.opensSeen.Load() {
		return nil
	}
	if !s.t.OpensSeen() {
		r, err := s.propose(ctx, &pb.Command{Op: &pb.Command_OrphanRelease{OrphanRelease: &pb.OrphanReleaseOp{OpensSeen: true}}})
		if err != nil {
			return err
		}
		if r.Errno != 0 {
			return s.groupErr(fmt.Errorf("record that clients report open files: %s", r.Message))
		}
	}
	s.opensSeen.Store(true)
	return nil
}

func fromPBs(fs []*pb.FID) []fid.FID {
	out := make([]fid.FID, len(fs))
	for i, f := range fs {
		out[i] = fid.FromPB(f)
	}
	return out
}

// releaseShared destroys, while leading (and not in a new leadership's
// first OpenGrace), the shared orphans no client has open.
func (s *Server) releaseShared(lm *ldlm.Server) {
	defer s.wg.Done()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		if !s.group.IsLeader() || time.Since(s.group.LeaderSince()) < s.openGrace {
			continue
		}
		orphans, err := s.t.Orphans(0)
		if err != nil {
			continue
		}
		var done []*pb.FID
		for _, o := range orphans {
			if o.Client == mdt.SharedOrphanOwner && !lm.HeldOpen(o.FID, 0, s.orphanGrace) {
				done = append(done, o.FID.PB())
				if len(done) == 1024 {
					break
				}
			}
		}
		if len(done) == 0 {
			continue
		}
		ctx, cancel := s.ctx(10 * time.Second)
		r, err := s.propose(ctx, &pb.Command{Op: &pb.Command_OrphanRelease{OrphanRelease: &pb.OrphanReleaseOp{Fids: done}}})
		cancel()
		if err != nil || r.Errno != 0 {
			s.log.Warn("destroy removed files no client has open any more", "count", len(done), "err", err, "reply", r)
		}
	}
}
