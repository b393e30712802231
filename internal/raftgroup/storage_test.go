package raftgroup

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"

	"nacre/internal/kv"
)

func ent(i, term uint64, data string) *pb.Entry {
	return &pb.Entry{Index: new(i), Term: new(term), Data: []byte(data)}
}

func appendAndCommit(t *testing.T, s *logStore, ents ...*pb.Entry) {
	t.Helper()
	b := s.db.NewWriteBatch()
	defer b.Close()
	if err := s.append(b, ents); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
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
	s, err := openLog(db, k, &pb.ConfState{Voters: []uint64{1}}, 1, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	// A new group starts after a truncation point at 1 (see openLog);
	// the test starts from a joiner's empty log instead.
	if f, _ := s.FirstIndex(); f != bootIndex+1 {
		t.Fatalf("first index of a new group's log %d", f)
	}
	db.Close()
	db, _ = kv.OpenMem()
	defer db.Close()
	s, err = openLog(db, k, nil, 1, 4, true)
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
	b := db.NewWriteBatch()
	if err := s.compact(b, 2, &pb.ConfState{Voters: []uint64{1, 2}}); err != nil {
		t.Fatal(err)
	}
	b.Commit(true)
	b.Close()
	if _, err := s.Entries(2, 4, 1<<30); !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries below the truncation point: %v", err)
	}
	if tm, _ := s.Term(2); tm != 1 {
		t.Fatalf("term of the truncation point %d", tm)
	}

	re, err := openLog(db, k, nil, 1<<20, 4, true)
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := openLog(db, k, nil, 1, 1, true); err == nil {
		t.Fatal("opened a raft log of format 9")
	}
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
