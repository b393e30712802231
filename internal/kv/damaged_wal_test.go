package kv

import (
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"nacre/test/testdisk"
)

// damageWAL writes keys to a new store in dir, leaves them in its
// write-ahead log only, and flips bytes in the middle of that log, with
// valid records after them (damage, not a torn tail).
func damageWAL(t *testing.T, dir string) {
	t.Helper()
	db, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := db.Set([]byte(fmt.Sprintf("key%06d", i)), make([]byte, 100), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	testdisk.DamageWAL(t, dir)
}

// A store whose write-ahead log is damaged fails to open with ErrDamaged,
// so that its target can say what to do; pebble's own error is kept.
func TestOpenOfADamagedWALIsErrDamaged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	damageWAL(t, dir)
	_, err := Open(dir, Options{MustExist: true})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("open of a store with a damaged write-ahead log: %v, want ErrDamaged", err)
	}
	t.Log(err)
}
