package mdt

import (
	"time"

	"bytes"
	"fmt"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/obs"
	"nacre/internal/target"
)

func create(t *testing.T, d *Direct, client, req uint64, parent fid.FID, name string, l *pb.Layout, osts []uint32) *pb.Reply {
	t.Helper()
	r, err := d.Do(&pb.Command{ClientId: client, RequestId: req, Op: &pb.Command_Create{Create: &pb.CreateOp{
		Parent: parent.PB(), Name: []byte(name), Mode: syscall.S_IFREG | 0o644, Exclusive: true, Layout: l, Osts: osts}}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRetriedRequestGetsOriginalReply is exactly-once: the same (client,
// request) applied again returns the first reply and changes nothing.
func TestRetriedRequestGetsOriginalReply(t *testing.T) {
	d := newDirect(t, 1)
	first := create(t, d, 9, 1, fid.Root, "f", nil, []uint32{0})
	if first.Errno != 0 {
		t.Fatal(first.Message)
	}
	inodes := d.T.Inodes()
	again := create(t, d, 9, 1, fid.Root, "f", nil, []uint32{0})
	if again.Errno != 0 || !proto.Equal(again.Inode, first.Inode) {
		t.Fatalf("retry got %v, want the original reply %v", again, first)
	}
	if d.T.Inodes() != inodes {
		t.Fatal("retry executed the create a second time")
	}
	if r, ok := d.T.ReplyFor(9, 1); !ok || r.Index != first.Index {
		t.Fatal("reply cache lookup for the pre-check failed")
	}
	// A new request id with the same name is a new operation: EEXIST.
	if r := create(t, d, 9, 2, fid.Root, "f", nil, []uint32{0}); r.Errno != int32(syscall.EEXIST) {
		t.Fatalf("new request: %v", r)
	}
	// Acknowledged replies are trimmed.
	d.Do(&pb.Command{ClientId: 9, RequestId: 3, AckedBelow: 3, Op: &pb.Command_Setattr{Setattr: &pb.SetattrOp{Fid: fid.Root.PB()}}})
	if _, ok := d.T.ReplyFor(9, 1); ok {
		t.Fatal("acknowledged reply kept")
	}
}

func TestLayoutTakesObjectsFromPools(t *testing.T) {
	d := newDirect(t, 4)
	before := d.T.Pools()
	all := []uint32{2, 3, 0, 1}
	r := create(t, d, 1, 1, fid.Root, "wide", &pb.Layout{StripeCount: -1, StripeSize: 65536}, all)
	l := r.Inode.Layout
	if r.Errno != 0 || l.StripeCount != 4 || len(l.Objects) != 4 || l.StripeSize != 65536 {
		t.Fatalf("stripe -1: %v", r)
	}
	if l.Objects[0].Ost != 2 || l.Objects[1].Ost != 3 {
		t.Fatalf("objects not in the leader's order: %v", l.Objects)
	}
	after := d.T.Pools()
	for ost, p := range after {
		if p.Next != before[ost].Next+1 {
			t.Fatalf("OST%d pool next %d -> %d", ost, before[ost].Next, p.Next)
		}
	}
	r = create(t, d, 1, 2, fid.Root, "two", &pb.Layout{StripeCount: 2}, all)
	if len(r.Inode.Layout.Objects) != 2 || r.Inode.Layout.StripeSize != 1<<20 {
		t.Fatalf("stripe 2: %v", r.Inode.Layout)
	}
	// Directory default layouts are inherited by files and subdirectories.
	dir, _ := d.Do(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte("d"), Mode: syscall.S_IFDIR | 0o755}}})
	d.Do(&pb.Command{Op: &pb.Command_SetLayout{SetLayout: &pb.SetLayoutOp{Fid: dir.Inode.Fid, Layout: &pb.Layout{StripeCount: 3, StripeSize: 131072, StripeOffset: -1}}}})
	sub, _ := d.Do(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: dir.Inode.Fid, Name: []byte("s"), Mode: syscall.S_IFDIR | 0o755}}})
	r = create(t, d, 1, 3, fid.FromPB(sub.Inode.Fid), "f", nil, all)
	if got := r.Inode.Layout; len(got.Objects) != 3 || got.StripeSize != 131072 {
		t.Fatalf("inherited layout %v", got)
	}
	if _, err := layoutValid(r.Inode.Layout); err != nil {
		t.Fatal(err)
	}
}

func layoutValid(l *pb.Layout) (bool, error) {
	seen := map[uint32]bool{}
	for _, o := range l.Objects {
		if seen[o.Ost] {
			return false, fmt.Errorf("two stripes on OST%d", o.Ost)
		}
		seen[o.Ost] = true
	}
	return true, nil
}

func TestEmptyPoolsGiveENOSPCAndPartialStriping(t *testing.T) {
	d := newDirect(t, 0)
	d.Setup(fid.SeqNormal+100, []uint32{0, 1}, fid.OSTSeq(0), 1)
	r := create(t, d, 1, 1, fid.Root, "a", &pb.Layout{StripeCount: 2}, []uint32{0, 1})
	if r.Errno != 0 || len(r.Inode.Layout.Objects) != 2 {
		t.Fatalf("first file: %v", r)
	}
	r = create(t, d, 1, 2, fid.Root, "b", nil, []uint32{0, 1})
	if r.Errno != int32(syscall.ENOSPC) {
		t.Fatalf("empty pools: %v", r)
	}
	// After a reset+extend of one pool a wide file gets what there is.
	d.Do(&pb.Command{Op: &pb.Command_PoolExtend{PoolExtend: &pb.PoolExtendOp{Ost: 1, Seq: fid.OSTSeq(0), End: 10}}})
	r = create(t, d, 1, 3, fid.Root, "c", &pb.Layout{StripeCount: -1}, []uint32{0, 1})
	if r.Errno != 0 || len(r.Inode.Layout.Objects) != 1 || r.Inode.Layout.Objects[0].Ost != 1 {
		t.Fatalf("degraded striping: %v", r)
	}
}

func TestPoolResetDropsUnusedObjects(t *testing.T) {
	d := newDirect(t, 1)
	p := d.T.Pools()[0]
	if p.Avail() == 0 {
		t.Fatal("setup made no pool")
	}
	d.Do(&pb.Command{Op: &pb.Command_PoolReset{PoolReset: &pb.PoolResetOp{Ost: 0, Seq: p.Seq}}})
	q := d.T.Pools()[0]
	if q.Next != p.Next || q.Avail() != 0 {
		t.Fatalf("after reset %+v (before %+v)", q, p)
	}
	if r, _ := d.Do(&pb.Command{Op: &pb.Command_PoolExtend{PoolExtend: &pb.PoolExtendOp{Ost: 5, Seq: 1, End: 10}}}); r.Errno == 0 {
		t.Fatal("extending a pool that was never reset must fail")
	}
}

func TestUnlinkQueuesObjectsForDestroy(t *testing.T) {
	d := newDirect(t, 2)
	r := create(t, d, 1, 1, fid.Root, "f", &pb.Layout{StripeCount: 2}, []uint32{0, 1})
	objs := r.Inode.Layout.Objects
	if q, _ := d.T.DestroyQueue(10); len(q) != 0 {
		t.Fatalf("queue not empty: %v", q)
	}
	d.Do(&pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte("f")}}})
	q, _ := d.T.DestroyQueue(10)
	if len(q) != 2 {
		t.Fatalf("queue %v, want the file's 2 objects %v", q, objs)
	}
	d.Do(&pb.Command{Op: &pb.Command_DestroyDone{DestroyDone: &pb.DestroyDoneOp{Objects: q}}})
	if q, _ := d.T.DestroyQueue(10); len(q) != 0 {
		t.Fatalf("queue after done: %v", q)
	}
	// A queue once seen empty is seen again by the next call after any
	// apply that queues: an unlink, or a repair (the checker's, or an
	// injected fault's) that writes a queue record.
	create(t, d, 1, 2, fid.Root, "g", &pb.Layout{StripeCount: 1}, []uint32{0})
	d.Do(&pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte("g")}}})
	if q, _ := d.T.DestroyQueue(10); len(q) != 1 {
		t.Fatalf("queue after a second unlink: %v, want 1 object", q)
	} else {
		d.Do(&pb.Command{Op: &pb.Command_DestroyDone{DestroyDone: &pb.DestroyDoneOp{Objects: q}}})
	}
	if q, _ := d.T.DestroyQueue(10); len(q) != 0 {
		t.Fatalf("queue after done: %v", q)
	}
	repair := &pb.LfsckRepair{Component: 3, Muts: []*pb.LfsckMut{{M: &pb.LfsckMut_Set{Set: &pb.LfsckKV{Key: DestroyKey(1, 7, 9)}}}}}
	if r, _ := d.Do(&pb.Command{Op: &pb.Command_LfsckRepair{LfsckRepair: &pb.LfsckRepairOp{Repairs: []*pb.LfsckRepair{repair}}}}); r.Errno != 0 {
		t.Fatalf("repair: %v", r)
	}
	if q, _ := d.T.DestroyQueue(10); len(q) != 1 || q[0].Ost != 1 || q[0].Seq != 7 || q[0].Oid != 9 {
		t.Fatalf("queue after a repair queued an object: %v", q)
	}
}

// TestDestroyQueueFindsWhatIsQueuedBelowWhereItStarts: the scan starts
// where the last one found the queue's head, and still finds objects
// queued below it since, also by an apply that commits while a scan runs.
func TestDestroyQueueFindsWhatIsQueuedBelowWhereItStarts(t *testing.T) {
	d := newDirect(t, 1)
	var objs []*pb.StripeObject
	for i := range 6 {
		r := create(t, d, 1, uint64(10+i), fid.Root, fmt.Sprintf("f%d", i), &pb.Layout{StripeCount: 1}, []uint32{0})
		objs = append(objs, r.Inode.Layout.Objects[0])
	}
	if objs[0].Oid >= objs[1].Oid {
		t.Fatalf("objects not allocated in order: %v", objs)
	}
	unlink := func(i int) {
		t.Helper()
		if r, _ := d.Do(&pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte(fmt.Sprintf("f%d", i))}}}); r.Errno != 0 {
			t.Fatalf("unlink f%d: %v", i, r)
		}
	}
	queue := func(want ...int) {
		t.Helper()
		q, err := d.T.DestroyQueue(100)
		if err != nil || len(q) != len(want) {
			t.Fatalf("queue %v (%v), want the objects of files %v", q, err, want)
		}
		for i, w := range want {
			if q[i].Oid != objs[w].Oid {
				t.Fatalf("queue %v, want the objects of files %v", q, want)
			}
		}
		d.Do(&pb.Command{Op: &pb.Command_DestroyDone{DestroyDone: &pb.DestroyDoneOp{Objects: q}}})
	}
	unlink(3)
	unlink(4)
	queue(3, 4)
	queue()
	unlink(5) // above where the scans start now
	queue(5)
	unlink(0) // below
	queue(0)
	// Queued while a scan that saw nothing runs: the next scan finds it.
	d.T.dq.beginScan()
	unlink(1)
	d.T.dq.endScan(queueEnd)
	queue(1)
	queue()
}

func TestFid2PathFollowsEveryLink(t *testing.T) {
	d := newDirect(t, 1)
	a, _ := d.Do(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte("a"), Mode: syscall.S_IFDIR | 0o755}}})
	f, _ := d.Do(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: a.Inode.Fid, Name: []byte("f"), Mode: 0o644, Osts: []uint32{0}}}})
	d.Do(&pb.Command{Op: &pb.Command_Link{Link: &pb.LinkOp{Fid: f.Inode.Fid, Parent: fid.Root.PB(), Name: []byte("g")}}})
	paths, _, err := d.T.Fid2Path(fid.FromPB(f.Inode.Fid))
	if err != nil || len(paths) != 2 || paths[0] != "/a/f" || paths[1] != "/g" {
		t.Fatalf("paths %v %v", paths, err)
	}
	if p, _, _ := d.T.Fid2Path(fid.Root); len(p) != 1 || p[0] != "/" {
		t.Fatalf("root path %v", p)
	}
}

// TestReaddirCookiesSurviveChanges: a listing resumed from a cookie sees
// every entry that existed throughout, once, while others come and go.
func TestReaddirCookiesSurviveChanges(t *testing.T) {
	d := newDirect(t, 1)
	for i := 0; i < 500; i++ {
		create(t, d, 1, uint64(i+1), fid.Root, fmt.Sprintf("keep%d", i), nil, []uint32{0})
	}
	seen := map[string]int{}
	var cookie uint64
	req := uint64(10000)
	for round := 0; ; round++ {
		ents, eof, err := d.T.Readdir(fid.Root, cookie, 50, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			seen[string(e.Name)]++
			cookie = e.Cookie
		}
		// Churn between calls.
		for j := 0; j < 20; j++ {
			req++
			create(t, d, 1, req, fid.Root, fmt.Sprintf("tmp%d-%d", round, j), nil, []uint32{0})
			d.Do(&pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte(fmt.Sprintf("tmp%d-%d", round, j))}}})
		}
		if eof {
			break
		}
	}
	for i := 0; i < 500; i++ {
		if n := seen[fmt.Sprintf("keep%d", i)]; n != 1 {
			t.Fatalf("keep%d seen %d times", i, n)
		}
	}
}

func TestStateSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	id := target.Identity{Fsname: "t", Kind: target.MDT}
	db, err := kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tg, _ := Open(db, id, obs.Discard())
	d := NewDirect(tg)
	d.Setup(fid.SeqNormal, []uint32{0}, fid.OSTSeq(0), 100)
	r := create(t, d, 1, 1, fid.Root, "f", nil, []uint32{0})
	applied, pools := tg.Applied(), tg.Pools()
	db.SyncWAL()
	db.Close()

	db, err = kv.Open(dir, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tg, err = Open(db, id, obs.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if tg.Applied() != applied || tg.Pools()[0] != pools[0] {
		t.Fatalf("reopened state: applied %d pools %v; want %d %v", tg.Applied(), tg.Pools(), applied, pools)
	}
	got, err := tg.Lookup(fid.Root, "f", nil)
	if err == nil {
		got.Flags &^= flagNoXattrs // the lookup's, not the create's
	}
	if err != nil || !proto.Equal(got, r.Inode) {
		t.Fatalf("lookup after reopen: %v %v", got, err)
	}
	// Entries at or below the applied index are not applied twice.
	d = NewDirect(tg)
	d.index = applied - 1
	if _, err := d.Do(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte("dup"), Mode: 0o644, Osts: []uint32{0}}}}); err == nil {
		t.Fatal("an entry at the applied index produced a reply")
	}
	if _, err := tg.Lookup(fid.Root, "dup", nil); err == nil {
		t.Fatal("an already-applied index was applied again")
	}
}

// TestReplicasApplyingSameLogAreIdentical is the determinism contract: two
// replicas fed the same entries hold byte-identical state.
func TestReplicasApplyingSameLogAreIdentical(t *testing.T) {
	var log []Entry
	mk := func(cmd *pb.Command) {
		cmd.NowNs = int64(1e18 + len(log))
		data, _ := proto.Marshal(cmd)
		log = append(log, Entry{Index: uint64(len(log) + 1), Data: data})
	}
	mk(&pb.Command{Op: &pb.Command_SeqGrant{SeqGrant: &pb.SeqGrantOp{Start: fid.SeqNormal, End: fid.SeqNormal + 4}}})
	mk(&pb.Command{Op: &pb.Command_PoolReset{PoolReset: &pb.PoolResetOp{Ost: 0, Seq: fid.OSTSeq(0)}}})
	mk(&pb.Command{Op: &pb.Command_PoolExtend{PoolExtend: &pb.PoolExtendOp{Ost: 0, Seq: fid.OSTSeq(0), End: 50}}})
	for i := 0; i < 40; i++ {
		mk(&pb.Command{ClientId: 3, RequestId: uint64(i), Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte(fmt.Sprint(i)), Mode: 0o644, Osts: []uint32{0}}}})
		if i%3 == 0 {
			mk(&pb.Command{ClientId: 3, RequestId: uint64(1000 + i), Op: &pb.Command_Rename{Rename: &pb.RenameOp{SrcParent: fid.Root.PB(), SrcName: []byte(fmt.Sprint(i)), DstParent: fid.Root.PB(), DstName: []byte(fmt.Sprint("r", i))}}})
		}
	}
	dump := func(batches int) []byte {
		db, _ := kv.OpenMem()
		defer db.Close()
		tg, _ := Open(db, target.Identity{Fsname: "t", Kind: target.MDT}, obs.Discard())
		step := (len(log) + batches - 1) / batches
		for i := 0; i < len(log); i += step {
			end := min(i+step, len(log))
			if _, err := tg.Apply(log[i:end]); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		it, _ := db.NewIter(nil, nil)
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			buf.Write(it.Key())
			buf.Write(it.Value())
		}
		return buf.Bytes()
	}
	a, b := dump(1), dump(17)
	if !bytes.Equal(a, b) {
		t.Fatal("replicas applying the same log in different batch sizes diverged")
	}
}

// TestDelayedLayoutComesFromTheDirectory: a file made without objects gets
// its directory's default layout when it is first given one.
func TestDelayedLayoutComesFromTheDirectory(t *testing.T) {
	d := newDirect(t, 3)
	dir, _ := d.Do(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte("d"), Mode: syscall.S_IFDIR | 0o755}}})
	d.Do(&pb.Command{Op: &pb.Command_SetLayout{SetLayout: &pb.SetLayoutOp{Fid: dir.Inode.Fid, Layout: &pb.Layout{StripeCount: 2, StripeSize: 131072, StripeOffset: -1}}}})
	before := d.T.Pools()
	r, _ := d.Do(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: dir.Inode.Fid, Name: []byte("f"), Mode: 0o644, DelayLayout: true, Osts: []uint32{0, 1, 2}}}})
	if r.Errno != 0 || r.Inode.Layout != nil {
		t.Fatalf("delayed create: %v", r)
	}
	for ost, p := range d.T.Pools() {
		if p.Next != before[ost].Next {
			t.Fatal("a delayed create took OST objects")
		}
	}
	r, _ = d.Do(&pb.Command{Op: &pb.Command_SetLayout{SetLayout: &pb.SetLayoutOp{Fid: r.Inode.Fid, Layout: &pb.Layout{StripeOffset: -1}, Osts: []uint32{0, 1, 2}}}})
	if r.Errno != 0 || len(r.Inode.Layout.Objects) != 2 || r.Inode.Layout.StripeSize != 131072 {
		t.Fatalf("layout on first write: %v", r)
	}
}

// TestOldRepliesExpire: replies of clients that went away are dropped by
// time, the recent ones kept (a retry still gets its answer).
func TestOldRepliesExpire(t *testing.T) {
	d := newDirect(t, 1)
	d.Now = func() time.Time { return time.Unix(1000, 0) }
	create(t, d, 5, 1, fid.Root, "old", nil, []uint32{0})
	d.Now = func() time.Time { return time.Unix(5000, 0) }
	create(t, d, 6, 1, fid.Root, "new", nil, []uint32{0})
	d.Do(&pb.Command{Op: &pb.Command_TrimReplies{TrimReplies: &pb.TrimRepliesOp{BeforeNs: time.Unix(3000, 0).UnixNano()}}})
	if _, ok := d.T.ReplyFor(5, 1); ok {
		t.Fatal("an expired reply was kept")
	}
	if _, ok := d.T.ReplyFor(6, 1); !ok {
		t.Fatal("a recent reply was dropped")
	}
	// After a restart the index is rebuilt from what the store holds.
	if err := d.T.loadReplyIndex(); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.T.ReplyFor(5, 1); ok {
		t.Fatal("expired reply back after reload")
	}
}
