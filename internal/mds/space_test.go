package mds

import (
	"strings"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/rpc"
	"nacre/internal/space"
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
	s := &Server{space: space.NewGuard("/mdt", "MDT0000", 64<<20, func(string) (space.Usage, error) {
		return space.Usage{Total: 1 << 30, Avail: 100 << 20}, nil // below the 144 MiB reserve
	})}
	for _, cmd := range []*pb.Command{
		{Op: &pb.Command_Create{Create: &pb.CreateOp{}}},
		{Op: &pb.Command_Link{Link: &pb.LinkOp{}}},
		{Op: &pb.Command_Setxattr{Setxattr: &pb.SetxattrOp{}}},
		{Op: &pb.Command_Tmpfile{Tmpfile: &pb.TmpfileOp{}}},
	} {
		err := s.admitSpace(cmd)
		if rpc.ToErrno(err) != syscall.ENOSPC || !strings.Contains(err.Error(), "MDT0000 is full") {
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
