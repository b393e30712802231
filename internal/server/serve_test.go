package server

import (
	"testing"

	"nacre/internal/obs"
	"nacre/internal/reserve"
	"nacre/internal/target"
)

// A store on a small device gets small memtables, so that what it keeps
// free for itself (two memtables and 16 MiB) leaves most of the device
// to files; on a device of a few GB and more the memtables are full size.
func TestStoreOptionsFitTheDevice(t *testing.T) {
	const mib, gib = 1 << 20, 1 << 30
	for _, c := range []struct {
		kind  target.Kind
		total uint64
		want  uint64
	}{
		{target.MDT, 0, 64 * mib},
		{target.MDT, 100 * gib, 64 * mib},
		{target.MDT, 250 * mib, 4 * mib},
		{target.MDT, 1 * gib, 16 * mib},
		{target.OST, 200 * mib, 4 * mib},
		{target.OST, 100 * gib, 32 * mib},
	} {
		o := StoreOptions(c.kind, c.total)
		if got := o.MemTable(); got != c.want {
			t.Errorf("%s on %d MiB: memtable %d MiB, want %d", c.kind, c.total/mib, got/mib, c.want/mib)
		}
		if c.total > 0 && c.total < gib {
			if r := reserve.Bytes(c.total, o.MemTable()); r > c.total/4 {
				t.Errorf("%s on %d MiB keeps %d MiB for its store", c.kind, c.total/mib, r/mib)
			}
		}
	}
}

// A target records the MGS replicas it follows in its identity, so that
// its next start dials them (after every replica was replaced by hand,
// the old mgs_node reached none).
func TestRecordMGSWritesTheIdentity(t *testing.T) {
	dir := t.TempDir()
	if err := target.Format(dir, target.Identity{Fsname: "x", Kind: target.OST, MGSNode: "127.0.0.1:7001"}); err != nil {
		t.Fatal(err)
	}
	f := &identityFile{dir: dir, log: obs.Discard()}
	f.recordMGS("127.0.0.4:7001,127.0.0.5:7001")
	id, err := target.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The addresses known before stay, after the MGS's (which names only
	// the replicas registered so far).
	if id.MGSNode != "127.0.0.4:7001,127.0.0.5:7001,127.0.0.1:7001" || id.Fsname != "x" || id.Kind != target.OST {
		t.Fatalf("identity after recordMGS: %+v", id)
	}
	f.recordMGS("127.0.0.4:7001,127.0.0.5:7001,127.0.0.6:7001")
	if id, _ = target.Load(dir); id.MGSNode != "127.0.0.4:7001,127.0.0.5:7001,127.0.0.6:7001,127.0.0.1:7001" {
		t.Fatalf("mgs_node after the third replica registered: %q", id.MGSNode)
	}
}
