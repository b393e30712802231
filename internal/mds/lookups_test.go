package mds

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// Every command that changes a directory's names names that directory
// (both, for a rename between two), the checker's repairs and injected
// damage name them all, and nothing else revokes a lookup lock.
func TestNamesChangedCoversEveryNamespaceChange(t *testing.T) {
	p, q := fid.FID{Seq: 0x200000400, Oid: 1}, fid.FID{Seq: 0x200000400, Oid: 2}
	ren := func(a, b fid.FID) *pb.RenameOp {
		return &pb.RenameOp{SrcParent: a.PB(), SrcName: []byte("x"), DstParent: b.PB(), DstName: []byte("y")}
	}
	for _, c := range []struct {
		what string
		cmd  *pb.Command
		dirs []fid.FID
		all  bool
	}{
		{"create", &pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: p.PB(), Name: []byte("x")}}}, []fid.FID{p}, false},
		{"link", &pb.Command{Op: &pb.Command_Link{Link: &pb.LinkOp{Fid: q.PB(), Parent: p.PB(), Name: []byte("x")}}}, []fid.FID{p}, false},
		{"unlink", &pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: p.PB(), Name: []byte("x")}}}, []fid.FID{p}, false},
		{"rename within", &pb.Command{Op: &pb.Command_Rename{Rename: ren(p, p)}}, []fid.FID{p}, false},
		{"rename between", &pb.Command{Op: &pb.Command_Rename{Rename: ren(p, q)}}, []fid.FID{p, q}, false},
		{"unlink of an open file", &pb.Command{Op: &pb.Command_OpenUnlink{OpenUnlink: &pb.OpenUnlinkOp{Unlink: &pb.UnlinkOp{Parent: q.PB(), Name: []byte("x")}}}}, []fid.FID{q}, false},
		{"rename over an open file", &pb.Command{Op: &pb.Command_OpenRename{OpenRename: &pb.OpenRenameOp{Rename: ren(q, p)}}}, []fid.FID{q, p}, false},
		{"checker repair", &pb.Command{Op: &pb.Command_LfsckRepair{LfsckRepair: &pb.LfsckRepairOp{}}}, nil, true},
		{"injected damage", &pb.Command{Op: &pb.Command_Fault{Fault: &pb.FaultOp{}}}, nil, true},
		{"setattr", &pb.Command{Op: &pb.Command_Setattr{Setattr: &pb.SetattrOp{Fid: p.PB()}}}, nil, false},
		{"tmpfile", &pb.Command{Op: &pb.Command_Tmpfile{Tmpfile: &pb.TmpfileOp{Parent: p.PB()}}}, nil, false},
		{"orphan release", &pb.Command{Op: &pb.Command_OrphanRelease{OrphanRelease: &pb.OrphanReleaseOp{}}}, nil, false},
	} {
		dirs, all := namesChanged(c.cmd)
		if !slices.Equal(dirs, c.dirs) || all != c.all {
			t.Errorf("%s: directories %v, all %v; want %v, %v", c.what, dirs, all, c.dirs, c.all)
		}
	}
}

// The lookup locks are revoked each time the MDT turns replicated, and
// only then.
func TestOnReplicatedRevokesWhenTheMDTBecomesReplicated(t *testing.T) {
	var replicated atomic.Bool
	var revokes atomic.Int32
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		onReplicated(stop, time.Millisecond, replicated.Load, func() { revokes.Add(1) })
		close(done)
	}()
	settle := func() { time.Sleep(30 * time.Millisecond) }
	settle()
	if n := revokes.Load(); n != 0 {
		t.Fatalf("%d revocations while single", n)
	}
	replicated.Store(true)
	settle()
	if n := revokes.Load(); n != 1 {
		t.Fatalf("%d revocations after becoming replicated, want 1", n)
	}
	settle()
	if n := revokes.Load(); n != 1 {
		t.Fatalf("%d revocations while staying replicated, want 1", n)
	}
	replicated.Store(false)
	settle()
	replicated.Store(true)
	settle()
	if n := revokes.Load(); n != 2 {
		t.Fatalf("%d revocations after turning replicated twice, want 2", n)
	}
	close(stop)
	<-done
}
