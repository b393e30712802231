package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"nacre/internal/kv"
	"nacre/internal/obs"
	"nacre/internal/target"
	"nacre/test/testdisk"
)

// An OST whose store's write-ahead log is damaged does not start, and
// says what that means and what can be done: start the cluster without it
// (--allow-missing), put its directory back from a copy, and find what
// files lost with a layout check. Before, the error was pebble's alone
// ("pebble: error when replaying WAL: pebble/record: invalid chunk").
func TestAnOSTWithADamagedStoreSaysWhatToDo(t *testing.T) {
	dir := t.TempDir()
	if err := target.Format(dir, target.Identity{Fsname: "x", Kind: target.OST, Index: 1, MGSNode: "127.0.0.1:1",
		Listen: "127.0.0.1:0", DataListen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	store := target.StoreDir(dir)
	db, err := kv.Open(store, kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := db.Set([]byte(fmt.Sprintf("key%06d", i)), make([]byte, 100), true); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	testdisk.DamageWAL(t, store)
	done := make(chan error, 1)
	go func() { done <- Run(t.Context(), dir, Options{Log: obs.Discard()}) }()
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("an OST with a damaged store started")
	}
	if err == nil {
		t.Fatal("an OST with a damaged store served")
	}
	for _, w := range []string{"x-OST0001", store, "its files are damaged", "invalid chunk", "nacre up --allow-missing", dir, "nacre lfsck start -t layout"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
}
