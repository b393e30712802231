package ost

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.uber.org/goleak"

	"nacre/api/nacrepb"
	"nacre/internal/bulk"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/target"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const seq = 0x100000000

func obj(oid uint64) fid.ObjID { return fid.ObjID{Seq: seq, Oid: oid} }

var (
	fileA = fid.FID{Seq: 0x200000400, Oid: 1}
	fileB = fid.FID{Seq: 0x200000400, Oid: 2}
)

func metaFor(parent fid.FID, stripe uint32) *bulk.ObjMeta {
	return &bulk.ObjMeta{Parent: parent, StripeIndex: stripe, StripeSize: 1 << 20, StripeCount: 4, LayoutGen: 1, UID: 1000, GID: 100, ProjID: 7}
}

// format makes an OST directory and returns it with its identity.
func format(t *testing.T) (string, target.Identity) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ost1")
	if err := target.Format(dir, target.Identity{Fsname: "testfs", Kind: target.OST, Index: 1}); err != nil {
		t.Fatal(err)
	}
	id, err := target.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, id
}

func open(t *testing.T, dir string, id target.Identity, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newStore(t *testing.T) *Store {
	dir, id := format(t)
	return open(t, dir, id, Options{})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func record(t *testing.T, s *Store, o fid.ObjID) *nacrepb.ObjectAttr {
	t.Helper()
	attrs, err := s.GetObjects([]fid.ObjID{o})
	if err != nil {
		t.Fatal(err)
	}
	return attrs[0]
}

func TestOpenRefusesAnotherTarget(t *testing.T) {
	dir, id := format(t)
	mdtDir := filepath.Join(t.TempDir(), "mdt0")
	must(t, target.Format(mdtDir, target.Identity{Fsname: "testfs", Kind: target.MDT}))
	mdtID, _ := target.Load(mdtDir)
	other := id
	other.Fsname = "otherfs"
	ostAsMDT := id
	ostAsMDT.Kind, ostAsMDT.Index = target.OST, 0

	cases := []struct {
		name string
		dir  string
		id   target.Identity
		want []string
	}{
		{"MDT directory", mdtDir, target.Identity{Fsname: "testfs", Kind: target.OST}, []string{"MDT0000", "not an OST"}},
		{"MDT identity", dir, mdtID, []string{"is not an OST"}},
		{"other file system", dir, other, []string{`"testfs"`, `"otherfs"`}},
		{"other index", dir, ostAsMDT, []string{"OST0001", "OST0000"}},
		{"unformatted", t.TempDir(), id, []string{"nacre format"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Open(c.dir, c.id, Options{})
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestPrecreateIsIdempotent(t *testing.T) {
	s := newStore(t)
	cases := []struct {
		name          string
		start, count  uint64
		wantEnd       uint64
		wantObjects   uint64
		wantLastID    uint64
		wantErrno     syscall.Errno
		wantErrSubstr string
	}{
		{name: "fresh range", start: 1, count: 100, wantEnd: 101, wantObjects: 100, wantLastID: 100},
		{name: "same range again", start: 1, count: 100, wantEnd: 101, wantObjects: 100, wantLastID: 100},
		{name: "overlapping range", start: 51, count: 100, wantEnd: 151, wantObjects: 150, wantLastID: 150},
		{name: "range below LAST_ID", start: 20, count: 10, wantEnd: 30, wantObjects: 150, wantLastID: 150},
		{name: "gap", start: 1000, count: 1, wantEnd: 1001, wantObjects: 151, wantLastID: 1000},
		{name: "empty", start: 5000, count: 0, wantEnd: 5000, wantObjects: 151, wantLastID: 1000},
		{name: "capped", start: 2000, count: MaxPrecreate + 10, wantEnd: 2000 + MaxPrecreate, wantObjects: 151 + MaxPrecreate, wantLastID: 1999 + MaxPrecreate},
		{name: "oid 0", start: 0, count: 5, wantErrno: syscall.EINVAL, wantErrSubstr: "start at 1", wantObjects: 151 + MaxPrecreate, wantLastID: 1999 + MaxPrecreate},
		{name: "overflow", start: 1<<64 - 10, count: 20, wantErrno: syscall.EINVAL, wantErrSubstr: "overflow", wantObjects: 151 + MaxPrecreate, wantLastID: 1999 + MaxPrecreate},
	}
	for _, c := range cases {
		end, err := s.Precreate(seq, c.start, c.count)
		if c.wantErrno != 0 {
			if !errors.Is(err, c.wantErrno) || !strings.Contains(err.Error(), c.wantErrSubstr) {
				t.Fatalf("%s: want %v mentioning %q, got %v", c.name, c.wantErrno, c.wantErrSubstr, err)
			}
		} else if err != nil || end != c.wantEnd {
			t.Fatalf("%s: end %d err %v, want %d", c.name, end, err, c.wantEnd)
		}
		last, _ := s.LastID(seq)
		if s.Objects() != c.wantObjects || last != c.wantLastID {
			t.Fatalf("%s: %d objects, LAST_ID %d; want %d, %d", c.name, s.Objects(), last, c.wantObjects, c.wantLastID)
		}
	}
	if s.Precreated() != 151+MaxPrecreate {
		t.Fatalf("Precreated() = %d, want %d: re-requests must not count", s.Precreated(), 151+MaxPrecreate)
	}
	// Precreate leaves existing records alone.
	must(t, s.Write(obj(7), 0, []byte("x"), metaFor(fileA, 0)))
	if _, err := s.Precreate(seq, 1, 10); err != nil {
		t.Fatal(err)
	}
	if r := record(t, s, obj(7)); fid.FromPB(r.Parent) != fileA || r.Size != 1 {
		t.Fatalf("precreate clobbered a written object: %v", r)
	}
	// Other sequences are independent.
	if last, _ := s.LastID(seq + 1); last != 0 {
		t.Fatalf("LAST_ID of an unused sequence: %d", last)
	}
}

func TestCleanupKeepsObjectsWithPFIDAndDestroysTheRest(t *testing.T) {
	s := newStore(t)
	if _, err := s.Precreate(seq, 1, 100); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Precreate(seq+1, 1, 10); err != nil {
		t.Fatal(err)
	}
	must(t, s.Write(obj(10), 0, []byte("below from"), metaFor(fileA, 0)))
	must(t, s.Write(obj(60), 0, []byte("kept"), metaFor(fileA, 1)))
	must(t, s.Truncate(obj(70), 4096, metaFor(fileB, 0)))
	must(t, s.Write(obj(80), 0, []byte("no layout"), nil)) // data but no PFID: an orphan

	destroyed, lastID, err := s.Cleanup(seq, 50)
	if err != nil {
		t.Fatal(err)
	}
	// 50..100 is 51 objects, of which 60 and 70 have a PFID.
	if destroyed != 49 || lastID != 70 {
		t.Fatalf("destroyed %d, last id %d; want 49, 70", destroyed, lastID)
	}
	if s.Objects() != 100+10-49 {
		t.Fatalf("%d objects left, want %d", s.Objects(), 100+10-49)
	}
	if last, _ := s.LastID(seq); last != 70 {
		t.Fatalf("LAST_ID %d after cleanup, want 70", last)
	}
	want := map[uint64]bool{1: true, 10: true, 49: true, 50: false, 59: false, 60: true, 70: true, 71: false, 80: false, 100: false}
	for oid, exists := range want {
		if r := record(t, s, obj(oid)); r.Exists != exists {
			t.Errorf("object %d exists=%v, want %v", oid, r.Exists, exists)
		}
	}
	if _, err := os.Stat(s.path(obj(80))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data file of a destroyed object remains: %v", err)
	}
	if r := record(t, s, obj(60)); fid.FromPB(r.Parent) != fileA || r.StripeIndex != 1 || r.Size != 4 {
		t.Errorf("kept object lost its attributes: %v", r)
	}
	if r := record(t, s, fid.ObjID{Seq: seq + 1, Oid: 5}); !r.Exists {
		t.Error("cleanup of one sequence touched another")
	}
	// A second cleanup finds nothing more to destroy.
	if d, l, err := s.Cleanup(seq, 50); err != nil || d != 0 || l != 70 {
		t.Fatalf("second cleanup: %d %d %v", d, l, err)
	}
	// Cleaning everything (1..49 less object 10, which has a PFID) leaves
	// LAST_ID at the highest PFID'd object.
	if d, l, err := s.Cleanup(seq, 0); err != nil || d != 48 || l != 70 {
		t.Fatalf("cleanup from 0: destroyed %d last %d %v; want 48, 70", d, l, err)
	}
}

func TestCleanupOfAnEmptySequence(t *testing.T) {
	s := newStore(t)
	if d, l, err := s.Cleanup(seq, 1); err != nil || d != 0 || l != 0 {
		t.Fatalf("%d %d %v", d, l, err)
	}
	if _, err := s.Precreate(seq, 1, 3*destroyChunk); err != nil {
		t.Fatal(err)
	}
	if d, l, err := s.Cleanup(seq, 1); err != nil || d != 3*destroyChunk || l != 0 {
		t.Fatalf("cleanup in several chunks: destroyed %d last %d %v", d, l, err)
	}
	if s.Objects() != 0 {
		t.Fatalf("%d objects left", s.Objects())
	}
}

func TestDestroyIsIdempotent(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 10)
	must(t, s.Write(obj(3), 0, []byte("data"), metaFor(fileA, 0)))
	objs := []fid.ObjID{obj(3), obj(4), obj(3), obj(99)}
	n, err := s.Destroy(objs)
	if err != nil || n != 2 {
		t.Fatalf("destroy: %d %v, want 2", n, err)
	}
	n, err = s.Destroy(objs)
	if err != nil || n != 0 {
		t.Fatalf("destroy again: %d %v, want 0", n, err)
	}
	if s.Objects() != 8 {
		t.Fatalf("%d objects, want 8", s.Objects())
	}
	if _, err := os.Stat(s.path(obj(3))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("data file remains: %v", err)
	}
	if a, err := s.GetAttr(obj(3)); err != nil || a.Exists {
		t.Fatalf("getattr of a destroyed object: %+v %v", a, err)
	}
}

func TestWriteToAMissingObjectIsENOENT(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 2)
	s.Destroy([]fid.ObjID{obj(2)})
	for _, o := range []fid.ObjID{obj(5), obj(2)} {
		err := s.Write(o, 0, []byte("x"), metaFor(fileA, 0))
		if !errors.Is(err, syscall.ENOENT) || !errors.Is(err, ErrNoObject) || !strings.Contains(err.Error(), "write OST0001 object "+o.String()) {
			t.Fatalf("write to missing %s: %v", o, err)
		}
		if _, err := os.Stat(s.path(o)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("write to a missing object created its file")
		}
		for name, err := range map[string]error{
			"truncate": s.Truncate(o, 10, nil),
			"punch":    s.Punch(o, 0, 10),
			"sync":     s.Sync(o),
			"setattr":  s.SetAttr(o, metaFor(fileA, 0)),
		} {
			if !errors.Is(err, syscall.ENOENT) {
				t.Errorf("%s of a missing object: %v", name, err)
			}
		}
		if _, err := s.Read(o, 0, make([]byte, 1)); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("read of a missing object: %v", err)
		}
	}
}

func TestSparseObjectsReadHolesAsZeros(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 1)
	// A precreated object without data reads as empty.
	if n, err := s.Read(obj(1), 0, make([]byte, 10)); n != 0 || err != nil {
		t.Fatalf("read of an empty object: %d %v", n, err)
	}
	data := bytes.Repeat([]byte("nacre"), 1000)
	must(t, s.Write(obj(1), 1<<20, data, nil))
	p := make([]byte, 1<<20+len(data)+100)
	n, err := s.Read(obj(1), 0, p)
	if err != nil || n != 1<<20+len(data) {
		t.Fatalf("read: %d %v", n, err)
	}
	if !bytes.Equal(p[:1<<20], make([]byte, 1<<20)) || !bytes.Equal(p[1<<20:n], data) {
		t.Fatal("hole or data read wrong")
	}
	// Reads beyond any file offset find nothing, and give their cached
	// file back.
	if n, err := s.Read(obj(1), 1<<63, p); n != 0 || err != nil {
		t.Fatalf("read at 2^63: %d %v", n, err)
	}
	s.fds.mu.Lock()
	refs := s.fds.m[obj(1)].refs
	s.fds.mu.Unlock()
	if refs != 0 {
		t.Fatalf("%d references to the cached file after reads", refs)
	}
	a, err := s.GetAttr(obj(1))
	if err != nil || a.Size != uint64(1<<20+len(data)) || !a.Exists || a.MtimeNs == 0 {
		t.Fatalf("getattr: %+v %v", a, err)
	}
	if a.Blocks*512 >= 1<<20 {
		t.Fatalf("%d blocks allocated: the hole was filled", a.Blocks)
	}
}

func TestPunchDeallocatesWithoutChangingSize(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 1)
	data := bytes.Repeat([]byte{0xab}, 256<<10)
	must(t, s.Write(obj(1), 0, data, nil))
	before, _ := s.GetAttr(obj(1))
	must(t, s.Punch(obj(1), 64<<10, 64<<10))
	after, _ := s.GetAttr(obj(1))
	if after.Size != before.Size {
		t.Fatalf("punch changed the size: %d -> %d", before.Size, after.Size)
	}
	if after.Blocks >= before.Blocks {
		t.Fatalf("punch freed nothing: %d -> %d blocks", before.Blocks, after.Blocks)
	}
	p := make([]byte, len(data))
	s.Read(obj(1), 0, p)
	want := bytes.Clone(data)
	clear(want[64<<10 : 128<<10])
	if !bytes.Equal(p, want) {
		t.Fatal("punched range does not read as zeros, or too much was punched")
	}
	// Punching an object without data, or beyond the end, is fine.
	s.Precreate(seq, 2, 1)
	must(t, s.Punch(obj(2), 0, 1<<20))
	must(t, s.Punch(obj(1), 1<<40, 1<<62))
	// A punch "to the end" stops at the size instead of failing with EFBIG.
	must(t, s.Punch(obj(1), 192<<10, 1<<63))
	s.Read(obj(1), 0, p)
	clear(want[192<<10:])
	if !bytes.Equal(p, want) {
		t.Fatal("punch to the end did not zero the tail")
	}
	if a, _ := s.GetAttr(obj(1)); a.Size != before.Size {
		t.Fatalf("punch to the end changed the size to %d", a.Size)
	}
}

func TestTruncateDownAndUp(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 2)
	data := bytes.Repeat([]byte{7}, 10000)
	must(t, s.Write(obj(1), 0, data, nil))
	must(t, s.Truncate(obj(1), 3000, nil))
	p := make([]byte, 10000)
	if n, _ := s.Read(obj(1), 0, p); n != 3000 {
		t.Fatalf("after truncate down read %d bytes, want 3000", n)
	}
	must(t, s.Truncate(obj(1), 8000, nil))
	n, _ := s.Read(obj(1), 0, p)
	if n != 8000 || !bytes.Equal(p[:3000], data[:3000]) || !bytes.Equal(p[3000:8000], make([]byte, 5000)) {
		t.Fatalf("after truncate up: %d bytes, or the extension is not zeros", n)
	}
	// Truncating an object without data to zero records its PFID but
	// makes no file; truncating up makes a sparse one.
	must(t, s.Truncate(obj(2), 0, metaFor(fileB, 3)))
	if _, err := os.Stat(s.path(obj(2))); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("truncate to 0 created a file")
	}
	if r := record(t, s, obj(2)); fid.FromPB(r.Parent) != fileB || r.StripeIndex != 3 {
		t.Fatalf("truncate did not record the PFID: %v", r)
	}
	must(t, s.Truncate(obj(2), 1<<30, nil))
	if a, _ := s.GetAttr(obj(2)); a.Size != 1<<30 || a.Blocks != 0 {
		t.Fatalf("sparse truncate up: %+v", a)
	}
}

func TestFirstWriteRecordsPFIDAndLaterOnesDoNot(t *testing.T) {
	// One cached file at a time, so that writes to object 2 evict object
	// 1 and its later writes look its record up again.
	dir, id := format(t)
	s := open(t, dir, id, Options{MaxOpenFiles: 1})
	s.Precreate(seq, 1, 2)
	must(t, s.Write(obj(1), 0, []byte("a"), nil))
	if r := record(t, s, obj(1)); r.Parent != nil {
		t.Fatalf("write without meta recorded a PFID: %v", r)
	}
	must(t, s.Write(obj(1), 0, []byte("b"), metaFor(fileA, 2)))
	must(t, s.Write(obj(1), 1, []byte("c"), metaFor(fileB, 3))) // cached: fast path
	must(t, s.Write(obj(2), 0, []byte("evict"), nil))
	must(t, s.Write(obj(1), 2, []byte("d"), metaFor(fileB, 3))) // reopened: record path
	r := record(t, s, obj(1))
	if fid.FromPB(r.Parent) != fileA || r.StripeIndex != 2 || r.StripeSize != 1<<20 || r.StripeCount != 4 ||
		r.LayoutGen != 1 || r.Uid != 1000 || r.Gid != 100 || r.Projid != 7 {
		t.Fatalf("record after writes: %v", r)
	}
	// An object without data has no cached file: truncating it to 0 goes
	// through the record every time, and the first PFID still wins.
	s.Precreate(seq, 3, 1)
	must(t, s.Truncate(obj(3), 0, metaFor(fileA, 0)))
	must(t, s.Truncate(obj(3), 0, metaFor(fileB, 1)))
	if r := record(t, s, obj(3)); fid.FromPB(r.Parent) != fileA || r.StripeIndex != 0 {
		t.Fatalf("second truncate replaced the PFID: %v", r)
	}
	// chown changes the owner only; a PFID setattr rewrites the PFID.
	must(t, s.SetAttr(obj(1), &bulk.ObjMeta{UID: 1, GID: 2, Valid: bulk.MetaOwner}))
	r = record(t, s, obj(1))
	if r.Uid != 1 || r.Gid != 2 || fid.FromPB(r.Parent) != fileA || r.Projid != 7 {
		t.Fatalf("after chown: %v", r)
	}
	must(t, s.SetAttr(obj(1), &bulk.ObjMeta{Parent: fileB, StripeIndex: 5, Valid: bulk.MetaPFID}))
	if r = record(t, s, obj(1)); fid.FromPB(r.Parent) != fileB || r.StripeIndex != 5 || r.Uid != 1 {
		t.Fatalf("after PFID setattr: %v", r)
	}
}

func TestSyncSyncsTheWALOnlyWhenARecordChanged(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 1)
	must(t, s.Write(obj(1), 0, []byte("a"), metaFor(fileA, 0)))
	if s.recDirty.Load() != 1 {
		t.Fatalf("first write through a layout made %d record writes, want 1", s.recDirty.Load())
	}
	must(t, s.Sync(obj(1)))
	// The first sync also records that the data file is on disk.
	if s.recDirty.Load() != 2 || s.recSynced.Load() != 2 {
		t.Fatalf("after the first sync: %d record writes, %d synced; want 2 and 2", s.recDirty.Load(), s.recSynced.Load())
	}
	for i := range 10 {
		must(t, s.Write(obj(1), uint64(i), []byte("b"), metaFor(fileA, 0)))
	}
	must(t, s.Sync(obj(1)))
	if s.recDirty.Load() != 2 {
		t.Fatalf("later writes and syncs rewrote the record: %d record writes", s.recDirty.Load())
	}
}

// A synced object whose data file is gone (removed by hand, a damaged
// file system) is an I/O error naming the file, never zeros; an object
// whose file was never synced reads as empty, as after a crash that lost
// unsynced writes.
func TestASyncedObjectWhoseDataFileIsMissingIsAnError(t *testing.T) {
	dir, id := format(t)
	s, err := Open(dir, id, Options{})
	must(t, err)
	s.Precreate(seq, 1, 2)
	must(t, s.Write(obj(1), 0, []byte("synced data"), metaFor(fileA, 0)))
	must(t, s.Sync(obj(1)))
	must(t, s.Write(obj(2), 0, []byte("never synced"), metaFor(fileA, 1)))
	must(t, s.Close())
	for _, o := range []fid.ObjID{obj(1), obj(2)} {
		if err := os.Remove(s.path(o)); err != nil {
			t.Fatal(err)
		}
	}
	s = open(t, dir, id, Options{})
	p := make([]byte, 16)
	n, err := s.Read(obj(1), 0, p)
	if !errors.Is(err, ErrDataLost) || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), s.path(obj(1))) {
		t.Fatalf("read of a synced object without its data file: %d bytes, %v; want EIO naming the file", n, err)
	}
	if err := s.Write(obj(1), 0, []byte("x"), nil); !errors.Is(err, ErrDataLost) {
		t.Fatalf("write to a synced object without its data file: %v; want it refused, not a new empty file", err)
	}
	if n, err := s.Read(obj(2), 0, p); err != nil || n != 0 {
		t.Fatalf("read of a never synced object without its data file: %d bytes, %v; want none", n, err)
	}
}

func TestReopenKeepsObjectsRecordsAndData(t *testing.T) {
	dir, id := format(t)
	s, err := Open(dir, id, Options{})
	must(t, err)
	s.Precreate(seq, 1, 20)
	must(t, s.Write(obj(4), 100, []byte("persist"), metaFor(fileA, 1)))
	s.Destroy([]fid.ObjID{obj(5)})
	must(t, s.Close())
	if err := s.Write(obj(4), 0, []byte("x"), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}

	s = open(t, dir, id, Options{})
	if s.Objects() != 19 {
		t.Fatalf("%d objects after reopen, want 19", s.Objects())
	}
	if last, _ := s.LastID(seq); last != 20 {
		t.Fatalf("LAST_ID %d after reopen", last)
	}
	r := record(t, s, obj(4))
	if fid.FromPB(r.Parent) != fileA || r.Size != 107 {
		t.Fatalf("record after reopen: %v", r)
	}
	p := make([]byte, 7)
	if n, _ := s.Read(obj(4), 100, p); string(p[:n]) != "persist" {
		t.Fatalf("data after reopen: %q", p[:n])
	}
	if record(t, s, obj(5)).Exists {
		t.Fatal("destroyed object back after reopen")
	}
}

// TestOnlySyncedRecordsSurviveACrash runs the attribute store on pebble's
// crashable memory file system and cuts the power: what Precreate, Destroy
// and Sync synced must be there, an unsynced PFID must not.
func TestOnlySyncedRecordsSurviveACrash(t *testing.T) {
	dir, id := format(t)
	mem := vfs.NewCrashableMem()
	s, err := Open(dir, id, Options{KV: kv.Options{FS: mem}})
	must(t, err)
	_, err = s.Precreate(seq, 1, 10)
	must(t, err)
	_, err = s.Destroy([]fid.ObjID{obj(3)})
	must(t, err)
	must(t, s.Write(obj(1), 0, []byte("synced"), metaFor(fileA, 0)))
	must(t, s.Sync(obj(1)))
	must(t, s.Write(obj(2), 0, []byte("not synced"), metaFor(fileB, 0)))

	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	s.Close()

	s = open(t, dir, id, Options{KV: kv.Options{FS: crashed}})
	if s.Objects() != 9 {
		t.Fatalf("%d objects after the crash, want 9", s.Objects())
	}
	if r := record(t, s, obj(1)); fid.FromPB(r.Parent) != fileA {
		t.Fatalf("synced PFID lost: %v", r)
	}
	if r := record(t, s, obj(2)); !r.Exists || r.Parent != nil {
		t.Fatalf("object 2 should exist (precreate was synced) without its unsynced PFID: %v", r)
	}
	if record(t, s, obj(3)).Exists {
		t.Fatal("synced destroy undone by the crash")
	}
	if last, _ := s.LastID(seq); last != 10 {
		t.Fatalf("LAST_ID %d after the crash", last)
	}
}

func TestENOSPCSurfacesAsAnErrnoAndHarmsNothing(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir, id := format(t)
	s := open(t, dir, id, Options{})
	s.Precreate(seq, 1, 2)
	// Every write to /dev/full fails with ENOSPC: make it object 1's file.
	must(t, os.MkdirAll(s.bucketDir(obj(1)), 0o755))
	must(t, os.Symlink("/dev/full", s.path(obj(1))))
	err := s.Write(obj(1), 0, []byte("data"), metaFor(fileA, 0))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "write OST0001 object 0x100000000:0x1 at 0") {
		t.Fatalf("want ENOSPC with context, got %v", err)
	}
	// The rest of the store is unharmed.
	must(t, s.Write(obj(2), 0, []byte("fine"), metaFor(fileB, 0)))
	must(t, s.Sync(obj(2)))
	if r := record(t, s, obj(2)); fid.FromPB(r.Parent) != fileB || r.Size != 4 {
		t.Fatalf("other object: %v", r)
	}
}

func TestCorruptRecordIsEIO(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 2)
	// The record of object 2 stored under object 1's key: an LMA mismatch.
	must(t, s.db.Set(objKey(obj(1)), encodeRecord(&nacrepb.ObjectAttr{Seq: seq, Oid: 2}), true))
	if err := s.Write(obj(1), 0, []byte("x"), nil); !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "names object") {
		t.Fatalf("write over a corrupt record: %v", err)
	}
	if _, err := s.GetObjects([]fid.ObjID{obj(1)}); !errors.Is(err, syscall.EIO) {
		t.Fatalf("getobjects of a corrupt record: %v", err)
	}
	// Cleanup leaves it to the checker.
	if d, _, err := s.Cleanup(seq, 1); err != nil || d != 1 {
		t.Fatalf("cleanup: %d %v, want object 2 only", d, err)
	}
}

func TestFileCacheIsBounded(t *testing.T) {
	dir, id := format(t)
	s := open(t, dir, id, Options{MaxOpenFiles: 4})
	s.Precreate(seq, 1, 10)
	for i := uint64(1); i <= 10; i++ {
		must(t, s.Write(obj(i), 0, []byte(fmt.Sprint(i)), nil))
		if n := s.OpenFiles(); n > 4 {
			t.Fatalf("%d files open, limit 4", n)
		}
	}
	for i := uint64(1); i <= 10; i++ {
		p := make([]byte, 2)
		n, err := s.Read(obj(i), 0, p)
		if err != nil || string(p[:n]) != fmt.Sprint(i) {
			t.Fatalf("object %d: %q %v", i, p[:n], err)
		}
	}
}

// TestDestroyRacingWrites: writers hammer objects while they are
// destroyed. Every write either lands before the destroy or fails with
// ENOENT; afterwards no object, record or file is left (run with -race).
func TestDestroyRacingWrites(t *testing.T) {
	dir, id := format(t)
	s := open(t, dir, id, Options{MaxOpenFiles: 8})
	const n = 32
	s.Precreate(seq, 1, n)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := bytes.Repeat([]byte{byte(w)}, 4096)
			for round := range 50 {
				for i := uint64(1); i <= n; i++ {
					err := s.Write(obj(i), uint64(round)*4096, buf, metaFor(fileA, uint32(i)))
					if err != nil && !errors.Is(err, syscall.ENOENT) {
						errs <- err
						return
					}
					s.Read(obj(i), 0, buf[:10])
				}
			}
		}()
	}
	objs := make([]fid.ObjID, n)
	for i := range objs {
		objs[i] = obj(uint64(i + 1))
	}
	d, err := s.Destroy(objs)
	must(t, err)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if d != n || s.Objects() != 0 {
		t.Fatalf("destroyed %d, %d left", d, s.Objects())
	}
	for _, o := range objs {
		if _, err := os.Stat(s.path(o)); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("file of destroyed %s remains", o)
		}
	}
}

func TestGetObjectsAndIterObjects(t *testing.T) {
	s := newStore(t)
	s.Precreate(seq, 1, 5)
	s.Precreate(seq+1, 1, 5)
	must(t, s.Write(obj(2), 0, make([]byte, 8192), metaFor(fileA, 1)))
	attrs, err := s.GetObjects([]fid.ObjID{obj(2), obj(9), obj(1)})
	must(t, err)
	if len(attrs) != 3 || !attrs[0].Exists || attrs[0].Size != 8192 || attrs[0].Blocks < 16 || attrs[0].MtimeNs == 0 ||
		fid.FromPB(attrs[0].Parent) != fileA || attrs[1].Exists || attrs[1].Oid != 9 || !attrs[2].Exists || attrs[2].Size != 0 {
		t.Fatalf("GetObjects: %v", attrs)
	}

	var seen []fid.ObjID
	collect := func(a *nacrepb.ObjectAttr) error {
		seen = append(seen, fid.ObjID{Seq: a.Seq, Oid: a.Oid})
		if !a.Exists {
			t.Errorf("iterated record without Exists: %v", a)
		}
		return nil
	}
	must(t, s.IterObjects(obj(4), fid.ObjID{Seq: seq + 1, Oid: 3}, collect))
	want := []fid.ObjID{obj(4), obj(5), {Seq: seq + 1, Oid: 1}, {Seq: seq + 1, Oid: 2}}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("iterated %v, want %v", seen, want)
	}
	seen = nil
	must(t, s.IterObjects(fid.ObjID{}, fid.ObjID{}, collect))
	if len(seen) != 10 {
		t.Fatalf("iterated %d objects, want 10", len(seen))
	}
	stop := errors.New("stop")
	calls := 0
	if err := s.IterObjects(fid.ObjID{}, fid.ObjID{}, func(*nacrepb.ObjectAttr) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("early stop: %v after %d calls", err, calls)
	}
}

func TestStatfsCountsObjects(t *testing.T) {
	s := newStore(t)
	before, err := s.Statfs()
	must(t, err)
	if before.BytesTotal == 0 || before.BytesAvail > before.BytesTotal || before.InodesTotal == 0 {
		t.Fatalf("statfs: %v", before)
	}
	s.Precreate(seq, 1, 1000)
	after, _ := s.Statfs()
	if after.InodesFree > after.InodesTotal-1000 {
		t.Fatalf("1000 objects did not reduce free inodes: %v", after)
	}
}

// TestObjectDataIsItsOwnersAlone: the object directory, its buckets and
// the object files are readable by the OST's user only, so that no other
// user of the server reads file data under its directory.
func TestObjectDataIsItsOwnersAlone(t *testing.T) {
	dir, id := format(t)
	s := open(t, dir, id, Options{})
	s.Precreate(seq, 1, 1)
	must(t, s.Write(obj(1), 0, []byte("secret"), nil))
	p := s.path(obj(1))
	for f, want := range map[string]os.FileMode{p: 0o600, filepath.Dir(p): 0o700, target.ObjectsDir(dir): 0o700, target.StoreDir(dir): 0o700} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %#o, want %#o", f, got, want)
		}
	}
}
