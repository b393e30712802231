package mds

import "testing"

// TestUnsyncedTailHandsOutWhatTheClientLacks: a reply carries the
// unsynced entries after what the client holds, up to its own, and
// nothing the log has synced.
func TestUnsyncedTailHandsOutWhatTheClientLacks(t *testing.T) {
	var u unsyncedTail
	for i := uint64(1); i <= 10; i++ {
		u.add(i, 3, []byte{byte(i)}, 4)
	}
	for _, c := range []struct {
		name               string
		from, to, synced   uint64
		wantFirst, wantLen uint64
	}{
		{"a new client", 0, 8, 4, 5, 4},
		{"holds up to 6", 6, 8, 4, 7, 2},
		{"its own entry only", 7, 8, 4, 8, 1},
		{"synced since", 0, 10, 8, 9, 2},
		{"all synced", 0, 10, 10, 0, 0},
	} {
		got := u.since(c.from, c.to, c.synced)
		if uint64(len(got)) != c.wantLen || (len(got) > 0 && (got[0].Index != c.wantFirst || got[0].Term != 3)) {
			t.Errorf("%s: got %d entries from %v, want %d from %d", c.name, len(got), got, c.wantLen, c.wantFirst)
		}
	}
	if len(u.ents) != 0 {
		t.Errorf("%d entries kept after the log synced them all", len(u.ents))
	}
}
