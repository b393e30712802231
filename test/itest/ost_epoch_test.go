package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/target"
	"nacre/test/testcluster"
)

// TestSyncReportsWritesAnOSTMayHaveLost: a client writes, the OST dies
// before the client syncs, and comes back. If only its process died
// (kill -9), the page cache kept the writes: the sync succeeds and the
// data reads back. If its machine restarted as well (a power cut,
// pretended here by the kernel boot id in the OST's epoch record), the
// writes may be gone, and so may a truncate: the sync fails with EIO
// naming the OST, once. Before,
// such a sync succeeded and the file read back as zeros or empty (found by
// cutting the power of an OST's file system under load).
func TestSyncReportsWritesAnOSTMayHaveLost(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	c := cl.Client(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		powered  bool
		truncate bool // the change not synced is a truncate, not a write
	}{{"process-killed", false, false}, {"power-cut", true, false}, {"truncated-power-cut", true, true}} {
		ino, _, err := c.Create(ctx, fid.Root, tc.name, 0o644, client.CreateOpts{Exclusive: true})
		if err != nil {
			t.Fatal(err)
		}
		f := c.OpenInode(ino)
		data := patterned(300<<10, 3)
		if _, err := f.WriteAt(ctx, data, 0); err != nil {
			t.Fatal(err)
		}
		if tc.truncate {
			if err := f.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(ctx, 100); err != nil {
				t.Fatal(err)
			}
		}
		cl.Kill("ost0", syscall.SIGKILL)
		if tc.powered {
			pretendRebooted(t, cl.TargetDir("ost0"))
		}
		cl.Restart()
		err = f.Sync(ctx)
		if !tc.powered {
			if err != nil {
				t.Fatalf("%s: sync: %v", tc.name, err)
			}
			mustRead(t, ctx, c, "/"+tc.name, data)
		} else if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "OST0000 (stripe 0) restarted after acknowledging writes it had not made durable") {
			t.Fatalf("%s: sync: %v, want EIO naming OST0000", tc.name, err)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatalf("%s: close after the sync: %v", tc.name, err)
		}
	}
}

// pretendRebooted makes the stopped OST in dir find, at its next start,
// that its last run was on another kernel.
func pretendRebooted(t *testing.T, dir string) {
	t.Helper()
	db, err := kv.Open(target.StoreDir(dir), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	key := []byte{'e'} // ost.epochKey
	v, err := db.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(v, &r); err != nil {
		t.Fatal(err)
	}
	if r["clean"] != false {
		t.Fatalf("the killed OST's epoch record says it stopped cleanly: %s", v)
	}
	r["boot"] = "another-boot"
	b, _ := json.Marshal(r)
	if err := db.Set(key, b, true); err != nil {
		t.Fatal(err)
	}
}

// TestFuseCloseReportsATruncateAnOSTMayHaveLost: a truncate through an
// open handle, with no write, is made durable by the close like a write
// is, so a close after the OST lost power reports it. Before, a close of
// a handle that wrote nothing synced nothing and returned 0, and the old
// data came back.
func TestFuseCloseReportsATruncateAnOSTMayHaveLost(t *testing.T) {
	cl, m := oneOSTMount(t)
	p := m.Path("t")
	if err := os.WriteFile(p, bytes.Repeat([]byte("C"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		t.Fatal(err)
	}
	cl.Kill("ost0", syscall.SIGKILL)
	pretendRebooted(t, cl.TargetDir("ost0"))
	cl.Restart()
	if err := f.Close(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("close after the OST lost power: %v, want EIO", err)
	}
}
