package serve

import (
	"testing"

	"nacre/internal/space"
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
			if r := space.Reserve(c.total, o.MemTable()); r > c.total/4 {
				t.Errorf("%s on %d MiB keeps %d MiB for its store", c.kind, c.total/mib, r/mib)
			}
		}
	}
}
