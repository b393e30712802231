package localcluster

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nacre/internal/target"
)

// TestCheckMDTsBoundsTheCount: --mdts takes 1 to MaxLocalMDTs; the
// refusal names the number, the bound and where a larger file system
// runs its MDTs.
func TestCheckMDTsBoundsTheCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string // "" accepted
	}{
		{1, ""},
		{2, ""},
		{MaxLocalMDTs, ""},
		{0, "--mdts 0: a cluster needs at least 1 MDT"},
		{-1, "--mdts -1: a cluster needs at least 1 MDT"},
		{MaxLocalMDTs + 1, "at most 8 (a larger file system runs its MDTs on their own servers"},
		{1000, "--mdts 1000: a local cluster runs each MDT as a process"},
	} {
		err := CheckMDTs(c.n)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("CheckMDTs(%d): %v, want it accepted", c.n, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("CheckMDTs(%d): %v, want an error containing %q", c.n, err, c.want)
		}
	}
}

// TestGroupSizeFollowsMDT0: a new MDT gets as many replicas as MDT0 has
// replica directories, made odd without losing replication: MDT0 in the
// middle of a replacement (4) or after a removal (2) has a group of 3.
func TestGroupSizeFollowsMDT0(t *testing.T) {
	for reps, want := range map[int]int{0: 1, 1: 1, 2: 3, 3: 3, 4: 3, 5: 5, 6: 5} {
		if got := groupSize(reps); got != want {
			t.Errorf("groupSize(%d) = %d, want %d", reps, got, want)
		}
	}
}

// identities loads the identity of every target directory of dir by name.
func identities(t *testing.T, dir string) map[string]target.Identity {
	t.Helper()
	dirs, err := Dirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]target.Identity{}
	for _, d := range dirs {
		id, err := target.Load(d)
		if err != nil {
			t.Fatal(err)
		}
		ids[filepath.Base(d)] = id
	}
	return ids
}

// TestFormatGivesEachMDTItsOwnGroup: a new cluster of 2 MDTs with 3
// replicas gets two Raft groups, each of its own index, peers and
// creation time, with no address shared by any two replicas of the
// cluster; grown to 3 MDTs it gets a third group of as many replicas,
// on addresses of its own.
func TestFormatGivesEachMDTItsOwnGroup(t *testing.T) {
	dir := t.TempDir()
	if err := format(Options{Dir: dir, Fsname: "fs1", Out: io.Discard, MDTs: 2, OSTs: 1, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if err := format(Options{Dir: dir, Out: io.Discard, MDTs: 3}); err != nil {
		t.Fatal(err)
	}
	ids := identities(t, dir)
	used := map[string]string{}
	for _, i := range []uint32{0, 1, 2} {
		var group []target.Identity
		for r := 1; r <= 3; r++ {
			name := fmt.Sprintf("mdt%d-r%d", i, r)
			id, ok := ids[name]
			if !ok {
				t.Fatalf("no %s; the cluster has %v", name, slices.Sorted(maps.Keys(ids)))
			}
			if id.Kind != target.MDT || id.Index != i || id.ReplicaID != uint64(r) || id.Fsname != "fs1" {
				t.Errorf("%s: %s index %d replica %d of %q", name, id.Kind, id.Index, id.ReplicaID, id.Fsname)
			}
			if id.Peers[uint64(r)] != id.Listen || len(id.Peers) != 3 {
				t.Errorf("%s: peers %v, listen %s: want 3 peers naming it at its own address", name, id.Peers, id.Listen)
			}
			if other, taken := used[id.Listen]; taken {
				t.Errorf("%s and %s share the address %s", name, other, id.Listen)
			}
			used[id.Listen] = name
			group = append(group, id)
		}
		for _, id := range group[1:] {
			if !id.Created.Equal(group[0].Created) || len(id.Peers) != len(group[0].Peers) {
				t.Errorf("MDT%d: replicas differ in creation time or peers: %v %v", i, id.Created, group[0].Created)
			}
			for k, a := range group[0].Peers {
				if id.Peers[k] != a {
					t.Errorf("MDT%d: replica %d's peers %v, replica 1's %v", i, id.ReplicaID, id.Peers, group[0].Peers)
				}
			}
		}
	}
	for r := 1; r <= 3; r++ {
		if other, taken := used[ids[fmt.Sprintf("mgs-r%d", r)].Listen]; taken {
			t.Errorf("mgs-r%d shares its address with %s", r, other)
		}
	}
}

// TestFormatAddsMDTsOnlyAboveTheHighest: an existing cluster grows by the
// MDTs above the highest index it has had, single like its MDT0; one
// whose directory is missing (moved away) is not formatted again empty,
// which would lose its files, whether it is below the highest present or
// the highest itself, and neither is a missing MDT0.
func TestFormatAddsMDTsOnlyAboveTheHighest(t *testing.T) {
	dir := t.TempDir()
	if err := format(Options{Dir: dir, Fsname: "fs1", Out: io.Discard, MDTs: 3, OSTs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "mdt1"), filepath.Join(dir, "away")); err != nil {
		t.Fatal(err)
	}
	if err := format(Options{Dir: dir, Out: io.Discard, MDTs: 4}); err != nil {
		t.Fatal(err)
	}
	ids := identities(t, dir)
	if _, ok := ids["mdt1"]; ok {
		t.Errorf("the missing mdt1 was formatted again")
	}
	if id, ok := ids["mdt3"]; !ok || id.Index != 3 || id.ReplicaID != 0 {
		t.Errorf("mdt3: %+v (present %v), want a single MDT of index 3", id, ok)
	}
	if err := os.Rename(filepath.Join(dir, "mdt3"), filepath.Join(dir, "away3")); err != nil {
		t.Fatal(err)
	}
	if err := format(Options{Dir: dir, Out: io.Discard, MDTs: 4}); err != nil {
		t.Fatal(err)
	}
	if _, ok := identities(t, dir)["mdt3"]; ok {
		t.Errorf("the missing mdt3, the highest, was formatted again")
	}

	bare := t.TempDir()
	if err := format(Options{Dir: bare, Fsname: "fs1", Out: io.Discard, MDTs: 1, OSTs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(bare, "mdt0")); err != nil {
		t.Fatal(err)
	}
	if err := format(Options{Dir: bare, Out: io.Discard, MDTs: 2}); err != nil {
		t.Fatal(err)
	}
	if ids := identities(t, bare); len(ids) != 2 {
		t.Errorf("a cluster without its MDT0 given --mdts 2: %v, want no MDT formatted", slices.Sorted(maps.Keys(ids)))
	}
}

// TestFormatRefusesAnEmptyMDTDirectory: in an existing cluster an empty
// mdtN directory with no device mounted on it is more likely a mount
// point whose device is missing than a place for a new MDT; the refusal
// says how to make one there if that is what was meant.
func TestFormatRefusesAnEmptyMDTDirectory(t *testing.T) {
	dir := t.TempDir()
	if err := format(Options{Dir: dir, Fsname: "fs1", Out: io.Discard, MDTs: 1, OSTs: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "mdt1"), 0o755); err != nil {
		t.Fatal(err)
	}
	err := format(Options{Dir: dir, Out: io.Discard, MDTs: 2})
	if err == nil || !strings.Contains(err.Error(), "is empty and no device is mounted on it") ||
		!strings.Contains(err.Error(), "nacre format --type mdt --index 1 --fsname fs1") || !strings.Contains(err.Error(), "--mdts 2`") {
		t.Errorf("an empty mdt1: %v", err)
	}
}
