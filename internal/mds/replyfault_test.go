package mds

import (
	"context"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
	"nacre/internal/obs"
	"nacre/internal/raftgroup"
	"nacre/internal/target"
)

// soloServer is the part of a Server that Mutate uses, over a
// single-replica Raft group on a store in a temporary directory.
func soloServer(t *testing.T) *Server {
	t.Helper()
	db, err := kv.Open(t.TempDir(), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := target.Identity{Fsname: "t", Kind: target.MDT}
	tg, err := mdt.Open(db, id, obs.Discard())
	if err != nil {
		t.Fatal(err)
	}
	g, err := raftgroup.Start(raftgroup.Config{GroupID: 1, ID: 1, Peers: []raftgroup.Peer{{ID: 1}}, DB: db, Prefix: mdt.RaftPrefix,
		SM: &smAdapter{t: tg, s: &Server{}}, Log: obs.Discard(), TickInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Stop(); db.Close() })
	s := &Server{id: id, log: obs.Discard(), db: db, t: tg, group: g, m: newMetrics(nil, "t"), osts: map[uint32]*ostState{}, stop: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for !g.IsLeader() {
		if err := sleepCtx(ctx, 5*time.Millisecond); err != nil {
			t.Fatal("the single replica does not lead")
		}
	}
	if r, err := s.propose(ctx, &pb.Command{NowNs: 1, Op: &pb.Command_SeqGrant{SeqGrant: &pb.SeqGrantOp{Start: fid.SeqNormal, End: fid.SeqNormal + 4}}}); err != nil || r.Errno != 0 {
		t.Fatalf("seq grant: %v %v", r, err)
	}
	return s
}

// TestReplyDropPointRetryGetsOriginalReply: with mds.reply.drop armed the
// mutation is executed and the caller gets Unavailable; the same request
// sent again gets the original reply from the reply cache, before
// proposing, or (mds.reply.precheck.skip) from apply, and the operation is
// not executed again.
func TestReplyDropPointRetryGetsOriginalReply(t *testing.T) {
	s := soloServer(t)
	t.Cleanup(func() {
		fault.Disarm(FaultReplyDrop)
		fault.Disarm(FaultReplyPrecheckSkip)
	})
	ctx := context.Background()
	mkdir := func() *pb.Command {
		return &pb.Command{ClientId: 9, RequestId: 1, AckedBelow: 1, Cred: &pb.Cred{},
			Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte("d"), Mode: syscall.S_IFDIR | 0o755, Exclusive: true}}}
	}
	if err := fault.Arm(FaultReplyDrop, fault.Action{Kind: "error", Count: 1}); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Mutate(ctx, mkdir()); errno.CodeOf(err) != errno.Unavailable {
		t.Fatalf("with %s armed: %v %v, want Unavailable", FaultReplyDrop, r, err)
	}
	index := s.t.Applied() // nothing else proposes
	d, err := s.t.Lookup(fid.Root, "d", nil)
	if err != nil {
		t.Fatalf("the mutation whose reply was dropped was not executed: %v", err)
	}
	root, _ := s.t.Getattr(fid.Root, false)
	for _, skip := range []bool{false, true} {
		if skip {
			if err := fault.Arm(FaultReplyPrecheckSkip, fault.Action{Kind: "error", Count: 1}); err != nil {
				t.Fatal(err)
			}
		}
		applied := s.t.Applied()
		r, err := s.Mutate(ctx, mkdir())
		if err != nil || r.Errno != 0 || r.Index != index || !proto.Equal(r.Inode.Fid, d.Fid) || r.Inode.CtimeNs != d.CtimeNs {
			t.Fatalf("retry (precheck skipped: %v): %v %v, want the original reply (index %d, %v)", skip, r, err, index, d)
		}
		if grew := s.t.Applied() > applied; grew != skip {
			t.Fatalf("precheck skipped: %v, but the retry went into the log: %v", skip, grew)
		}
		if now, _ := s.t.Getattr(fid.Root, false); now.Nlink != root.Nlink || now.CtimeNs != root.CtimeNs {
			t.Fatalf("the retry changed the parent: nlink %d ctime %d, was %d %d", now.Nlink, now.CtimeNs, root.Nlink, root.CtimeNs)
		}
	}
	if fault.Hits(FaultReplyPrecheckSkip) == 0 {
		t.Fatalf("%s never fired", FaultReplyPrecheckSkip)
	}
}
