package localcluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"nacre/internal/target"
)

// A removed replica's id is never given to a new one: RetireReplica keeps
// its directory as removed-NAME-rID-TIME, and NewReplica refuses the id
// before it formats anything.
func TestARemovedReplicaIDIsNotReused(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"removed-mdt0-r4-20261124T150405", "removed-mdt0-r12-20261124T150406", "removed-mgs-r2-20261124T150407"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := RemovedReplicaIDs(dir, "mdt0")
	slices.Sort(got)
	if !slices.Equal(got, []uint64{4, 12}) {
		t.Fatalf("RemovedReplicaIDs(mdt0) = %v, want [4 12]", got)
	}
	peers := map[uint64]string{1: "127.0.0.1:1", 2: "127.0.0.1:2", 3: "127.0.0.1:3"}
	if err := target.Format(filepath.Join(dir, "mdt0-r1"), target.Identity{Fsname: "nacre", Kind: target.MDT, MGSNode: "127.0.0.1:9",
		Listen: peers[1], ReplicaID: 1, Peers: peers}); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := NewReplica(dir, "mdt0", 4, peers, "/bin/false")
	if err == nil || !strings.Contains(err.Error(), "never reused") {
		t.Fatalf("NewReplica with removed id 4: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "mdt0-r4")); err == nil {
		t.Fatal("NewReplica formatted a directory for the refused id")
	}
}
