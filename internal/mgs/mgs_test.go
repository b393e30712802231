package mgs

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/kv"
	"nacre/internal/obs"
	"nacre/internal/raftgroup"
	"nacre/internal/target"
)

// open starts a single-replica MGS on the store in fs.
func open(t *testing.T, fs vfs.FS) (*Server, *kv.DB) {
	t.Helper()
	db, err := kv.Open("mgs", kv.Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	id := target.Identity{Fsname: "test", Kind: target.MGS, Listen: "127.0.0.1:1"}
	s, err := New(Config{ID: id, DB: db, Log: obs.Discard(), Group: func(sm raftgroup.StateMachine) (*raftgroup.Group, error) {
		return raftgroup.Start(raftgroup.Config{GroupID: 1 << 32, ID: 1, Peers: []raftgroup.Peer{{ID: 1}}, DB: db, Prefix: []byte("\x00r"), SM: sm, Log: obs.Discard()})
	}})
	if err != nil {
		t.Fatal(err)
	}
	return s, db
}

func TestRegistryAndSequenceGrantsAreReplicatedStateThatSurvivesARestart(t *testing.T) {
	fs := vfs.NewMem()
	s, db := open(t, fs)
	ctx := context.Background()
	mdt := &pb.TargetInfo{Kind: pb.TargetKind_TARGET_MDT, Fsname: "test", Uuid: "a", Addr: "x:1"}
	if _, err := s.Register(ctx, mdt); err != nil {
		t.Fatal(err)
	}
	dup := &pb.TargetInfo{Kind: pb.TargetKind_TARGET_MDT, Fsname: "test", Uuid: "b", Addr: "x:2"}
	if _, err := s.Register(ctx, dup); errno.CodeOf(err) != errno.AlreadyExists {
		t.Fatalf("second MDT0 with another uuid: %v, want AlreadyExists", err)
	}
	// Replicas of one target register side by side.
	for r := uint64(1); r <= 3; r++ {
		rep := &pb.TargetInfo{Kind: pb.TargetKind_TARGET_MDT, Index: 1, Fsname: "test", Uuid: string(rune('p' + r)), ReplicaId: r}
		if _, err := s.Register(ctx, rep); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Register(ctx, &pb.TargetInfo{Kind: pb.TargetKind_TARGET_OST, Fsname: "other"}); errno.CodeOf(err) != errno.FailedPrecondition {
		t.Fatalf("another file system's target: %v", err)
	}
	g1, err := s.AllocSeqRange(ctx, &pb.AllocSeqRangeRequest{Mdt: 0, Count: 64})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := s.AllocSeqRange(ctx, &pb.AllocSeqRangeRequest{Mdt: 1, Count: 64})
	if err != nil {
		t.Fatal(err)
	}
	if g2.Start < g1.End {
		t.Fatalf("overlapping grants %v and %v", g1, g2)
	}
	s.Stop()
	db.Close()

	s, db = open(t, fs)
	defer func() { s.Stop(); db.Close() }()
	cfg, err := s.GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ti := range cfg.Targets {
		if ti.Kind == pb.TargetKind_TARGET_MDT {
			n++
			if ti.State != "up" || !ti.Unheard {
				t.Errorf("%v replica %d: state %q, unheard %v right after the restart, want up (grace) and unheard", ti.Index, ti.ReplicaId, ti.State, ti.Unheard)
			}
		}
	}
	if n != 4 || len(cfg.Fld) != 2 {
		t.Fatalf("after restart: %d MDT records and %d FLD ranges, want 4 and 2", n, len(cfg.Fld))
	}
	// A heartbeat makes it heard.
	if _, err := s.Heartbeat(ctx, &pb.HeartbeatRequest{Kind: pb.TargetKind_TARGET_MDT, Uuid: "a"}); err != nil {
		t.Fatal(err)
	}
	cfg, _ = s.GetConfig(ctx, &pb.GetConfigRequest{})
	for _, ti := range cfg.Targets {
		if ti.Kind == pb.TargetKind_TARGET_MDT && ti.Index == 0 && (ti.Unheard || ti.State != "up") {
			t.Errorf("MDT0 after its heartbeat: state %q, unheard %v", ti.State, ti.Unheard)
		}
	}
	g3, err := s.AllocSeqRange(ctx, &pb.AllocSeqRangeRequest{Mdt: 0, Count: 64})
	if err != nil {
		t.Fatal(err)
	}
	if g3.Start < g2.End {
		t.Fatalf("grant %v after the restart overlaps %v", g3, g2)
	}
	if _, err := s.Deregister(ctx, &pb.DeregisterRequest{Kind: pb.TargetKind_TARGET_MDT, Index: 1, ReplicaId: 2}); err != nil {
		t.Fatal(err)
	}
	cfg, _ = s.GetConfig(ctx, &pb.GetConfigRequest{})
	for _, ti := range cfg.Targets {
		if ti.Kind == pb.TargetKind_TARGET_MDT && ti.Index == 1 && ti.ReplicaId == 2 {
			t.Fatal("deregistered replica still listed")
		}
	}
}

// A second process of one target (a copy of its directory: the same
// uuid) at another address is refused while the first heartbeats, so
// that clients never write into the copy; once the first has been silent
// for DownAfter the target may register from its new address.
func TestACopyOfALiveTargetCannotTakeItsPlace(t *testing.T) {
	s, db := open(t, vfs.NewMem())
	defer db.Close()
	now := time.Now()
	s.cfg.Now = func() time.Time { return now }
	ctx := context.Background()
	ost := &pb.TargetInfo{Kind: pb.TargetKind_TARGET_OST, Index: 1, Fsname: "test", Uuid: "u", Addr: "127.0.0.1:1001", Pid: 11, Host: "h"}
	if _, err := s.Register(ctx, ost); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Heartbeat(ctx, &pb.HeartbeatRequest{Kind: ost.Kind, Index: 1, Uuid: "u"}); err != nil {
		t.Fatal(err)
	}
	cp := proto.Clone(ost).(*pb.TargetInfo)
	cp.Addr, cp.Pid = "127.0.0.1:2002", 22
	_, err := s.Register(ctx, cp)
	if errno.CodeOf(err) != errno.Aborted || !strings.Contains(err.Error(), "already served at 127.0.0.1:1001 (pid 11") {
		t.Fatalf("a copy registering beside the live OST: %v, want Aborted naming the live one", err)
	}
	// The live one registering again (a heartbeat said NotFound) is fine.
	if _, err := s.Register(ctx, ost); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Heartbeat(ctx, &pb.HeartbeatRequest{Kind: ost.Kind, Index: 1, Uuid: "u"}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(DownAfter - time.Second)
	if _, err := s.Register(ctx, cp); errno.CodeOf(err) != errno.Aborted {
		t.Fatalf("%v after the last heartbeat: %v, want Aborted", DownAfter-time.Second, err)
	}
	now = now.Add(2 * time.Second)
	if _, err := s.Register(ctx, cp); err != nil {
		t.Fatalf("the target moved after the old process fell silent: %v", err)
	}
	cfg, err := s.GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range cfg.Targets {
		if ti.Kind == pb.TargetKind_TARGET_OST && ti.Addr != cp.Addr {
			t.Errorf("OST0001 registered at %s, want the new address %s", ti.Addr, cp.Addr)
		}
	}
	// The old process, should it still run, learns it is not the one
	// registered: it must register again (and is refused).
	if _, err := s.Heartbeat(ctx, &pb.HeartbeatRequest{Kind: ost.Kind, Index: 1, Uuid: "u", Addr: ost.Addr}); errno.CodeOf(err) != errno.NotFound {
		t.Errorf("a heartbeat from the process no longer registered: %v, want NotFound", err)
	}
	if _, err := s.Heartbeat(ctx, &pb.HeartbeatRequest{Kind: ost.Kind, Index: 1, Uuid: "u", Addr: cp.Addr}); err != nil {
		t.Errorf("a heartbeat from the registered process: %v", err)
	}
	if _, err := s.Register(ctx, ost); errno.CodeOf(err) != errno.Aborted {
		t.Errorf("the old process registering beside the live new one: %v, want Aborted", err)
	}

	// A new leader has heard from nobody: for DownAfter it takes every
	// registered target for alive, so a copy cannot slip in then.
	s.mu.Lock()
	for _, e := range s.targets {
		e.h = health{}
	}
	s.leadSince = now
	s.mu.Unlock()
	if _, err := s.Register(ctx, ost); errno.CodeOf(err) != errno.Aborted || !strings.Contains(err.Error(), "began to lead") {
		t.Errorf("another process registering right after a leader change: %v, want Aborted", err)
	}
	now = now.Add(DownAfter)
	if _, err := s.Register(ctx, ost); err != nil {
		t.Errorf("DownAfter after the leader change, with no heartbeat from the registered process: %v", err)
	}
}

// Heartbeat replies and the configuration list the MGS replicas
// registered, by replica id, for targets and clients to follow.
func TestTheMGSReplicasAreListedForFollowers(t *testing.T) {
	s, db := open(t, vfs.NewMem())
	defer db.Close()
	ctx := context.Background()
	for _, r := range []*pb.TargetInfo{
		{Kind: pb.TargetKind_TARGET_MGS, Fsname: "test", Uuid: "m2", ReplicaId: 2, Addr: "127.0.0.1:2002"},
		{Kind: pb.TargetKind_TARGET_MGS, Fsname: "test", Uuid: "m1", ReplicaId: 1, Addr: "127.0.0.1:2001"},
		{Kind: pb.TargetKind_TARGET_OST, Fsname: "test", Uuid: "o", Addr: "127.0.0.1:3000"},
	} {
		if _, err := s.Register(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"127.0.0.1:2001", "127.0.0.1:2002"}
	cfg, err := s.GetConfig(ctx, &pb.GetConfigRequest{})
	if err != nil || !slices.Equal(cfg.MgsAddrs, want) {
		t.Errorf("configuration lists MGS replicas %v (%v), want %v", cfg.GetMgsAddrs(), err, want)
	}
	rep, err := s.Heartbeat(ctx, &pb.HeartbeatRequest{Kind: pb.TargetKind_TARGET_OST, Uuid: "o", Addr: "127.0.0.1:3000"})
	if err != nil || !slices.Equal(rep.MgsAddrs, want) {
		t.Errorf("heartbeat reply lists MGS replicas %v (%v), want %v", rep.GetMgsAddrs(), err, want)
	}
}
