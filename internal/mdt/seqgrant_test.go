package mdt

import (
	"testing"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/obs"
	"nacre/internal/target"
)

// TestSequenceGrantsOnlyGoUp: a retried grant (the same range again) and
// a grant below the ranges held are both ignored; only a grant above all
// of them is added. A stale grant below the sequence in use would hand
// its FIDs out a second time.
func TestSequenceGrantsOnlyGoUp(t *testing.T) {
	db, err := kv.OpenMem()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tg, err := Open(db, target.Identity{Fsname: "t", Kind: target.MDT}, obs.Discard())
	if err != nil {
		t.Fatal(err)
	}
	index := uint64(0)
	grant := func(start, end uint64) {
		t.Helper()
		index++
		data, _ := proto.Marshal(&pb.Command{NowNs: int64(index), Op: &pb.Command_SeqGrant{SeqGrant: &pb.SeqGrantOp{Start: start, End: end}}})
		if _, err := tg.Apply([]Entry{{Index: index, Data: data}}); err != nil {
			t.Fatal(err)
		}
	}
	base := fid.SeqNormal
	grant(base+10, base+12)
	grant(base+20, base+22)
	grant(base+10, base+12) // a retry
	grant(base+4, base+8)   // below what is held: stale
	grant(base+11, base+14) // overlaps
	grant(base+30, base+31) // new
	want := [][2]uint64{{base + 10, base + 12}, {base + 20, base + 22}, {base + 30, base + 31}}
	got := tg.seq.Ranges
	if tg.seq.Cur >= base+10 && tg.seq.Cur < base+12 {
		// The first range went into use at once: it is no longer held.
		want = want[1:]
	}
	if len(got) != len(want) {
		t.Fatalf("ranges held %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ranges held %v, want %v", got, want)
		}
	}
}
