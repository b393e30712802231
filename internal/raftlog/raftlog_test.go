package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

type rec struct {
	typ byte
	p   string
}

func open(t *testing.T, fs vfs.FS, o Options) (*Log, []rec) {
	t.Helper()
	var got []rec
	l, err := Open(fs, "log", o, func(r Record) error {
		got = append(got, rec{r.Type, string(r.Payload)})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, got
}

func add(t *testing.T, l *Log, typ byte, p string) Pos {
	t.Helper()
	pos, err := l.Add(typ, []byte(p))
	if err != nil {
		t.Fatal(err)
	}
	return pos
}

func payloads(rs []rec, typ byte) []string {
	var out []string
	for _, r := range rs {
		if r.typ == typ {
			out = append(out, r.p)
		}
	}
	return out
}

func TestRecordsComeBackInOrderAcrossSegments(t *testing.T) {
	fs := vfs.NewMem()
	l, got := open(t, fs, Options{SegmentSize: 4096})
	if len(got) != 0 {
		t.Fatalf("a new log replayed %v", got)
	}
	l.SetPrologue(func(add func(byte, []byte)) { add('P', []byte("prologue")) })
	var want []string
	var pos []Pos
	for i := range 200 {
		p := fmt.Sprintf("entry-%03d-%s", i, strings.Repeat("x", 60+i%50))
		want = append(want, p)
		pos = append(pos, add(t, l, 'E', p))
		if i%7 == 0 {
			if err := l.Write(i%14 == 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if l.Segments() < 4 {
		t.Fatalf("%d segments of 4 KiB for 200 records; rotation did not happen", l.Segments())
	}
	// Every record reads back, staged, written or in a closed segment.
	for i, p := range pos {
		typ, b, err := l.Read(p)
		if err != nil || typ != 'E' || string(b) != want[i] {
			t.Fatalf("Read(record %d) = %q %q %v, want %q", i, typ, b, err, want[i])
		}
	}
	segs := l.Segments()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, got = open(t, fs, Options{SegmentSize: 4096})
	defer l.Close()
	if g := payloads(got, 'E'); !slicesEqual(g, want) {
		t.Fatalf("replayed %d records, want %d: %v", len(g), len(want), g)
	}
	// Each segment began with the prologue.
	if n := len(payloads(got, 'P')); n != segs {
		t.Fatalf("%d prologues replayed for %d segments", n, segs)
	}
	for i, p := range pos {
		if typ, b, err := l.Read(p); err != nil || typ != 'E' || string(b) != want[i] {
			t.Fatalf("after reopen, Read(record %d) = %q %q %v", i, typ, b, err)
		}
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOnlySyncedRecordsSurviveACrash cuts the power after a synced and an
// unsynced write.
func TestOnlySyncedRecordsSurviveACrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	l, _ := open(t, mem, Options{SegmentSize: 1 << 16})
	l.SetPrologue(func(func(byte, []byte)) {})
	add(t, l, 'E', "a")
	add(t, l, 'E', "b")
	if err := l.Write(true); err != nil {
		t.Fatal(err)
	}
	add(t, l, 'E', "c")
	if err := l.Write(false); err != nil {
		t.Fatal(err)
	}
	crash := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	l.Close()

	l, got := open(t, crash, Options{SegmentSize: 1 << 16})
	if g := payloads(got, 'E'); !slicesEqual(g, []string{"a", "b"}) {
		t.Fatalf("after the crash: %v, want [a b]", g)
	}
	l.SetPrologue(func(func(byte, []byte)) {})
	add(t, l, 'E', "d")
	if err := l.Write(true); err != nil {
		t.Fatal(err)
	}
	l.Close()
	_, got = open(t, crash, Options{SegmentSize: 1 << 16})
	if g := payloads(got, 'E'); !slicesEqual(g, []string{"a", "b", "d"}) {
		t.Fatalf("after the restart: %v, want [a b d]", g)
	}
}

// TestAHoleEndsTheLogAndWhatFollowsNeverReturns: a crash can keep a later
// unsynced record and lose an earlier one; the later one must not come
// back once new records are written where the hole was.
func TestAHoleEndsTheLogAndWhatFollowsNeverReturns(t *testing.T) {
	fs := vfs.NewMem()
	l, _ := open(t, fs, Options{SegmentSize: 1 << 16})
	l.SetPrologue(func(func(byte, []byte)) {})
	add(t, l, 'E', "a")
	pb := add(t, l, 'E', "b")
	add(t, l, 'E', "c")
	if err := l.Write(true); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// Lose "b": zero its bytes in place.
	f, err := fs.OpenReadWrite(filepath.Join("log", segName(pb.Seq())), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 10), pb.off()); err != nil {
		t.Fatal(err)
	}
	f.Close()

	l, got := open(t, fs, Options{SegmentSize: 1 << 16})
	if g := payloads(got, 'E'); !slicesEqual(g, []string{"a"}) {
		t.Fatalf("replayed %v, want [a]", g)
	}
	l.SetPrologue(func(func(byte, []byte)) {})
	// Exactly b's size, so that a new record would end where c begins.
	add(t, l, 'E', "B")
	if err := l.Write(true); err != nil {
		t.Fatal(err)
	}
	l.Close()
	_, got = open(t, fs, Options{SegmentSize: 1 << 16})
	if g := payloads(got, 'E'); !slicesEqual(g, []string{"a", "B"}) {
		t.Fatalf("replayed %v, want [a B]: the record after the hole came back", g)
	}
}

func TestDamageBeforeTheNewestSegmentIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	l, _ := open(t, fs, Options{SegmentSize: 4096})
	l.SetPrologue(func(func(byte, []byte)) {})
	first := add(t, l, 'E', "first")
	for i := range 100 {
		add(t, l, 'E', strings.Repeat("y", 100+i))
	}
	if err := l.Write(true); err != nil {
		t.Fatal(err)
	}
	l.Close()
	name := filepath.Join("log", segName(first.Seq()))
	f, _ := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	f.WriteAt([]byte{0xff, 0xff}, first.off()+12)
	f.Close()
	_, err := Open(fs, "log", Options{SegmentSize: 4096}, func(Record) error { return nil })
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "cannot be trusted") {
		t.Fatalf("Open of a log damaged in an old segment: %v", err)
	}
}

func TestAnotherFormatIsRefused(t *testing.T) {
	fs := vfs.NewMem()
	l, _ := open(t, fs, Options{})
	l.SetPrologue(func(func(byte, []byte)) {})
	seq := l.ActiveSeq()
	add(t, l, 'E', "a")
	l.Close()
	// Rewrite the header of the (sealed) first segment with format 99.
	name := filepath.Join("log", segName(seq))
	f, _ := fs.OpenReadWrite(name, vfs.WriteCategoryUnspecified)
	p := headerPayload(seq)
	p[len(magic)] = 99
	f.WriteAt(appendRecord(nil, seq, typHeader, p), 0)
	f.Close()
	_, err := Open(fs, "log", Options{}, func(Record) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "format 99") || !strings.Contains(err.Error(), name) {
		t.Fatalf("Open of a segment of format 99: %v", err)
	}
}

// TestReleasedSegmentsAreRecycledWithoutTheirRecords reuses segment files
// many times; nothing of an earlier life is replayed.
func TestReleasedSegmentsAreRecycledWithoutTheirRecords(t *testing.T) {
	fs := vfs.NewMem()
	l, _ := open(t, fs, Options{SegmentSize: 4096})
	trunc := "t0"
	l.SetPrologue(func(add func(byte, []byte)) { add('T', []byte(trunc)) })
	var kept []string
	for round := range 20 {
		var firstPos Pos
		kept = kept[:0]
		for i := range 60 {
			p := fmt.Sprintf("r%02d-%02d-%s", round, i, strings.Repeat("z", 40))
			pos := add(t, l, 'E', p)
			if i == 0 {
				firstPos = pos
			}
			kept = append(kept, p)
		}
		trunc = fmt.Sprintf("t%d", round+1)
		add(t, l, 'T', trunc)
		if err := l.Write(true); err != nil {
			t.Fatal(err)
		}
		// Everything before this round is no longer needed.
		if err := l.Release(firstPos.Seq()); err != nil {
			t.Fatal(err)
		}
	}
	names, _ := fs.List("log")
	if len(names) > l.Segments()+maxSpares+1 {
		t.Fatalf("%d files in the log directory for %d live segments: %v", len(names), l.Segments(), names)
	}
	l.Close()
	_, got := open(t, fs, Options{SegmentSize: 4096})
	es := payloads(got, 'E')
	// The replay starts in the segment holding the last round's first
	// record, which may hold the end of the round before.
	if len(es) < len(kept) || !slicesEqual(es[len(es)-len(kept):], kept) {
		t.Fatalf("replayed %v, want it to end with the last round %v", es, kept)
	}
	for _, e := range es {
		if !strings.HasPrefix(e, "r19-") && !strings.HasPrefix(e, "r18-") {
			t.Fatalf("a record of an earlier life came back: %q", e)
		}
	}
	if ts := payloads(got, 'T'); ts[len(ts)-1] != "t20" {
		t.Fatalf("last truncation record %q, want t20", ts[len(ts)-1])
	}
}

func TestARecordLargerThanASegmentGetsItsOwn(t *testing.T) {
	fs := vfs.NewMem()
	l, _ := open(t, fs, Options{SegmentSize: 4096})
	l.SetPrologue(func(func(byte, []byte)) {})
	big := bytes.Repeat([]byte("B"), 20000)
	add(t, l, 'E', "small")
	p, err := l.Add('E', big)
	if err != nil {
		t.Fatal(err)
	}
	add(t, l, 'E', "after")
	if err := l.Write(true); err != nil {
		t.Fatal(err)
	}
	if _, b, err := l.Read(p); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("Read of the big record: %d bytes, %v", len(b), err)
	}
	l.Close()
	_, got := open(t, fs, Options{SegmentSize: 4096})
	es := payloads(got, 'E')
	if len(es) != 3 || es[0] != "small" || es[1] != string(big) || es[2] != "after" {
		t.Fatalf("replayed %d records", len(es))
	}
}

func TestReservedTypesAreRefused(t *testing.T) {
	l, _ := open(t, vfs.NewMem(), Options{})
	defer l.Close()
	l.SetPrologue(func(func(byte, []byte)) {})
	for _, typ := range []byte{typHeader, typEnd} {
		if _, err := l.Add(typ, nil); err == nil {
			t.Fatalf("Add of reserved type %q succeeded", typ)
		}
	}
}
