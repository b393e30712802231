package mds

import (
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/reserve"
)

func TestOSTFullHasHysteresis(t *testing.T) {
	const mib = 1 << 20
	st := func(avail, inodesFree uint64) *pb.Statfs {
		return &pb.Statfs{BytesTotal: 1024 * mib, BytesAvail: avail, InodesTotal: 1 << 20, InodesFree: inodesFree}
	}
	// 1 GiB OST (available is what clients may write): margin 4 MiB;
	// full below 4 MiB, usable again from 8 MiB.
	for _, c := range []struct {
		name    string
		st      *pb.Statfs
		wasFull bool
		want    bool
	}{
		{"plenty of room", st(500*mib, 1<<19), false, false},
		{"into the margin", st(3*mib, 1<<19), false, true},
		{"nothing available", st(0, 1<<19), false, true},
		{"just above the margin", st(5*mib, 1<<19), false, false},
		{"full, a little freed", st(5*mib, 1<<19), true, true},
		{"full, twice the margin freed", st(8*mib, 1<<19), true, false},
		{"out of inodes", st(500*mib, 100), false, true},
		{"no report keeps the verdict", nil, true, true},
		{"an empty report keeps the verdict", &pb.Statfs{}, false, false},
	} {
		if got := ostFull(c.st, c.wasFull); got != c.want {
			t.Errorf("%s: ostFull = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestAFullMDTRefusesNewNamesAndAllowsRemovals(t *testing.T) {
	s := &Server{space: reserve.NewGuard("/mdt", "MDT0000", 64<<20, func(string) (reserve.Usage, error) {
		return reserve.Usage{Total: 1 << 30, Avail: 100 << 20}, nil // below the 144 MiB reserve
	})}
	for _, cmd := range []*pb.Command{
		{Op: &pb.Command_Create{Create: &pb.CreateOp{}}},
		{Op: &pb.Command_Link{Link: &pb.LinkOp{}}},
		{Op: &pb.Command_Setxattr{Setxattr: &pb.SetxattrOp{}}},
		{Op: &pb.Command_Tmpfile{Tmpfile: &pb.TmpfileOp{}}},
	} {
		err := s.admitSpace(cmd)
		if errno.ToErrno(err) != syscall.ENOSPC || !strings.Contains(err.Error(), "MDT0000 is full") {
			t.Errorf("%T on a full MDT: want ENOSPC naming it, got %v", cmd.Op, err)
		}
		if err != nil && strings.Contains(err.Error(), "/mdt") {
			t.Errorf("%T: the client's message names the server's path: %v", cmd.Op, err)
		}
	}
	for _, cmd := range []*pb.Command{
		{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{}}},
		{Op: &pb.Command_Rename{Rename: &pb.RenameOp{}}},
		{Op: &pb.Command_Setattr{Setattr: &pb.SetattrOp{}}},
		{Op: &pb.Command_Removexattr{Removexattr: &pb.RemovexattrOp{}}},
	} {
		if err := s.admitSpace(cmd); err != nil {
			t.Errorf("%T on a full MDT: %v", cmd.Op, err)
		}
	}
	if err := (&Server{}).admitSpace(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{}}}); err != nil {
		t.Errorf("a store in memory: %v", err)
	}
}

// Placement by space: balanced OSTs (within 17 %) are taken in turn; an
// imbalance orders them by a draw weighted by their available space.
func TestNewFilesGoWhereTheSpaceIs(t *testing.T) {
	const gib = 1 << 30
	s := &Server{osts: map[uint32]*ostState{}}
	set := func(avail ...uint64) []uint32 {
		var ready []uint32
		for i, a := range avail {
			s.osts[uint32(i)] = &ostState{index: uint32(i), statfs: &pb.Statfs{BytesTotal: 100 * gib, BytesAvail: a}}
			ready = append(ready, uint32(i))
		}
		return ready
	}
	if w := s.qosWeights(set(100*gib, 90*gib, 85*gib)); w != nil {
		t.Errorf("OSTs within 15 %% of each other placed by space: %v", w)
	}
	ready := set(90*gib, 10*gib, 30*gib)
	w := s.qosWeights(ready)
	if w == nil {
		t.Fatal("OSTs with 90, 10 and 30 GiB available placed in turn")
	}
	s.osts[1].statfs = nil
	if s.qosWeights(ready) != nil {
		t.Error("an OST without figures placed by space")
	}
	// The first stripe lands on each OST about as often as its share of
	// the space: 9/13, 1/13, 3/13.
	first := map[uint32]int{}
	const draws = 13000
	for range draws {
		o := weightedOrder(ready, w, rand.Uint64N)
		if len(o) != 3 || o[0] == o[1] || o[1] == o[2] || o[0] == o[2] {
			t.Fatalf("order %v is not the three OSTs once each", o)
		}
		first[o[0]]++
	}
	for ost, want := range map[uint32]int{0: 9000, 1: 1000, 2: 3000} {
		if got := first[ost]; got < want*85/100 || got > want*115/100 {
			t.Errorf("OST%04x got the first stripe %d times of %d, want about %d", ost, got, draws, want)
		}
	}
	// An OST with nothing available still has a (tiny) chance, so that a
	// file wider than the OSTs with room gets all it can.
	if o := weightedOrder([]uint32{4, 7}, []uint64{0, 0}, func(uint64) uint64 { return 1 }); o[0] != 7 || o[1] != 4 {
		t.Errorf("draws over zero weights: %v", o)
	}
}
