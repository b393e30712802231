package kv

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestBatchReadsOwnWritesAndCommitsAtomically(t *testing.T) {
	db, err := OpenMem()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	b := db.NewBatch()
	b.Set([]byte("a"), []byte("1"))
	if v, err := b.Get([]byte("a")); err != nil || string(v) != "1" {
		t.Fatalf("batch read: %q %v", v, err)
	}
	if _, err := db.Get([]byte("a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("uncommitted write visible: %v", err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	if v, err := db.Get([]byte("a")); err != nil || string(v) != "1" {
		t.Fatalf("after commit: %q %v", v, err)
	}
}

func TestIterBoundsAndPrefixEnd(t *testing.T) {
	db, _ := OpenMem()
	defer db.Close()
	for _, k := range []string{"d\x00", "d\x01", "d\xff", "e"} {
		db.Set([]byte(k), nil, false)
	}
	it, _ := db.NewIter([]byte("d"), PrefixEnd([]byte("d")))
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	it.Close()
	if n != 3 {
		t.Fatalf("prefix iteration saw %d keys, want 3", n)
	}
	if PrefixEnd([]byte{0xff, 0xff}) != nil {
		t.Fatal("PrefixEnd of all 0xff must be nil")
	}
}

// TestOnlySyncedWritesSurviveCrash proves the seam the crash tests build
// on: after a simulated power cut only synced batches remain.
func TestOnlySyncedWritesSurviveCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	db, err := Open("db", Options{FS: mem})
	if err != nil {
		t.Fatal(err)
	}
	db.Set([]byte("synced"), []byte("x"), true)
	crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	db.Set([]byte("unsynced"), []byte("y"), false)
	crashed2 := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	db.Close()
	for i, fs := range []*vfs.MemFS{crashed, crashed2} {
		re, err := Open("db", Options{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := re.Get([]byte("synced")); err != nil {
			t.Fatalf("clone %d lost a synced write: %v", i, err)
		}
		if _, err := re.Get([]byte("unsynced")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("clone %d kept an unsynced write", i)
		}
		re.Close()
	}
}
