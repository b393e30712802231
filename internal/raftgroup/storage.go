package raftgroup

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacrepb"
	"nacre/internal/kv"
)

// logFormat is the version of the key layout under Config.Prefix. A store
// written with another layout is refused rather than misread.
const logFormat = 1

// Key suffixes under Config.Prefix; the layout is described in doc.go.
const (
	sufVersion   = 'v'
	sufHardState = 'h'
	sufTrunc     = 's'
	sufPending   = 'p'
	sufPeers     = 'a'
	sufLog       = 'l'
)

// The truncation point of a new group (see openLog).
const (
	bootIndex = 1
	bootTerm  = 1
)

// keys builds the keys of one group's raft state.
type keys struct {
	version, hardState, trunc, pending, peers []byte
	logLo, logHi                              []byte // bounds of every log key
}

func newKeys(prefix []byte) keys {
	k := func(s byte) []byte { return append(append([]byte(nil), prefix...), s) }
	lo := k(sufLog)
	return keys{
		version:   k(sufVersion),
		hardState: k(sufHardState),
		trunc:     k(sufTrunc),
		pending:   k(sufPending),
		peers:     k(sufPeers),
		logLo:     lo,
		logHi:     kv.PrefixEnd(lo),
	}
}

// entry appends the key of log index i to buf[:0].
func (k *keys) entry(buf []byte, i uint64) []byte {
	buf = append(buf[:0], k.logLo...)
	return binary.BigEndian.AppendUint64(buf, i)
}

// logStore is raft.Storage over the group's keys in the shared kv.DB. It
// keeps in memory the term of every retained entry (8 bytes each, so Term
// never reads the disk) and the bodies of the most recent entries up to
// maxCache bytes (so appends are read back by raft, for replication and
// apply, without touching the disk); older bodies are read from the store.
//
// Every method runs on the group's loop goroutine: raft calls Storage from
// inside Step and Ready, and the loop is the only writer.
type logStore struct {
	db   *kv.DB
	keys keys

	// trunc is the truncation point: the log holds (trunc.Index, last()],
	// and trunc.ConfState is the configuration as of trunc.Index.
	trunc *pb.SnapshotMetadata
	hs    *pb.HardState
	terms []uint64 // terms[i] is the term of entry trunc.Index+1+i

	cache      []*pb.Entry // the last len(cache) entries of the log
	cacheBytes int
	maxCache   int

	// applied and conf describe what raft has handed to the state machine:
	// Snapshot advertises (applied, term(applied), conf) because that is
	// the newest point a state machine image can be taken at.
	applied uint64
	conf    *pb.ConfState
	// peers returns the encoded address book, which travels in the
	// snapshot's Data so that a replica restored from a snapshot can reach
	// replicas added in the compacted part of the log.
	peers func() []byte

	keyBuf []byte
	valBuf []byte
}

var _ raft.Storage = (*logStore)(nil)

func (s *logStore) first() uint64 { return s.trunc.GetIndex() + 1 }
func (s *logStore) last() uint64  { return s.trunc.GetIndex() + uint64(len(s.terms)) }

// InitialState implements raft.Storage.
func (s *logStore) InitialState() (*pb.HardState, *pb.ConfState, error) {
	return proto.Clone(s.hs).(*pb.HardState), pb.EnsureConfState(proto.Clone(s.trunc.GetConfState()).(*pb.ConfState)), nil
}

// FirstIndex implements raft.Storage.
func (s *logStore) FirstIndex() (uint64, error) { return s.first(), nil }

// LastIndex implements raft.Storage.
func (s *logStore) LastIndex() (uint64, error) { return s.last(), nil }

// Term implements raft.Storage.
func (s *logStore) Term(i uint64) (uint64, error) {
	t := s.trunc.GetIndex()
	switch {
	case i == t:
		return s.trunc.GetTerm(), nil
	case i < t:
		return 0, raft.ErrCompacted
	case i > s.last():
		return 0, raft.ErrUnavailable
	}
	return s.terms[i-t-1], nil
}

// Entries implements raft.Storage.
func (s *logStore) Entries(lo, hi, maxSize uint64) ([]*pb.Entry, error) {
	if lo <= s.trunc.GetIndex() {
		return nil, raft.ErrCompacted
	}
	if hi > s.last()+1 {
		return nil, fmt.Errorf("raft log entries [%d, %d) beyond last index %d: %w", lo, hi, s.last(), raft.ErrUnavailable)
	}
	if lo >= hi {
		return nil, nil
	}
	var out []*pb.Entry
	var size uint64
	// add reports whether e fits; the first entry always does, as raft wants.
	add := func(e *pb.Entry) bool {
		n := uint64(proto.Size(e))
		if len(out) > 0 && size+n > maxSize {
			return false
		}
		size += n
		out = append(out, e)
		return true
	}
	cacheFirst := s.last() - uint64(len(s.cache)) + 1
	if lo < cacheFirst {
		end := min(hi, cacheFirst)
		it, err := s.db.NewIter(s.keys.entry(nil, lo), s.keys.entry(nil, end))
		if err != nil {
			return nil, fmt.Errorf("read raft log [%d, %d): %w", lo, end, err)
		}
		want := lo
		full := false
		for it.First(); it.Valid(); it.Next() {
			e := new(pb.Entry)
			if err := proto.Unmarshal(it.Value(), e); err != nil {
				it.Close()
				return nil, fmt.Errorf("decode raft log entry %d: %w", want, err)
			}
			if e.GetIndex() != want {
				it.Close()
				return nil, fmt.Errorf("raft log has entry %d where %d belongs: store damaged", e.GetIndex(), want)
			}
			if !add(e) {
				full = true
				break
			}
			want++
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return nil, fmt.Errorf("read raft log [%d, %d): %w", lo, end, err)
		}
		if full {
			return out, nil
		}
		if want != end {
			return nil, fmt.Errorf("raft log misses entry %d (log is (%d, %d]): store damaged", want, s.trunc.GetIndex(), s.last())
		}
		lo = end
	}
	for i := lo; i < hi; i++ {
		if !add(s.cache[i-cacheFirst]) {
			break
		}
	}
	return out, nil
}

// Snapshot implements raft.Storage. The image itself is not in the
// returned snapshot: the transport streams StateMachine.Snapshot when it
// sends the MsgSnap (see doc.go, "Snapshots").
func (s *logStore) Snapshot() (*pb.Snapshot, error) {
	idx := max(s.applied, s.trunc.GetIndex())
	if idx == 0 {
		return nil, raft.ErrSnapshotTemporarilyUnavailable
	}
	term, err := s.Term(idx)
	if err != nil {
		return nil, fmt.Errorf("snapshot at applied index %d: %w", idx, err)
	}
	cs := s.conf
	if idx == s.trunc.GetIndex() && s.applied < idx {
		cs = s.trunc.GetConfState()
	}
	snap := &pb.Snapshot{Metadata: &pb.SnapshotMetadata{
		Index:     new(idx),
		Term:      new(term),
		ConfState: proto.Clone(pb.EnsureConfState(cs)).(*pb.ConfState),
	}}
	if s.peers != nil {
		snap.Data = s.peers()
	}
	return snap, nil
}

// append stages ents (contiguous, possibly overwriting a suffix of the log)
// into b and into memory. The memory view runs ahead of the store until b
// commits; that is safe because raft reads these entries from Storage only
// after the write is acknowledged, and a failed commit stops the group.
func (s *logStore) append(b *kv.Batch, ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	first := ents[0].GetIndex()
	last := s.last()
	if first <= s.trunc.GetIndex() || first > last+1 {
		return fmt.Errorf("append raft entries from %d to a log holding (%d, %d]", first, s.trunc.GetIndex(), last)
	}
	newLast := first + uint64(len(ents)) - 1
	if newLast < last {
		// A new leader overwrote our uncommitted tail with a shorter one.
		if err := b.DeleteRange(s.keys.entry(nil, newLast+1), s.keys.entry(nil, last+1)); err != nil {
			return err
		}
	}
	for _, e := range ents {
		var err error
		s.valBuf, err = proto.MarshalOptions{}.MarshalAppend(s.valBuf[:0], e)
		if err != nil {
			return fmt.Errorf("encode raft entry %d: %w", e.GetIndex(), err)
		}
		s.keyBuf = s.keys.entry(s.keyBuf, e.GetIndex())
		if err := b.Set(s.keyBuf, s.valBuf); err != nil {
			return err
		}
	}
	// Memory: cut the terms and cached bodies back to first-1, then extend.
	s.terms = s.terms[:first-s.trunc.GetIndex()-1]
	cacheFirst := last - uint64(len(s.cache)) + 1
	if first <= cacheFirst {
		s.cache, s.cacheBytes = nil, 0
	} else {
		for _, e := range s.cache[first-cacheFirst:] {
			s.cacheBytes -= entryCost(e)
		}
		clear(s.cache[first-cacheFirst:])
		s.cache = s.cache[:first-cacheFirst]
	}
	for _, e := range ents {
		s.terms = append(s.terms, e.GetTerm())
		s.cache = append(s.cache, e)
		s.cacheBytes += entryCost(e)
	}
	s.trimCache()
	return nil
}

// trimCache drops the oldest cached bodies beyond maxCache bytes (keeping
// at least the newest entry).
func (s *logStore) trimCache() {
	drop := 0
	for s.cacheBytes > s.maxCache && drop < len(s.cache)-1 {
		s.cacheBytes -= entryCost(s.cache[drop])
		s.cache[drop] = nil // let the body go; appends reallocate the array
		drop++
	}
	s.cache = s.cache[drop:]
}

// setHardState stages hs into b and memory.
func (s *logStore) setHardState(b *kv.Batch, hs *pb.HardState) error {
	v, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	s.hs = proto.Clone(hs).(*pb.HardState)
	return b.Set(s.keys.hardState, v)
}

// resetTo stages the replacement of the whole log by a snapshot's
// truncation point: every entry goes, the log restarts after meta.Index.
func (s *logStore) resetTo(b *kv.Batch, meta *pb.SnapshotMetadata) error {
	meta = pb.EnsureSnapshotMetadata(proto.Clone(meta).(*pb.SnapshotMetadata))
	v, err := proto.Marshal(meta)
	if err != nil {
		return err
	}
	if err := b.DeleteRange(s.keys.logLo, s.keys.logHi); err != nil {
		return err
	}
	if err := b.Set(s.keys.trunc, v); err != nil {
		return err
	}
	s.trunc = meta
	s.terms, s.cache, s.cacheBytes = nil, nil, 0
	s.applied = meta.GetIndex()
	s.conf = meta.GetConfState()
	return nil
}

// compact stages the deletion of entries up to and including c, whose
// configuration was cs, into b and memory. c must be applied.
func (s *logStore) compact(b *kv.Batch, c uint64, cs *pb.ConfState) error {
	t := s.trunc.GetIndex()
	if c <= t || c > s.applied {
		return fmt.Errorf("compact raft log to %d: log is (%d, %d], applied %d", c, t, s.last(), s.applied)
	}
	term, _ := s.Term(c)
	meta := &pb.SnapshotMetadata{Index: new(c), Term: new(term), ConfState: proto.Clone(pb.EnsureConfState(cs)).(*pb.ConfState)}
	v, err := proto.Marshal(meta)
	if err != nil {
		return err
	}
	if err := b.DeleteRange(s.keys.entry(nil, t+1), s.keys.entry(nil, c+1)); err != nil {
		return err
	}
	if err := b.Set(s.keys.trunc, v); err != nil {
		return err
	}
	s.terms = append([]uint64(nil), s.terms[c-t:]...)
	s.trunc = meta
	if keep := s.last() - c; uint64(len(s.cache)) > keep {
		over := len(s.cache) - int(keep)
		for _, e := range s.cache[:over] {
			s.cacheBytes -= entryCost(e)
		}
		s.cache = append([]*pb.Entry(nil), s.cache[over:]...)
	}
	return nil
}

// openLog loads the group's raft state from db, creating it on first use.
// boot is the configuration a brand-new group starts with (empty when the
// replica joins an existing group and learns its configuration from the
// leader).
func openLog(db *kv.DB, k keys, boot *pb.ConfState, maxCache int, self uint64, join bool) (*logStore, error) {
	s := &logStore{db: db, keys: k, maxCache: maxCache, hs: &pb.HardState{}}
	v, err := db.Get(k.version)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		if !join && !slices.Contains(boot.GetVoters(), self) {
			return nil, fmt.Errorf("a new group needs its replicas in Config.Peers, and replica %d is not among %v (or set Config.Join)", self, boot.GetVoters())
		}
		// A new group: record the format and the initial configuration
		// as a truncation point, which is how etcd raft recommends
		// bootstrapping (no synthetic conf change entries). The point is
		// at index 1, not 0, so that no entry before the first real one
		// exists anywhere: a replica that joins later cannot replay the
		// log from the start without knowing the initial voters (it
		// would apply "add me" to an empty configuration and lead
		// alone); it needs entry 1, finds it compacted, and gets a
		// snapshot, whose metadata holds the configuration. CockroachDB
		// bootstraps ranges the same way. A joining replica starts at 0
		// with no configuration and waits for that snapshot.
		b := db.NewWriteBatch()
		defer b.Close()
		b.Set(k.version, binary.BigEndian.AppendUint64(nil, logFormat))
		meta := &pb.SnapshotMetadata{ConfState: proto.Clone(pb.EnsureConfState(boot)).(*pb.ConfState)}
		if len(boot.GetVoters()) > 0 {
			meta.Index, meta.Term = new(uint64(bootIndex)), new(uint64(bootTerm))
		}
		meta = pb.EnsureSnapshotMetadata(meta)
		mv, _ := proto.Marshal(meta)
		b.Set(k.trunc, mv)
		if err := b.Commit(true); err != nil {
			return nil, fmt.Errorf("initialise raft log: %w", err)
		}
		s.trunc = meta
		s.applied = meta.GetIndex()
		s.conf = meta.GetConfState()
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read raft log format: %w", err)
	case len(v) != 8 || binary.BigEndian.Uint64(v) != logFormat:
		return nil, fmt.Errorf("raft log format %x is not the supported format %d: written by another Nacre release", v, logFormat)
	}

	s.trunc = new(pb.SnapshotMetadata)
	if err := getProto(db, k.trunc, s.trunc); err != nil {
		return nil, fmt.Errorf("read raft log truncation point: %w", err)
	}
	s.trunc = pb.EnsureSnapshotMetadata(s.trunc)
	if err := getProto(db, k.hardState, s.hs); err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("read raft hard state: %w", err)
	}
	s.applied = s.trunc.GetIndex()
	s.conf = s.trunc.GetConfState()

	// Load every retained term, and the newest bodies into the cache.
	it, err := db.NewIter(k.logLo, k.logHi)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	want := s.trunc.GetIndex() + 1
	for it.First(); it.Valid(); it.Next() {
		e := new(pb.Entry)
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			return nil, fmt.Errorf("decode raft log entry %d: %w", want, err)
		}
		if e.GetIndex() != want {
			return nil, fmt.Errorf("raft log has entry %d where %d belongs (truncated at %d): store damaged", e.GetIndex(), want, s.trunc.GetIndex())
		}
		s.terms = append(s.terms, e.GetTerm())
		s.cache = append(s.cache, e)
		s.cacheBytes += entryCost(e)
		s.trimCache()
		want++
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("read raft log: %w", err)
	}
	return s, nil
}

func getProto(db *kv.DB, key []byte, m proto.Message) error {
	v, err := db.Get(key)
	if err != nil {
		return err
	}
	return proto.Unmarshal(v, m)
}

// loadPeers reads the group's address book.
func loadPeers(db *kv.DB, k keys) (map[uint64]string, error) {
	var ps nacrepb.RaftPeers
	if err := getProto(db, k.peers, &ps); err != nil {
		if errors.Is(err, kv.ErrNotFound) {
			return map[uint64]string{}, nil
		}
		return nil, fmt.Errorf("read raft address book: %w", err)
	}
	m := make(map[uint64]string, len(ps.Peers))
	for _, p := range ps.Peers {
		m[p.Id] = p.Addr
	}
	return m, nil
}

func encodePeers(m map[uint64]string) []byte {
	var ps nacrepb.RaftPeers
	for id, a := range m {
		ps.Peers = append(ps.Peers, &nacrepb.RaftPeer{Id: id, Addr: a})
	}
	v, _ := proto.MarshalOptions{Deterministic: true}.Marshal(&ps)
	return v
}

// entryCost is what a cached entry costs in memory, roughly: its body plus
// the Go objects around it.
func entryCost(e *pb.Entry) int { return len(e.GetData()) + 96 }
