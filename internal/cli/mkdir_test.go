package cli

import (
	"testing"

	pb "nacre/api/nacrepb"
)

func TestPickEmptiestMDT(t *testing.T) {
	sf := func(total, free uint64) *pb.Statfs { return &pb.Statfs{InodesTotal: total, InodesFree: free} }
	for _, tc := range []struct {
		name string
		st   map[uint32]*pb.Statfs
		want uint32
	}{
		{"most free", map[uint32]*pb.Statfs{0: sf(1000, 100), 1: sf(1000, 900), 2: sf(1000, 500)}, 1},
		{"one device: the fewest used", map[uint32]*pb.Statfs{0: sf(1000+30, 1000), 1: sf(1000+5, 1000-1), 2: sf(1000+9, 1000)}, 1},
		{"all equal: the lowest index", map[uint32]*pb.Statfs{2: sf(10, 5), 0: sf(10, 5), 1: sf(10, 5)}, 0},
	} {
		got, ok := pickEmptiest(tc.st)
		if !ok || got != tc.want {
			t.Errorf("%s: MDT%d, want MDT%d", tc.name, got, tc.want)
		}
	}
	if _, ok := pickEmptiest(nil); ok {
		t.Error("an MDT picked from none")
	}
}
