package mdt

import (
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/obs"
	"nacre/internal/target"
)

// twoMDTs is MDT0 (with the root) and MDT1 of one file system, each its
// own state machine, as two MDSs drive them.
type twoMDTs struct {
	m0, m1 *Direct
	db1    *kv.DB
	now    int64
}

func newTwoMDTs(t *testing.T) *twoMDTs {
	t.Helper()
	open := func(index uint32, seq uint64) (*Direct, *kv.DB) {
		db, err := kv.OpenMem()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		tg, err := Open(db, target.Identity{Fsname: "test", Kind: target.MDT, Index: index}, obs.Discard())
		if err != nil {
			t.Fatal(err)
		}
		d := NewDirect(tg)
		if err := d.Setup(seq, []uint32{0}, fid.OSTSeq(index), 1000); err != nil {
			t.Fatal(err)
		}
		return d, db
	}
	w := &twoMDTs{now: 1_000_000_000}
	w.m0, _ = open(0, fid.SeqNormal)
	w.m1, w.db1 = open(1, fid.SeqNormal+64)
	return w
}

func (w *twoMDTs) do(t *testing.T, d *Direct, cmd *pb.Command) *pb.Reply {
	t.Helper()
	w.now += 1000
	cmd.NowNs = w.now
	r, err := d.Do(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// prepareMkdir is step 1 of a remote mkdir of /name on MDT1.
func (w *twoMDTs) prepareMkdir(t *testing.T, txid uint64, name string) *pb.Reply {
	t.Helper()
	ino, access, def, err := w.m0.T.RemoteDir(fid.Root, name, 0o755, 0o022, nil, w.now)
	if err != nil {
		t.Fatal(err)
	}
	return w.do(t, w.m1, &pb.Command{Op: &pb.Command_DtxPrepare{DtxPrepare: &pb.DtxPrepareOp{
		Txid: txid, Coordinator: 0, Kind: pb.DtxKind_DTX_MKDIR, Parent: fid.Root.PB(), Name: []byte(name), Inode: ino, AclAccess: access, AclDefault: def}}})
}

// decideMkdir is step 2: the client's command, on MDT0.
func (w *twoMDTs) decideMkdir(t *testing.T, req, txid uint64, name string, remote *pb.Inode) *pb.Reply {
	t.Helper()
	return w.do(t, w.m0, &pb.Command{ClientId: 7, RequestId: req, Op: &pb.Command_Create{Create: &pb.CreateOp{
		Parent: fid.Root.PB(), Name: []byte(name), Mode: syscall.S_IFDIR | 0o755, Remote: remote, Txid: txid}}})
}

func (w *twoMDTs) finish(t *testing.T, txid uint64, committed bool) {
	t.Helper()
	if r := w.do(t, w.m1, &pb.Command{Op: &pb.Command_DtxFinish{DtxFinish: &pb.DtxFinishOp{Txid: txid, Committed: committed}}}); r.Errno != 0 {
		t.Fatalf("finish: %s", r.Message)
	}
}

func records(t *testing.T, d *Direct) int {
	t.Helper()
	recs, err := d.T.DtxRecords()
	if err != nil {
		t.Fatal(err)
	}
	return len(recs)
}

func TestRemoteMkdirCommits(t *testing.T) {
	w := newTwoMDTs(t)
	txid := DtxID(5, 0, 1)
	prep := w.prepareMkdir(t, txid, "r")
	if prep.Errno != 0 || fid.FromPB(prep.Inode.Fid).Seq < fid.SeqNormal+64 {
		t.Fatalf("prepare: %v", prep)
	}
	if again := w.prepareMkdir(t, txid, "r"); fid.FromPB(again.Inode.Fid) != fid.FromPB(prep.Inode.Fid) {
		t.Fatalf("a retried prepare made another directory: %v, first %v", again.Inode.Fid, prep.Inode.Fid)
	}
	if n := w.m1.T.Inodes(); n != 1 {
		t.Fatalf("MDT1 holds %d objects after two prepares of one transaction, want 1", n)
	}
	if r := w.decideMkdir(t, 1, txid, "r", prep.Inode); r.Errno != 0 {
		t.Fatalf("decide: %s", r.Message)
	}
	w.finish(t, txid, true)
	if n := records(t, w.m1); n != 0 {
		t.Fatalf("MDT1 keeps %d records after finishing", n)
	}
	if n := records(t, w.m0); n != 1 {
		t.Fatalf("MDT0 keeps %d outcomes before forgetting, want 1", n)
	}
	w.do(t, w.m0, &pb.Command{Op: &pb.Command_DtxForget{DtxForget: &pb.DtxForgetOp{Txid: txid}}})
	if n := records(t, w.m0); n != 0 {
		t.Fatalf("MDT0 keeps %d outcomes after forgetting", n)
	}
	got, err := w.m0.T.Lookup(fid.Root, "r", nil)
	if err != nil || got.Flags&uint32(pb.InodeFlag_INODE_FLAG_REMOTE) == 0 || fid.FromPB(got.Fid) != fid.FromPB(prep.Inode.Fid) {
		t.Fatalf("lookup on MDT0: %v %v, want a remote entry for %v", got, err, prep.Inode.Fid)
	}
	root, _ := w.m0.T.Getattr(fid.Root, false)
	if root.Nlink != 3 {
		t.Fatalf("root nlink %d with one remote subdirectory, want 3", root.Nlink)
	}
	dir, err := w.m1.T.Getattr(fid.FromPB(prep.Inode.Fid), true)
	if err != nil || dir.Mode != syscall.S_IFDIR|0o755 || len(dir.Links) != 1 || !dir.Links[0].Remote || fid.FromPB(dir.Links[0].Parent) != fid.Root {
		t.Fatalf("directory on MDT1: %v %v", dir, err)
	}
	paths, tails, err := w.m1.T.Fid2Path(fid.FromPB(prep.Inode.Fid))
	if err != nil || len(paths) != 0 || len(tails) != 1 || string(tails[0].Path) != "r" || fid.FromPB(tails[0].Parent) != fid.Root {
		t.Fatalf("fid2path on MDT1: %v %v %v, want the tail r below the root", paths, tails, err)
	}
}

// TestResolveAbortsWhatWasNotDecided is the coordinator's MDS dying
// between the steps: the participant asks, the coordinator aborts, and
// the late decision fails.
func TestResolveAbortsWhatWasNotDecided(t *testing.T) {
	w := newTwoMDTs(t)
	txid := DtxID(6, 0, 1)
	prep := w.prepareMkdir(t, txid, "r")
	res := w.do(t, w.m0, &pb.Command{Op: &pb.Command_DtxResolve{DtxResolve: &pb.DtxResolveOp{Txid: txid, Participant: 1}}})
	if res.Errno != int32(syscall.ECANCELED) {
		t.Fatalf("resolve of an undecided transaction: %v, want ECANCELED", res)
	}
	if r := w.decideMkdir(t, 1, txid, "r", prep.Inode); r.Errno == 0 {
		t.Fatal("a decision after the abort committed")
	}
	if _, err := w.m0.T.Lookup(fid.Root, "r", nil); ErrnoOf(err) != syscall.ENOENT {
		t.Fatalf("the name exists after the abort: %v", err)
	}
	w.finish(t, txid, false)
	if n := w.m1.T.Inodes(); n != 0 {
		t.Fatalf("MDT1 holds %d objects after the abort, want 0", n)
	}
	// Resolving again gives the same answer.
	if res := w.do(t, w.m0, &pb.Command{Op: &pb.Command_DtxResolve{DtxResolve: &pb.DtxResolveOp{Txid: txid, Participant: 1}}}); res.Errno != int32(syscall.ECANCELED) {
		t.Fatalf("second resolve: %v", res)
	}
}

func TestRemoteMkdirOntoAnExistingName(t *testing.T) {
	w := newTwoMDTs(t)
	create(t, w.m0, 8, 1, fid.Root, "r", nil, []uint32{0})
	txid := DtxID(7, 0, 1)
	prep := w.prepareMkdir(t, txid, "x") // the name is taken by the time step 2 runs
	if r := w.decideMkdir(t, 1, txid, "r", prep.Inode); r.Errno != int32(syscall.EEXIST) {
		t.Fatalf("decide onto an existing name: %v, want EEXIST", r)
	}
	res := w.do(t, w.m0, &pb.Command{Op: &pb.Command_DtxResolve{DtxResolve: &pb.DtxResolveOp{Txid: txid, Participant: 1}}})
	if res.Errno != int32(syscall.ECANCELED) {
		t.Fatalf("the refused decision is not recorded as aborted: %v", res)
	}
	w.finish(t, txid, false)
	if n := w.m1.T.Inodes(); n != 0 {
		t.Fatalf("MDT1 holds %d objects, want 0", n)
	}
}

func TestRemoteRmdir(t *testing.T) {
	w := newTwoMDTs(t)
	mk := DtxID(1, 0, 1)
	prep := w.prepareMkdir(t, mk, "r")
	w.decideMkdir(t, 1, mk, "r", prep.Inode)
	w.finish(t, mk, true)
	rf := fid.FromPB(prep.Inode.Fid)

	// Names that lead to another MDT leave only through a transaction.
	if r := w.do(t, w.m0, &pb.Command{ClientId: 7, RequestId: 2, Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte("r"), Dir: true}}}); r.Errno != int32(syscall.EXDEV) {
		t.Fatalf("plain rmdir of a remote entry: %v, want EXDEV", r)
	}
	if r := w.do(t, w.m0, &pb.Command{ClientId: 7, RequestId: 3, Op: &pb.Command_Rename{Rename: &pb.RenameOp{SrcParent: fid.Root.PB(), SrcName: []byte("r"), DstParent: fid.Root.PB(), DstName: []byte("s")}}}); r.Errno != int32(syscall.EXDEV) {
		t.Fatalf("rename of a remote entry: %v, want EXDEV", r)
	}

	prepRm := func(txid uint64) *pb.Reply {
		return w.do(t, w.m1, &pb.Command{Op: &pb.Command_DtxPrepare{DtxPrepare: &pb.DtxPrepareOp{
			Txid: txid, Coordinator: 0, Kind: pb.DtxKind_DTX_RMDIR, Parent: fid.Root.PB(), Name: []byte("r"), Fid: rf.PB()}}})
	}
	create(t, w.m1, 8, 1, rf, "f", nil, []uint32{0})
	if r := prepRm(DtxID(2, 0, 1)); r.Errno != int32(syscall.ENOTEMPTY) {
		t.Fatalf("prepare rmdir of a directory with a file: %v, want ENOTEMPTY", r)
	}
	w.do(t, w.m1, &pb.Command{ClientId: 8, RequestId: 2, Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: rf.PB(), Name: []byte("f")}}})

	// An rmdir that is aborted gives the directory back.
	ab := DtxID(3, 0, 1)
	if r := prepRm(ab); r.Errno != 0 {
		t.Fatalf("prepare rmdir: %v", r)
	}
	if r := create(t, w.m1, 8, 3, rf, "g", nil, []uint32{0}); r.Errno != int32(syscall.ENOENT) {
		t.Fatalf("create in a directory an rmdir holds: %v, want ENOENT", r)
	}
	// The hold outlives a restart of the MDT.
	tg, err := Open(w.db1, target.Identity{Fsname: "test", Kind: target.MDT, Index: 1}, obs.Discard())
	if err != nil {
		t.Fatal(err)
	}
	w.m1 = NewDirect(tg)
	if r := create(t, w.m1, 8, 4, rf, "g", nil, []uint32{0}); r.Errno != int32(syscall.ENOENT) {
		t.Fatalf("create after a restart in a directory an rmdir holds: %v, want ENOENT", r)
	}
	w.finish(t, ab, false)
	if r := create(t, w.m1, 8, 5, rf, "g", nil, []uint32{0}); r.Errno != 0 {
		t.Fatalf("create after the rmdir was aborted: %v", r)
	}
	w.do(t, w.m1, &pb.Command{ClientId: 8, RequestId: 6, Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: rf.PB(), Name: []byte("g")}}})

	// A committed one removes both halves.
	rm := DtxID(4, 0, 1)
	prep = prepRm(rm)
	if prep.Errno != 0 {
		t.Fatalf("prepare rmdir: %v", prep)
	}
	if again := prepRm(rm); again.Errno != 0 || fid.FromPB(again.Inode.GetFid()) != rf {
		t.Fatalf("a retried prepare of the rmdir answered %v, not the directory", again)
	}
	r := w.do(t, w.m0, &pb.Command{ClientId: 7, RequestId: 4, Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte("r"), Dir: true, Remote: prep.Inode, Txid: rm}}})
	if r.Errno != 0 {
		t.Fatalf("decide rmdir: %v", r)
	}
	w.finish(t, rm, true)
	if _, err := w.m0.T.Lookup(fid.Root, "r", nil); ErrnoOf(err) != syscall.ENOENT {
		t.Fatalf("the name is still there: %v", err)
	}
	if _, err := w.m1.T.Getattr(rf, false); ErrnoOf(err) != syscall.ENOENT {
		t.Fatalf("the directory is still there: %v", err)
	}
	if root, _ := w.m0.T.Getattr(fid.Root, false); root.Nlink != 2 {
		t.Fatalf("root nlink %d, want 2", root.Nlink)
	}
	if n := records(t, w.m1); n != 0 {
		t.Fatalf("MDT1 keeps %d records", n)
	}
}

// TestOnlyMDT0HoldsTheRoot: another MDT starts empty.
func TestOnlyMDT0HoldsTheRoot(t *testing.T) {
	w := newTwoMDTs(t)
	if _, err := w.m1.T.Getattr(fid.Root, false); ErrnoOf(err) != syscall.ENOENT {
		t.Fatalf("MDT1 has a root: %v", err)
	}
	if w.m1.T.Inodes() != 0 || w.m0.T.Inodes() != 1 {
		t.Fatalf("objects: MDT0 %d, MDT1 %d; want 1 and 0", w.m0.T.Inodes(), w.m1.T.Inodes())
	}
}

func TestRemoteRename(t *testing.T) {
	w := newTwoMDTs(t)
	mk := DtxID(1, 0, 1)
	prep := w.prepareMkdir(t, mk, "r")
	w.decideMkdir(t, 1, mk, "r", prep.Inode)
	w.finish(t, mk, true)
	rf := fid.FromPB(prep.Inode.Fid)
	d := w.do(t, w.m0, &pb.Command{ClientId: 7, RequestId: 2, Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte("d"), Mode: syscall.S_IFDIR | 0o755}}})
	df := fid.FromPB(d.Inode.Fid)
	create(t, w.m0, 7, 3, df, "taken", nil, []uint32{0})

	prepRename := func(txid uint64, to fid.FID, name string) *pb.Reply {
		return w.do(t, w.m1, &pb.Command{Op: &pb.Command_DtxPrepare{DtxPrepare: &pb.DtxPrepareOp{
			Txid: txid, Coordinator: 0, Kind: pb.DtxKind_DTX_RENAME, Parent: to.PB(), Name: []byte(name), Fid: rf.PB(),
			OldParent: fid.Root.PB(), OldName: []byte("r")}}})
	}
	decide := func(req, txid uint64, to fid.FID, name string, remote *pb.Inode) *pb.Reply {
		return w.do(t, w.m0, &pb.Command{ClientId: 7, RequestId: req, Op: &pb.Command_Rename{Rename: &pb.RenameOp{
			SrcParent: fid.Root.PB(), SrcName: []byte("r"), DstParent: to.PB(), DstName: []byte(name), Remote: remote, Txid: txid}}})
	}
	// Onto a name that exists: refused, aborted, the linkEA unchanged.
	ab := DtxID(2, 0, 1)
	p := prepRename(ab, df, "taken")
	if r := decide(4, ab, df, "taken", p.Inode); r.Errno != int32(syscall.EXDEV) {
		t.Fatalf("remote rename onto an existing name: %v, want EXDEV", r)
	}
	w.finish(t, ab, false)
	if dir, _ := w.m1.T.Getattr(rf, true); fid.FromPB(dir.Links[0].Parent) != fid.Root || string(dir.Links[0].Name) != "r" {
		t.Fatalf("an aborted rename changed the linkEA: %v", dir.Links)
	}
	// To another directory of MDT0: both halves follow.
	mv := DtxID(3, 0, 1)
	p = prepRename(mv, df, "s")
	if p.Errno != 0 {
		t.Fatalf("prepare: %v", p)
	}
	// One transaction at a time on a directory: another waits.
	if r := prepRename(DtxID(9, 0, 1), df, "t"); r.Errno != int32(syscall.EAGAIN) {
		t.Fatalf("a second prepare while the first is pending: %v, want EAGAIN", r)
	}
	if r := decide(5, mv, df, "s", p.Inode); r.Errno != 0 {
		t.Fatalf("decide: %v", r)
	}
	w.finish(t, mv, true)
	got, err := w.m0.T.Lookup(df, "s", nil)
	if err != nil || fid.FromPB(got.Fid) != rf || got.Flags&uint32(pb.InodeFlag_INODE_FLAG_REMOTE) == 0 {
		t.Fatalf("lookup of the new name: %v %v", got, err)
	}
	if _, err := w.m0.T.Lookup(fid.Root, "r", nil); ErrnoOf(err) != syscall.ENOENT {
		t.Fatalf("the old name is still there: %v", err)
	}
	dir, _ := w.m1.T.Getattr(rf, true)
	if len(dir.Links) != 1 || fid.FromPB(dir.Links[0].Parent) != df || string(dir.Links[0].Name) != "s" || !dir.Links[0].Remote {
		t.Fatalf("linkEA after the move: %v, want d/s (remote)", dir.Links)
	}
	root, _ := w.m0.T.Getattr(fid.Root, false)
	dd, _ := w.m0.T.Getattr(df, false)
	if root.Nlink != 3 || dd.Nlink != 3 {
		t.Fatalf("nlink root %d (want 3: d), d %d (want 3: s)", root.Nlink, dd.Nlink)
	}
	if n := records(t, w.m1); n != 0 {
		t.Fatalf("MDT1 keeps %d records", n)
	}
}
