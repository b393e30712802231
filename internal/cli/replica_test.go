package cli

import (
	"context"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
)

// An add to an address where nothing answers, of a replica that
// registered with the MGS at another address, is a typo: refused naming
// the address to give (the add would make a learner that never catches
// up, and the id could not be added again).
func TestAddOfAMistypedAddressNamesTheRegisteredOne(t *testing.T) {
	err := checkJoiner(context.Background(), &pb.RaftMembersReply{}, "MDT0", 7, "127.0.0.1:1", "127.0.0.27:7101", nil)
	if err == nil || !strings.Contains(err.Error(), "give --addr 127.0.0.27:7101") {
		t.Fatalf("checkJoiner: %v", err)
	}
	if err := checkJoiner(context.Background(), &pb.RaftMembersReply{}, "MDT0", 7, "127.0.0.1:1", "", nil); err != nil {
		t.Fatalf("a replica not started yet (not registered) is left to the add: %v", err)
	}
}

// TestNewReplicaIDsAreNeverReused: a replica made on a host (--dir) gets
// the next id after every member, every id the group removed and every
// id retired on the host; an id asked for that the group removed, or that
// is a member's, is refused before anything is formatted.
func TestNewReplicaIDsAreNeverReused(t *testing.T) {
	mdt0 := ReplicaGroup{Name: "mdt0", Kind: pb.TargetKind_TARGET_MDT}
	peers := map[uint64]string{1: "h1:1", 2: "h2:1", 3: "h3:1"}
	cases := []struct {
		name             string
		asked, next      uint64
		removed, retired []uint64
		want             uint64
		refused          string
	}{
		{name: "the next unused", next: 4, want: 4},
		{name: "after a retired directory", next: 4, retired: []uint64{6}, want: 7},
		{name: "a retired one below next", next: 5, retired: []uint64{4}, want: 5},
		{name: "asked", asked: 9, next: 4, retired: []uint64{6}, want: 9},
		{name: "asked, removed by the group", asked: 4, next: 5, removed: []uint64{4},
			refused: "replica id 4 was removed from MDT0, and ids are never reused: leave --id out for the next unused one (5)"},
		{name: "asked, a member", asked: 2, next: 4,
			refused: "replica 2 is already a member of MDT0 at h2:1; to move it, use nacre replica replace"},
	}
	for _, c := range cases {
		id, err := newReplicaID(mdt0, c.asked, c.next, c.removed, c.retired, peers)
		switch {
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s: id %d, %v; want a refusal %q", c.name, id, err, c.refused)
		case c.refused == "" && (err != nil || id != c.want):
			t.Errorf("%s: id %d, %v; want %d", c.name, id, err, c.want)
		}
	}
}

// TestRefusalKeepsTheServersWordsAndCode: a refusal written for operators
// comes out as the server said it, still carrying its code; any other
// failure is prefixed with what was being done.
func TestRefusalKeepsTheServersWordsAndCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{errno.New(errno.AlreadyExists, "replica 2 is already a voter of MDT0000"), "replica 2 is already a voter of MDT0000"},
		{errno.New(errno.NotFound, "replica 5 is not a member of MDT0000"), "replica 5 is not a member of MDT0000"},
		{errno.New(errno.FailedPrecondition, "MDT0000: cannot add a replica: single replica"), "MDT0000: cannot add a replica: single replica"},
		{errno.New(errno.Unavailable, "no leader"), "add replica 2 to mdt0: no leader"},
	} {
		got := refusal(c.err, "add replica %d to %s", 2, "mdt0")
		if got.Error() != c.want {
			t.Errorf("refusal(%v) = %q, want %q", c.err, got, c.want)
		}
		if errno.CodeOf(got) != errno.CodeOf(c.err) {
			t.Errorf("refusal(%v): code %v, want %v", c.err, errno.CodeOf(got), errno.CodeOf(c.err))
		}
	}
}
