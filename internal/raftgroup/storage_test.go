package raftgroup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"nacre/internal/kv"
	"nacre/internal/raftlog"
)

func ent(i, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(i), Term: new(term), Data: []byte(data)}
}

func appendAndCommit(t *testing.T, s *logStore, ents ...*pb.Entry) {
	t.Helper()
	if err := s.append(ents); err != nil {
		t.Fatal(err)
	}
	if err := s.log.Write(true); err != nil {
		t.Fatal(err)
	}
}

// memLoc is a log location on db's (in-memory) file system.
func memLoc(db *kv.DB, segment int64) logLoc {
	return logLoc{fs: db.FS(), dir: "raftlog", segment: segment}
}

func describe(t *testing.T, s *logStore, lo, hi uint64) string {
	t.Helper()
	es, err := s.Entries(lo, hi, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, e := range es {
		fmt.Fprintf(&b, "%d/%d:%s ", e.GetIndex(), e.GetTerm(), e.GetData())
	}
	return b.String()
}

// TestLogStoreServesEntriesFromCacheAndStoreAlike runs the raft.Storage
// contract with a cache of one entry (so most reads hit the store) and
// checks that a reopened store says the same.
func TestLogStoreServesEntriesFromCacheAndStoreAlike(t *testing.T) {
	db, _ := kv.OpenMem()
	k := newKeys([]byte("\x00r"))
	s, err := openLog(db, k, memLoc(db, 0), &pb.ConfState{Voters: []uint64{1}}, 1, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	// A new group starts after a truncation point at 1 (see openLog);
	// the test starts from a joiner's empty log instead.
	if f, _ := s.FirstIndex(); f != bootIndex+1 {
		t.Fatalf("first index of a new group's log %d", f)
	}
	s.log.Close()
	db.Close()
	db, _ = kv.OpenMem()
	defer db.Close()
	// Segments of 4 KiB, so that the entries and the compaction below
	// cross segments.
	s, err = openLog(db, k, memLoc(db, 4096), nil, 1, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := s.FirstIndex(); f != 1 {
		t.Fatalf("first index of a joiner's log %d", f)
	}
	appendAndCommit(t, s, ent(1, 1, "a"), ent(2, 1, "b"), ent(3, 1, "c"), ent(4, 1, "d"))
	// A new leader overwrites the uncommitted tail with a shorter one.
	appendAndCommit(t, s, ent(3, 2, "C"))
	want := "1/1:a 2/1:b 3/2:C "
	if got := describe(t, s, 1, 4); got != want {
		t.Fatalf("log %q, want %q", got, want)
	}
	if l, _ := s.LastIndex(); l != 3 {
		t.Fatalf("last index %d after truncation, want 3", l)
	}
	if tm, _ := s.Term(3); tm != 2 {
		t.Fatalf("term(3) = %d", tm)
	}
	if _, err := s.Term(4); !errors.Is(err, raft.ErrUnavailable) {
		t.Fatalf("term(4): %v", err)
	}
	// maxSize limits, but never below one entry.
	if es, _ := s.Entries(1, 4, 1); len(es) != 1 {
		t.Fatalf("Entries with maxSize 1 returned %d entries", len(es))
	}

	// Compact through 2; the configuration is kept at the truncation point.
	s.applied = 3
	if err := s.compact(2, &pb.ConfState{Voters: []uint64{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := s.log.Write(true); err != nil {
		t.Fatal(err)
	}
	if err := s.release(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Entries(2, 4, 1<<30); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries below the truncation point: %v", err)
	}
	if tm, _ := s.Term(2); tm != 1 {
		t.Fatalf("term of the truncation point %d", tm)
	}

	s.log.Close()
	re, err := openLog(db, k, memLoc(db, 4096), nil, 1<<20, 4, true)
	if err != nil {
		t.Fatal(err)
	}
	defer re.log.Close()
	if got := describe(t, re, 3, 4); got != "3/2:C " {
		t.Fatalf("reopened log %q", got)
	}
	_, cs, _ := re.InitialState()
	if fmt.Sprint(cs.GetVoters()) != "[1 2]" {
		t.Fatalf("reopened configuration %v", cs.GetVoters())
	}
	if f, _ := re.FirstIndex(); f != 3 {
		t.Fatalf("reopened first index %d", f)
	}
}

func TestLogStoreRefusesAnotherFormat(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	k := newKeys([]byte("\x00r"))
	db.Set(k.version, []byte{0, 0, 0, 0, 0, 0, 0, 9}, true)
	if _, err := openLog(db, k, memLoc(db, 0), nil, 1, 1, true); err == nil || !strings.Contains(err.Error(), "another Nacre release") {
		t.Fatalf("opened a raft log of format 9: %v", err)
	}
}

// TestLogStoreMovesAFormat1LogOutOfTheStore writes a log the way format 1
// kept it (keys in the kv.DB) and opens it.
func TestLogStoreMovesAFormat1LogOutOfTheStore(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	k := newKeys([]byte("\x00r"))
	b := db.NewWriteBatch()
	b.Set(k.version, binary.BigEndian.AppendUint64(nil, logFormatV1))
	meta, _ := proto.Marshal(&pb.SnapshotMetadata{Index: new(uint64(5)), Term: new(uint64(2)), ConfState: &pb.ConfState{Voters: []uint64{1}}})
	b.Set(k.trunc, meta)
	hs, _ := proto.Marshal(&pb.HardState{Term: new(uint64(3)), Vote: new(uint64(1)), Commit: new(uint64(7))})
	b.Set(k.hardState, hs)
	for i := uint64(6); i <= 8; i++ {
		v, _ := proto.Marshal(ent(i, 3, fmt.Sprint("v1-", i)))
		b.Set(append(append([]byte(nil), k.logLo...), binary.BigEndian.AppendUint64(nil, i)...), v)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	b.Close()
	for round := range 2 {
		s, err := openLog(db, k, memLoc(db, 0), nil, 1<<20, 1, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := describe(t, s, 6, 9); got != "6/3:v1-6 7/3:v1-7 8/3:v1-8 " {
			t.Fatalf("round %d: entries %q", round, got)
		}
		hs, cs, _ := s.InitialState()
		if hs.GetTerm() != 3 || hs.GetVote() != 1 || hs.GetCommit() != 7 || fmt.Sprint(cs.GetVoters()) != "[1]" {
			t.Fatalf("round %d: hard state %v, voters %v", round, hs, cs.GetVoters())
		}
		s.log.Close()
		v, _ := db.Get(k.version)
		if binary.BigEndian.Uint64(v) != logFormat {
			t.Fatalf("round %d: format %d after the move", round, binary.BigEndian.Uint64(v))
		}
		for _, key := range [][]byte{k.trunc, k.hardState} {
			if _, err := db.Get(key); !errors.Is(err, kv.ErrNotFound) {
				t.Fatalf("round %d: format-1 key %x survived", round, key)
			}
		}
		it, _ := db.NewIter(k.logLo, k.logHi)
		if it.First() {
			t.Fatalf("round %d: format-1 log key %x survived", round, it.Key())
		}
		it.Close()
	}
}

func TestLogStoreWithItsLogDirectoryGoneSaysSo(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	k := newKeys([]byte("\x00r"))
	s, err := openLog(db, k, memLoc(db, 0), &pb.ConfState{Voters: []uint64{1}}, 1, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	s.log.Close()
	if err := db.FS().RemoveAll("raftlog"); err != nil {
		t.Fatal(err)
	}
	_, err = openLog(db, k, memLoc(db, 0), &pb.ConfState{Voters: []uint64{1}}, 1, 1, false)
	if err == nil || !strings.Contains(err.Error(), "missing or damaged") || !strings.Contains(err.Error(), "raftlog") {
		t.Fatalf("open with the log directory gone: %v", err)
	}
}

// TestLogStoreReplaysAcrossReleasedSegmentsAndOverwrites drives a log over
// many small segments with overwritten tails, compactions that release
// segments, and a reset, reopening it after each step; the reopened store
// must hold exactly what the live one did.
func TestLogStoreReplaysAcrossReleasedSegmentsAndOverwrites(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	k := newKeys([]byte("\x00r"))
	loc := memLoc(db, 2048)
	s, err := openLog(db, k, loc, &pb.ConfState{Voters: []uint64{1}}, 1<<20, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string) {
		t.Helper()
		want := describe(t, s, s.first(), s.last()+1)
		wantHS, _, _ := s.InitialState()
		wantFirst := s.first()
		s.log.Close()
		s, err = openLog(db, k, loc, nil, 1<<20, 1, false)
		if err != nil {
			t.Fatalf("%s: reopen: %v", step, err)
		}
		hs, _, _ := s.InitialState()
		if got := describe(t, s, s.first(), s.last()+1); got != want || s.first() != wantFirst || !proto.Equal(hs, wantHS) {
			t.Fatalf("%s: reopened log [%d: %s] hs %v, want [%d: %s] hs %v", step, s.first(), got, hs, wantFirst, want, wantHS)
		}
	}
	pad := strings.Repeat("p", 150)
	next := uint64(2)
	term := uint64(1)
	for round := range 12 {
		var ents []*pb.Entry
		for range 10 {
			ents = append(ents, ent(next, term, fmt.Sprintf("%d-%s", next, pad)))
			next++
		}
		appendAndCommit(t, s, ents...)
		if round%3 == 1 {
			// A new leader overwrites the last 4 entries.
			term++
			next -= 4
			appendAndCommit(t, s, ent(next, term, fmt.Sprintf("%d-over-%s", next, pad)))
			next++
		}
		if err := s.setHardState(&pb.HardState{Term: new(term), Vote: new(uint64(1)), Commit: new(next - 3)}); err != nil {
			t.Fatal(err)
		}
		if round%2 == 1 {
			s.applied = next - 3
			if err := s.compact(next-8, &pb.ConfState{Voters: []uint64{1}}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.log.Write(true); err != nil {
			t.Fatal(err)
		}
		if err := s.release(); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("round %d", round))
	}
	if s.log.Segments() > 6 {
		t.Fatalf("%d live segments after compactions", s.log.Segments())
	}
	// A snapshot install resets the log.
	snap := &pb.SnapshotMetadata{Index: new(next + 100), Term: new(term + 1), ConfState: &pb.ConfState{Voters: []uint64{1, 2}}}
	if err := s.resetTo(snap); err != nil {
		t.Fatal(err)
	}
	if err := s.log.Write(true); err != nil {
		t.Fatal(err)
	}
	if err := s.release(); err != nil {
		t.Fatal(err)
	}
	check("reset")
	if s.first() != next+101 || s.last() != next+100 {
		t.Fatalf("after the reset: log (%d, %d]", s.first()-1, s.last())
	}
	appendAndCommit(t, s, ent(next+101, term+1, "after"))
	check("after reset")
	s.log.Close()
}

func TestProposalHeaderRoundTrip(t *testing.T) {
	for _, payload := range [][]byte{{}, []byte("x"), bytes.Repeat([]byte{0xff}, 300)} {
		d := encodeProposal(1<<40, 12345678901234, payload)
		id, seq, p, err := decodeProposal(d)
		if err != nil || id != 1<<40 || seq != 12345678901234 || !bytes.Equal(p, payload) || p == nil {
			t.Fatalf("round trip of %q: %d %d %q %v", payload, id, seq, p, err)
		}
	}
	for _, bad := range [][]byte{nil, {0x02, 1, 1}, {0x01, 0x80}} {
		if _, _, _, err := decodeProposal(bad); err == nil {
			t.Fatalf("decoded %x", bad)
		}
	}
}

func TestKVImageRestoresExactlyTheRangesAndDetectsDamage(t *testing.T) {
	src, _ := kv.OpenMem()
	defer src.Close()
	for i := range 3000 {
		src.Set(fmt.Appendf(nil, "sm/%05d", i), bytes.Repeat([]byte{byte(i)}, 200), false)
	}
	src.Set([]byte("\x00r-not-mine"), []byte("x"), false)
	img := SnapshotKV(src, smRange)
	// Writes after the snapshot is taken are not in the image.
	src.Set([]byte("sm/late"), []byte("x"), false)
	data, err := io.ReadAll(img)
	if err != nil {
		t.Fatal(err)
	}
	img.Close()

	dst, _ := kv.OpenMem()
	defer dst.Close()
	dst.Set([]byte("sm/stale"), []byte("gone after restore"), false)
	dst.Set([]byte("zz-outside"), []byte("kept"), false)
	if err := RestoreKV(dst, bytes.NewReader(data), smRange); err != nil {
		t.Fatal(err)
	}
	count := 0
	it, _ := dst.NewIter(smRange.Lower, smRange.Upper)
	for it.First(); it.Valid(); it.Next() {
		count++
	}
	it.Close()
	if count != 3000 {
		t.Fatalf("restored %d keys, want 3000", count)
	}
	if _, err := dst.Get([]byte("sm/stale")); !errors.Is(err, kv.ErrNotFound) {
		t.Fatal("a key of the old state survived the restore")
	}
	if _, err := dst.Get([]byte("zz-outside")); err != nil {
		t.Fatal("restore touched a key outside its ranges")
	}

	for _, damaged := range [][]byte{
		data[:len(data)/2],
		append(append([]byte(nil), data[:100]...), append([]byte{data[100] ^ 1}, data[101:]...)...),
	} {
		if err := RestoreKV(dst, bytes.NewReader(damaged), smRange); !errors.Is(err, ErrBadImage) {
			t.Fatalf("restore of a damaged image: %v, want ErrBadImage", err)
		}
	}
	if err := RestoreKV(dst, bytes.NewReader(data), KeyRange{Lower: []byte("sm/1"), Upper: []byte("sm/2")}); !errors.Is(err, ErrBadImage) {
		t.Fatalf("restore of keys outside the ranges: %v, want ErrBadImage", err)
	}

	// An open upper bound (the MDT's state runs to the end of the key
	// space) replaces everything from the lower bound on.
	dst.Set([]byte("zz-outside"), []byte("gone now"), false)
	dst.Set(bytes.Repeat([]byte{0xff}, 70), []byte("gone too"), false)
	open := KeyRange{Lower: []byte("sm/")}
	img = SnapshotKV(src, open)
	data, err = io.ReadAll(img)
	img.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := RestoreKV(dst, bytes.NewReader(data), open); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{[]byte("zz-outside"), bytes.Repeat([]byte{0xff}, 70)} {
		if _, err := dst.Get(k); !errors.Is(err, kv.ErrNotFound) {
			t.Fatalf("key %q survived a restore of an open range", k[:min(len(k), 10)])
		}
	}
	if _, err := dst.Get([]byte("sm/late")); err != nil {
		t.Fatal("restore of an open range lost a key")
	}
}

// A store that lost the record of its raft log (its write-ahead log was
// damaged) must not start a new, empty log over the old one: the open is
// refused and the log kept. A log holding only the bootstrap point (a
// first start that crashed before the record was made) is started over.
func TestLogWhoseStoreLostItsRecordIsKept(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	k := newKeys([]byte("\x00r"))
	boot := &pb.ConfState{Voters: []uint64{1}}
	s, err := openLog(db, k, memLoc(db, 0), boot, 1<<20, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	s.log.Close()
	if err := db.Delete(k.version, true); err != nil {
		t.Fatal(err)
	}
	if s, err = openLog(db, k, memLoc(db, 0), boot, 1<<20, 1, false); err != nil {
		t.Fatalf("a log holding the bootstrap point alone: %v", err)
	}
	appendAndCommit(t, s, ent(2, 1, "a"), ent(3, 1, "b"))
	if err := s.setHardState(&pb.HardState{Term: new(uint64(1)), Vote: new(uint64(1)), Commit: new(uint64(3))}); err != nil {
		t.Fatal(err)
	}
	if err := s.log.Write(true); err != nil {
		t.Fatal(err)
	}
	s.log.Close()
	if err := db.Delete(k.version, true); err != nil {
		t.Fatal(err)
	}
	_, err = openLog(db, k, memLoc(db, 0), boot, 1<<20, 1, false)
	if !errors.Is(err, raftlog.ErrCorrupt) || !strings.Contains(err.Error(), "entries up to 3 (term 1)") || !strings.Contains(err.Error(), "lost data") {
		t.Fatalf("open of a store that lost its log's record: %v", err)
	}
	// Nothing was wiped: with the record back, the entries are there.
	if err := db.Set(k.version, binary.BigEndian.AppendUint64(nil, logFormat), true); err != nil {
		t.Fatal(err)
	}
	s, err = openLog(db, k, memLoc(db, 0), nil, 1<<20, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.log.Close()
	if got := describe(t, s, 2, 4); !strings.Contains(got, "a") || !strings.Contains(got, "b") || s.last() != 3 {
		t.Fatalf("after the refusal the log holds [%s] up to %d", got, s.last())
	}
}
