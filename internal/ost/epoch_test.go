package ost

import (
	"encoding/json"
	"testing"

	"nacre/internal/kv"
	"nacre/internal/target"
)

// The epoch stays across a clean stop and across a death of the process
// alone (same kernel, same mount: the page cache kept every acknowledged
// write), and moves on when the last run did not stop cleanly and the
// kernel or the mount changed since (a power cut: acknowledged writes may
// be lost).
func TestEpochMovesOnlyWhenUnsyncedWritesMayBeLost(t *testing.T) {
	dir, id := format(t)
	reopen := func() uint64 {
		t.Helper()
		s, err := Open(dir, id, Options{})
		if err != nil {
			t.Fatal(err)
		}
		e := s.Epoch()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return e
	}
	// lastRun rewrites the record of the last run as an unclean stop
	// (what a kill leaves), on another kernel or mount if asked.
	lastRun := func(boot, mount string) {
		t.Helper()
		db, err := kv.Open(target.StoreDir(dir), kv.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		v, err := db.Get(epochKey)
		if err != nil {
			t.Fatal(err)
		}
		var r epochRec
		if err := json.Unmarshal(v, &r); err != nil {
			t.Fatal(err)
		}
		r.Clean = false
		if boot != "" {
			r.Boot = boot
		}
		if mount != "" {
			r.Mount = mount
		}
		b, _ := json.Marshal(r)
		if err := db.Set(epochKey, b, true); err != nil {
			t.Fatal(err)
		}
	}
	first := reopen()
	if first == 0 {
		t.Fatal("no epoch")
	}
	if e := reopen(); e != first {
		t.Fatalf("after a clean stop: epoch %d, want %d", e, first)
	}
	lastRun("", "")
	if e := reopen(); e != first {
		t.Fatalf("after the process alone died: epoch %d, want %d", e, first)
	}
	lastRun("another-boot", "")
	if e := reopen(); e != first+1 {
		t.Fatalf("after a reboot: epoch %d, want %d", e, first+1)
	}
	lastRun("", "another-mount")
	if e := reopen(); e != first+2 {
		t.Fatalf("after the file system was mounted again: epoch %d, want %d", e, first+2)
	}
	if e := reopen(); e != first+2 {
		t.Fatalf("after a clean stop again: epoch %d, want %d", e, first+2)
	}
}
