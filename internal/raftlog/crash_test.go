package raftlog

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// rewrite overwrites bytes of a file in the log directory.
func rewrite(t *testing.T, fs vfs.FS, name string, off int64, b []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(filepath.Join("log", name), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// removeSpares deletes the prepared segments, as a crash while the
// preparer writes one leaves none (its prep- file is removed at Open).
func removeSpares(t *testing.T, fs vfs.FS) {
	t.Helper()
	names, _ := fs.List("log")
	for _, n := range names {
		if strings.HasPrefix(n, sparePrefix) {
			if err := fs.Remove(filepath.Join("log", n)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestATornHeaderDoesNotBringBackTheSegmentsRecordsLater: a crash before
// the first sync of a new segment can lose the page holding its header and
// keep a later page of the same write. Those records were never synced;
// they must not come back once the log is written again, which they would
// if the segment's file were reused under the same sequence number.
func TestATornHeaderDoesNotBringBackTheSegmentsRecordsLater(t *testing.T) {
	fs := vfs.NewMem()
	o := Options{SegmentSize: 1 << 16}
	l, _ := open(t, fs, o)
	l.SetPrologue(func(func(byte, []byte)) {})
	add(t, l, 'E', "first")
	if err := l.Write(true); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// Reopening seals segment 1 and starts segment 2.
	l, _ = open(t, fs, o)
	l.SetPrologue(func(func(byte, []byte)) {})
	seq := l.ActiveSeq()
	add(t, l, 'E', "a")
	add(t, l, 'E', "b")
	add(t, l, 'E', "c")
	if err := l.Write(false); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// The crash: the header of segment 2 is lost, "a", "b" and "c" are
	// kept, and the preparer had no spare ready.
	rewrite(t, fs, segName(seq), 0, make([]byte, hdrLen))
	removeSpares(t, fs)

	l, got := open(t, fs, o)
	if g := payloads(got, 'E'); !slicesEqual(g, []string{"first"}) {
		t.Fatalf("after the crash: %v, want [first]", g)
	}
	l.SetPrologue(func(func(byte, []byte)) {})
	// Exactly as long as "a", so that a segment written over the same
	// file would have "b" next.
	add(t, l, 'E', "A")
	if err := l.Write(true); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l, got = open(t, fs, o)
	defer l.Close()
	if g := payloads(got, 'E'); !slicesEqual(g, []string{"first", "A"}) {
		t.Fatalf("after the restart: %v, want [first A]: records never synced came back", g)
	}
}

// TestDamageInsideTheNewestSegment tells a record damaged after it was
// written from a tail torn by a crash. A crash keeps or loses whole disk
// sectors, so a failing record followed, in the same sector, by one that
// checks was written whole: the log refuses to open, naming the file and
// the offset, instead of dropping it and every synced record after it.
// Damage that a lost write could explain still ends the log there.
func TestDamageInsideTheNewestSegment(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(p Pos) (off int64, b []byte)
		refused bool
		want    []string // replayed when not refused
	}{
		{"a bit flipped in a payload", func(p Pos) (int64, []byte) { return p.off() + hdrLen + 2, []byte{'r' ^ 0x10} }, true, nil},
		{"a bit flipped in a crc", func(p Pos) (int64, []byte) { return p.off() + 5, []byte{0x5a} }, true, nil},
		{"a record lost (zeros)", func(p Pos) (int64, []byte) { return p.off(), make([]byte, 8+1+len("rec-4")) }, false,
			[]string{"rec-0", "rec-1", "rec-2", "rec-3"}},
		{"a length damaged", func(p Pos) (int64, []byte) { return p.off(), []byte{0xff, 0xff} }, false,
			[]string{"rec-0", "rec-1", "rec-2", "rec-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			l, _ := open(t, fs, Options{SegmentSize: 1 << 16})
			l.SetPrologue(func(func(byte, []byte)) {})
			var pos []Pos
			for i := range 10 {
				pos = append(pos, add(t, l, 'E', fmt.Sprintf("rec-%d", i)))
			}
			if err := l.Write(true); err != nil {
				t.Fatal(err)
			}
			l.Close()
			off, b := tc.damage(pos[4])
			rewrite(t, fs, segName(pos[4].Seq()), off, b)

			var got []string
			l, err := Open(fs, "log", Options{SegmentSize: 1 << 16}, func(r Record) error {
				got = append(got, string(r.Payload))
				return nil
			})
			if !tc.refused {
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
				if !slicesEqual(got, tc.want) {
					t.Fatalf("replayed %v, want %v", got, tc.want)
				}
				return
			}
			name := filepath.Join("log", segName(pos[4].Seq()))
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) ||
				!strings.Contains(err.Error(), fmt.Sprintf("offset %d:", pos[4].off())) {
				if err == nil {
					l.Close()
				}
				t.Fatalf("Open of a log with record 4 of 10 damaged: %v (replayed %v); want ErrCorrupt naming %s, offset %d",
					err, got, name, pos[4].off())
			}
			// Refused, and left as it was: opening again says the same.
			if _, err2 := Open(fs, "log", Options{SegmentSize: 1 << 16}, func(Record) error { return nil }); err2 == nil || err2.Error() != err.Error() {
				t.Fatalf("second Open: %v, first: %v", err2, err)
			}
		})
	}
}
