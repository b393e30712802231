package mdt

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// Entry is one committed Raft log entry; Data is nil for Raft's own entries.
type Entry struct {
	Index uint64
	Data  []byte
}

// opError is a POSIX failure of one operation; it becomes Reply.errno.
type opError struct {
	errno syscall.Errno
	msg   string
	kind  error // a sentinel it also is (ErrStaleOI), or nil
}

func (e *opError) Error() string { return e.msg }

// Unwrap lets errors.Is(err, syscall.ENOENT) work on read-side errors.
func (e *opError) Unwrap() []error {
	if e.kind != nil {
		return []error{e.errno, e.kind}
	}
	return []error{e.errno}
}

// ErrStaleOI is an OI entry that leads to no object of its FID: a store
// restored from a file-level backup before its OI scrub ends, or damage.
// The MDS waits for a scrub under way to end and tries again.
var ErrStaleOI = errors.New("stale object index entry")

func staleOI(format string, args ...any) error {
	err := errf(syscall.EIO, format, args...).(*opError)
	err.kind = ErrStaleOI
	return err
}

func errf(errno syscall.Errno, format string, args ...any) error {
	// Messages travel in protobuf strings (Reply.message), which must be
	// UTF-8; names (which need not be) are quoted with %q, and this keeps
	// anything else from breaking a reply.
	return &opError{errno: errno, msg: strings.ToValidUTF8(fmt.Sprintf(format, args...), "\uFFFD") + ": " + errno.Error()}
}

// ErrnoOf extracts the errno of an operation error (EIO for others).
func ErrnoOf(err error) syscall.Errno {
	var oe *opError
	if errors.As(err, &oe) {
		return oe.errno
	}
	var e syscall.Errno
	if errors.As(err, &e) {
		return e
	}
	return syscall.EIO
}

func errReply(err error) *pb.Reply {
	return &pb.Reply{Errno: int32(ErrnoOf(err)), Message: strings.ToValidUTF8(err.Error(), "\uFFFD")}
}

// Apply applies committed entries in log order, in one atomic batch that
// also records the applied index, and returns one reply per entry (nil for
// Raft's own entries). An error means the store failed; the caller must
// stop the replica (the entries will be applied again after a restart).
func (t *Target) Apply(entries []Entry) ([]*pb.Reply, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.db.NewBatch()
	defer b.Close()
	out := make([]*pb.Reply, len(entries))
	st := &applyState{dirtyPools: map[uint32]bool{}}
	for i, e := range entries {
		if e.Index <= t.applied || e.Data == nil {
			continue
		}
		cmd := &pb.Command{}
		if err := proto.Unmarshal(e.Data, cmd); err != nil {
			out[i] = errReply(errf(syscall.EINVAL, "undecodable command at index %d", e.Index))
			continue
		}
		out[i] = t.applyCmd(b, st, cmd, e.Index)
	}
	last := entries[len(entries)-1].Index
	if last > t.applied {
		t.applied = last
	}
	b.Set(keyApplied, putU64(t.applied))
	b.Set(keyNextLocal, putU64(t.nextLocal))
	b.Set(keyInodes, putU64(t.inodes))
	if st.dirtySeq {
		b.Set(keyFidSeq, t.seq.encode())
	}
	for ost := range st.dirtyPools {
		b.Set(poolKey(ost), t.pools[ost].encode())
	}
	if err := b.Commit(false); err != nil {
		return nil, fmt.Errorf("%s: commit applied entries up to %d: %w", t.id.Name(), last, err)
	}
	if st.queued != nil {
		t.dq.noteQueued(st.queued) // after the commit (destroyQueueState)
	}
	return out, nil
}

// applyState collects what a batch changed in the cached singletons.
type applyState struct {
	dirtySeq   bool
	dirtyPools map[uint32]bool
	queued     []byte // the least key of an OST object queued for destruction
}

func (st *applyState) noteQueued(k []byte) {
	if st.queued == nil || bytes.Compare(k, st.queued) < 0 {
		st.queued = k
	}
}

func (t *Target) applyCmd(b *kv.Batch, st *applyState, cmd *pb.Command, index uint64) *pb.Reply {
	if cmd.ClientId != 0 {
		t.trimReplies(b, cmd.ClientId, cmd.AckedBelow)
		if t.hasReply(cmd.ClientId, cmd.RequestId) {
			if v, err := b.Get(replyKey(cmd.ClientId, cmd.RequestId)); err == nil {
				r := &pb.Reply{}
				if proto.Unmarshal(v, r) == nil {
					return r
				}
			}
		}
	}
	x := &txn{t: t, b: b, st: st, cmd: cmd, now: cmd.NowNs, index: index, cred: cmd.Cred}
	if x.cred == nil {
		x.cred = &pb.Cred{} // internal commands run as root
	}
	r, err := x.run()
	if err != nil {
		r = errReply(err)
	}
	x.recordOutcome(cmd, err == nil)
	r.Index = index
	r.TimeNs = cmd.NowNs
	if cmd.ClientId != 0 {
		b.Set(replyKey(cmd.ClientId, cmd.RequestId), mustMarshal(r))
		t.noteReply(cmd.ClientId, cmd.RequestId)
	}
	return r
}

// trimReplies drops cached replies the client has acknowledged. The
// watermark and the index of cached ids are in memory only: the index is
// rebuilt from the cached replies at open, and a watermark lost in a
// restart only delays trimming until the client's next request.
func (t *Target) trimReplies(b *kv.Batch, client, ackedBelow uint64) {
	w := t.c.acks[client]
	if ackedBelow <= w {
		return
	}
	if ids := t.c.replies[client]; len(ids) > 0 {
		for id := range ids {
			if id < ackedBelow {
				b.Delete(replyKey(client, id))
				delete(ids, id)
			}
		}
		if len(ids) == 0 {
			delete(t.c.replies, client)
		}
	}
	t.c.acks[client] = ackedBelow
}

// ReplyFor returns the cached reply of a request that was already applied,
// so that a retry gets its original answer without a new log entry.
func (t *Target) ReplyFor(client, req uint64) (*pb.Reply, bool) {
	if client == 0 {
		return nil, false
	}
	t.mu.RLock()
	has := t.hasReply(client, req)
	t.mu.RUnlock()
	if !has {
		return nil, false
	}
	v, err := t.db.Get(replyKey(client, req))
	if err != nil {
		return nil, false
	}
	r := &pb.Reply{}
	if proto.Unmarshal(v, r) != nil {
		return nil, false
	}
	return r, true
}

// txn is one command being applied.
type txn struct {
	t     *Target
	b     *kv.Batch
	st    *applyState
	cmd   *pb.Command
	now   int64
	index uint64 // the command's log index
	cred  *pb.Cred
}

func (x *txn) run() (*pb.Reply, error) {
	switch op := x.cmd.Op.(type) {
	case *pb.Command_Create:
		return x.create(op.Create)
	case *pb.Command_Link:
		return x.link(op.Link)
	case *pb.Command_Unlink:
		return x.unlink(op.Unlink)
	case *pb.Command_Rename:
		return x.rename(op.Rename)
	case *pb.Command_Setattr:
		return x.setattr(op.Setattr)
	case *pb.Command_Setxattr:
		return x.setxattr(op.Setxattr)
	case *pb.Command_Removexattr:
		return x.removexattr(op.Removexattr)
	case *pb.Command_SetLayout:
		return x.setLayout(op.SetLayout)
	case *pb.Command_PoolExtend:
		return x.poolExtend(op.PoolExtend)
	case *pb.Command_PoolReset:
		return x.poolReset(op.PoolReset)
	case *pb.Command_SeqGrant:
		return x.seqGrant(op.SeqGrant)
	case *pb.Command_DestroyDone:
		return x.destroyDone(op.DestroyDone)
	case *pb.Command_TrimReplies:
		return x.trimOldReplies(op.TrimReplies)
	case *pb.Command_LfsckRepair:
		return x.lfsckRepair(op.LfsckRepair)
	case *pb.Command_LfsckState:
		return x.lfsckState(op.LfsckState)
	case *pb.Command_Fault:
		return x.lfsckFault(op.Fault)
	case *pb.Command_OpenUnlink, *pb.Command_OpenRename, *pb.Command_Tmpfile, *pb.Command_OrphanRelease:
		return x.openFiles()
	case *pb.Command_DtxPrepare:
		return x.dtxPrepare(op.DtxPrepare)
	case *pb.Command_DtxFinish:
		return x.dtxFinish(op.DtxFinish)
	case *pb.Command_DtxResolve:
		return x.dtxResolve(op.DtxResolve)
	case *pb.Command_DtxForget:
		return x.dtxForget(op.DtxForget)
	case *pb.Command_RemoteEntry:
		return x.remoteEntry(op.RemoteEntry)
	}
	return nil, errf(syscall.EINVAL, "unknown command")
}

// get loads an object by FID through the OI and checks its LMA.
func (x *txn) get(f fid.FID) (uint64, *pb.Inode, error) {
	if local, ino, ok := x.t.cachedGet(f); ok {
		return local, ino, nil
	}
	local, ino, err := getInode(x.b, f)
	if err == nil {
		x.t.cacheInode(local, cloneInode(ino))
	}
	return local, ino, err
}

func getInode(r kv.Reader, f fid.FID) (uint64, *pb.Inode, error) {
	v, err := r.Get(OIKey(f))
	if errors.Is(err, kv.ErrNotFound) {
		return 0, nil, errf(syscall.ENOENT, "no object %s", f)
	}
	if err != nil {
		return 0, nil, errf(syscall.EIO, "read OI entry of %s: %v", f, err)
	}
	local := u64(v)
	v, err = r.Get(ObjKey(local))
	if errors.Is(err, kv.ErrNotFound) {
		return 0, nil, staleOI("OI maps %s to missing object %d (run `nacre lfsck start -t scrub`)", f, local)
	}
	if err != nil {
		return 0, nil, errf(syscall.EIO, "read object %d: %v", local, err)
	}
	ino := &pb.Inode{}
	if err := proto.Unmarshal(v, ino); err != nil {
		return 0, nil, errf(syscall.EIO, "object %d of %s is corrupt: %v", local, f, err)
	}
	if fid.FromPB(ino.Fid) != f {
		return 0, nil, staleOI("OI maps %s to object %d whose LMA says %s (run `nacre lfsck start -t scrub`)", f, local, fid.FromPB(ino.Fid))
	}
	return local, ino, nil
}

func (x *txn) put(local uint64, ino *pb.Inode) {
	ino.Flags &^= flagNoXattrs // a reply's, never stored
	x.b.Set(ObjKey(local), mustMarshal(ino))
	x.t.cacheInode(local, cloneInode(ino))
	if local == rootLocal {
		x.t.rootLayout = ino.Layout
	}
}

// lookup finds a name in a directory.
func lookupName(r kv.Reader, parentLocal uint64, name string) (fid.FID, uint8, bool, error) {
	v, err := r.Get(DirentKey(parentLocal, name))
	if errors.Is(err, kv.ErrNotFound) {
		return fid.FID{}, 0, false, nil
	}
	if err != nil {
		return fid.FID{}, 0, false, errf(syscall.EIO, "read entry %q: %v", name, err)
	}
	f, typ, ok := decodeDirent(v)
	if !ok {
		return fid.FID{}, 0, false, errf(syscall.EIO, "entry %q is corrupt", name)
	}
	return f, typ, true, nil
}

func dirEmpty(r kv.Reader, local uint64) (bool, error) {
	p := DirentPrefix(local)
	it, err := r.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return false, errf(syscall.EIO, "scan directory: %v", err)
	}
	defer it.Close()
	return !it.First(), nil
}

func (x *txn) allocLocal() uint64 {
	l := x.t.nextLocal
	x.t.nextLocal++
	return l
}

func (x *txn) allocFID() (fid.FID, error) {
	s := &x.t.seq
	if s.Cur == 0 || s.Next >= fid.Width {
		if len(s.Ranges) == 0 {
			return fid.FID{}, errf(syscall.ENOSPC, "no FID sequence granted to %s (is the MGS reachable?)", x.t.id.Label())
		}
		r := &s.Ranges[0]
		s.Cur = r[0]
		r[0]++
		if r[0] >= r[1] {
			s.Ranges = s.Ranges[1:]
		}
		s.Next = 1
	}
	f := fid.FID{Seq: s.Cur, Oid: s.Next}
	s.Next++
	x.st.dirtySeq = true
	return f, nil
}

// destroy removes an object whose last name is gone: OI, object, xattrs,
// and queues its OST objects for destruction.
func (x *txn) destroy(local uint64, ino *pb.Inode) {
	x.t.uncacheInode(fid.FromPB(ino.Fid))
	x.b.Delete(OIKey(fid.FromPB(ino.Fid)))
	x.b.Delete(ObjKey(local))
	x.deleteXattrs(local)
	x.queueDestroy(ino.Layout)
	if x.t.inodes > 0 {
		x.t.inodes--
	}
}

// deleteXattrs removes an object's xattrs with point deletes: most objects
// have none, and a range tombstone per unlink would slow every later read.
func (x *txn) deleteXattrs(local uint64) {
	p := xattrPrefix(local)
	it, err := x.b.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return
	}
	var keys [][]byte
	for it.First(); it.Valid(); it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()...))
	}
	it.Close()
	for _, k := range keys {
		x.b.Delete(k)
	}
}

func (x *txn) queueDestroy(l *pb.Layout) {
	if l == nil {
		return
	}
	for _, o := range l.Objects {
		if o.Seq == 0 && o.Oid == 0 {
			continue
		}
		k := unlinkKey(o.Ost, o.Seq, o.Oid)
		x.b.Set(k, nil)
		x.st.noteQueued(k)
	}
}
