package diskio

import (
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestFileCountsEachDirtyPageOncePerSync: a table of write patterns and
// the pages the device receives for them.
func TestFileCountsEachDirtyPageOncePerSync(t *testing.T) {
	for _, tc := range []struct {
		name   string
		writes []write
		pages  uint64
	}{
		{"one small write", []write{{0, 100, false}}, 1},
		{"synced appends into one page", []write{{0, 100, true}, {100, 100, true}, {200, 100, true}}, 3},
		{"unsynced appends into one page", []write{{0, 100, false}, {100, 100, false}, {200, 100, false}}, 1},
		{"a write across a page boundary", []write{{4000, 200, false}}, 2},
		{"sequential 1 MiB in 4 KiB writes", seq(0, 4096, 256), 256},
		{"sequential 1 MiB in 1000-byte writes", seq(0, 1000, 1049), 257},
		{"rewrite before sync", []write{{0, 8192, false}, {0, 8192, false}}, 2},
		{"rewrite after sync", []write{{0, 8192, true}, {0, 8192, false}}, 4},
		{"scattered, then covering", []write{{0, 1, false}, {3 * 4096, 1, false}, {6 * 4096, 1, false}, {0, 7 * 4096, false}}, 7},
		{"below the last span", []write{{10 * 4096, 4096, false}, {2 * 4096, 4096, false}, {2 * 4096, 100, false}}, 2},
		{"an empty write", []write{{0, 0, false}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Counter{}
			f := c.NewFile()
			for _, w := range tc.writes {
				f.Wrote(w.off, w.n)
				if w.sync {
					f.Synced()
				}
			}
			if got := c.Written(); got != tc.pages*PageSize {
				t.Fatalf("counted %d bytes (%d pages), want %d pages", got, got/PageSize, tc.pages)
			}
		})
	}
}

type write struct {
	off  int64
	n    int
	sync bool // a sync after this write
}

// seq is count writes of size bytes, one after the other from off.
func seq(off int64, size, count int) []write {
	ws := make([]write, count)
	for i := range ws {
		ws[i] = write{off: off + int64(i*size), n: size}
	}
	return ws
}

// TestFSCountsWritesThroughPebbleFiles: files of the wrapped file system
// count Write (at the file offset, after reads), WriteAt and syncs.
func TestFSCountsWritesThroughPebbleFiles(t *testing.T) {
	c := &Counter{}
	fs := c.FS(vfs.Default)
	dir := t.TempDir()
	f, err := fs.Create(filepath.Join(dir, "log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := uint64(0)
	check := func(what string) {
		t.Helper()
		if got := c.Written(); got != want {
			t.Fatalf("%s: counted %d bytes, want %d", what, got, want)
		}
	}
	for range 3 {
		if _, err := f.Write(make([]byte, 100)); err != nil {
			t.Fatal(err)
		}
		if err := f.SyncData(); err != nil {
			t.Fatal(err)
		}
		want += PageSize
	}
	check("three synced 100-byte appends")
	if _, err := f.Write(make([]byte, 2*PageSize)); err != nil { // at 300: pages 0-2
		t.Fatal(err)
	}
	want += 3 * PageSize
	check("an append across pages")
	if _, err := f.WriteAt(make([]byte, 10), 5*PageSize); err != nil {
		t.Fatal(err)
	}
	want += PageSize
	check("a write at an offset")
	if _, err := f.WriteAt(make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	check("a rewrite of a dirty page")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 10), 0); err != nil {
		t.Fatal(err)
	}
	want += PageSize
	check("a rewrite after a sync")

	r, err := fs.OpenReadWrite(filepath.Join(dir, "log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Read(make([]byte, 3*PageSize)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Write(make([]byte, 1)); err != nil { // at 3 pages
		t.Fatal(err)
	}
	want += PageSize
	check("a write after a read, in another handle")

	var nilc *Counter
	if nilc.FS(vfs.Default) != vfs.Default || nilc.Written() != 0 || nilc.NewFile() != nil {
		t.Fatal("a nil Counter must wrap nothing and count nothing")
	}
}
