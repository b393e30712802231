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

// Digest depends on every key and value and on where one ends: stores
// holding the same data have the same digest, and any change to a value,
// an extra key, or a byte moved from a key to its value changes it.
func TestDigestSeesEveryKeyAndValue(t *testing.T) {
	digest := func(kvs ...string) (uint64, uint64) {
		t.Helper()
		db, err := OpenMem()
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for i := 0; i < len(kvs); i += 2 {
			if err := db.Set([]byte(kvs[i]), []byte(kvs[i+1]), false); err != nil {
				t.Fatal(err)
			}
		}
		d, n, err := Digest(db)
		if err != nil {
			t.Fatal(err)
		}
		return d, n
	}
	base, n := digest("a", "1", "b", "22")
	if again, _ := digest("b", "22", "a", "1"); again != base || n != 2 {
		t.Fatalf("the same data written in another order: %x, %x (%d keys)", again, base, n)
	}
	for _, other := range [][]string{{"a", "1", "b", "23"}, {"a", "1", "b", "22", "c", ""}, {"a", "1", "b2", "2"}, {"a", "1"}} {
		if d, _ := digest(other...); d == base {
			t.Errorf("%q: the digest of %q", other, []string{"a", "1", "b", "22"})
		}
	}
}
