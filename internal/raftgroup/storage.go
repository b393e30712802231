package raftgroup

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacrepb"
	"nacre/internal/kv"
	"nacre/internal/raftlog"
)

// logFormat is where the group's raft state lives. Format 1 kept the log
// in the shared kv.DB under Config.Prefix; format 2 keeps it in its own
// segmented log (internal/raftlog) and only the format, the address book
// and the snapshot-install marker in the DB. A format-1 store is moved
// over at start (migrateV1); anything else is refused.
const (
	logFormat   = 2
	logFormatV1 = 1
)

// Key suffixes under Config.Prefix; the layout is described in doc.go.
const (
	sufVersion   = 'v'
	sufHardState = 'h' // format 1 only
	sufTrunc     = 's' // format 1 only
	sufPending   = 'p'
	sufPeers     = 'a'
	sufRemoved   = 'x' // ids removed from the group (membership.go)
	sufSelf      = 'i' // this replica's id (checkSelf)
	sufLog       = 'l' // format 1 only
)

// Record types in the group's raftlog (doc.go, "What is stored where").
const (
	recEntry = 'E' // one raftpb.Entry
	recHard  = 'H' // raftpb.HardState
	recTrunc = 'T' // raftpb.SnapshotMetadata: entries up to Index are gone
	recReset = 'R' // raftpb.SnapshotMetadata: every entry is gone, the log restarts after Index
)

// The truncation point of a new group (see openLog).
const (
	bootIndex = 1
	bootTerm  = 1
)

// keys builds the keys of one group's raft state in the kv.DB.
type keys struct {
	version, hardState, trunc, pending, peers, removed, self []byte
	logLo, logHi                                             []byte // bounds of every format-1 log key
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
		removed:   k(sufRemoved),
		self:      k(sufSelf),
		logLo:     lo,
		logHi:     kv.PrefixEnd(lo),
	}
}

// logStore is raft.Storage over the group's raftlog. It keeps in memory
// the term and the position in the log of every retained entry (so Term
// never reads the disk) and the bodies of the most recent entries up to
// maxCache bytes (so appends are read back by raft, for replication and
// apply, without touching the disk); older bodies are read from the log.
//
// Every method runs on the group's loop goroutine: raft calls Storage from
// inside Step and Ready, and the loop is the only writer. Writes are
// staged: the caller's Write (log.Write) makes them reach the file.
type logStore struct {
	log *raftlog.Log

	// trunc is the truncation point: the log holds (trunc.Index, last()],
	// and trunc.ConfState is the configuration as of trunc.Index.
	trunc *pb.SnapshotMetadata
	hs    *pb.HardState
	terms []uint64      // terms[i] is the term of entry trunc.Index+1+i
	pos   []raftlog.Pos // pos[i] is where entry trunc.Index+1+i lies

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
	for i := lo; i < min(hi, cacheFirst); i++ {
		e, err := s.readEntry(i)
		if err != nil {
			return nil, err
		}
		if !add(e) {
			return out, nil
		}
	}
	for i := max(lo, cacheFirst); i < hi; i++ {
		if !add(s.cache[i-cacheFirst]) {
			break
		}
	}
	return out, nil
}

// readEntry reads entry i from the log file.
func (s *logStore) readEntry(i uint64) (*pb.Entry, error) {
	p := s.pos[i-s.trunc.GetIndex()-1]
	typ, payload, err := s.log.Read(p)
	if err != nil {
		return nil, fmt.Errorf("read raft log entry %d: %w", i, err)
	}
	e := new(pb.Entry)
	if typ != recEntry {
		return nil, fmt.Errorf("raft log entry %d: the record at its position is of type %q: log damaged", i, typ)
	}
	if err := proto.Unmarshal(payload, e); err != nil {
		return nil, fmt.Errorf("decode raft log entry %d: %w", i, err)
	}
	if e.GetIndex() != i {
		return nil, fmt.Errorf("raft log has entry %d where %d belongs: log damaged", e.GetIndex(), i)
	}
	return e, nil
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
// into the log and into memory. The memory view runs ahead of the file
// until the caller writes; that is safe because raft reads these entries
// from Storage only after the write is acknowledged, and a failed write
// stops the group.
func (s *logStore) append(ents []*pb.Entry) error {
	if len(ents) == 0 {
		return nil
	}
	first := ents[0].GetIndex()
	last := s.last()
	if first <= s.trunc.GetIndex() || first > last+1 {
		return fmt.Errorf("append raft entries from %d to a log holding (%d, %d]", first, s.trunc.GetIndex(), last)
	}
	// Memory: cut the terms, positions and cached bodies back to first-1
	// (a new leader may overwrite our uncommitted tail), then extend.
	keep := first - s.trunc.GetIndex() - 1
	s.terms, s.pos = s.terms[:keep], s.pos[:keep]
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
		var err error
		s.valBuf, err = proto.MarshalOptions{}.MarshalAppend(s.valBuf[:0], e)
		if err != nil {
			return fmt.Errorf("encode raft entry %d: %w", e.GetIndex(), err)
		}
		p, err := s.log.Add(recEntry, s.valBuf)
		if err != nil {
			return err
		}
		s.terms = append(s.terms, e.GetTerm())
		s.pos = append(s.pos, p)
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

// setHardState stages hs into the log and memory.
func (s *logStore) setHardState(hs *pb.HardState) error {
	v, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	s.hs = proto.Clone(hs).(*pb.HardState)
	_, err = s.log.Add(recHard, v)
	return err
}

// resetTo stages the replacement of the whole log by a snapshot's
// truncation point: every entry goes, the log restarts after meta.Index.
// Once it is written, release drops the segments.
func (s *logStore) resetTo(meta *pb.SnapshotMetadata) error {
	meta = pb.EnsureSnapshotMetadata(proto.Clone(meta).(*pb.SnapshotMetadata))
	v, err := proto.Marshal(meta)
	if err != nil {
		return err
	}
	s.trunc = meta
	s.terms, s.pos, s.cache, s.cacheBytes = nil, nil, nil, 0
	s.applied = meta.GetIndex()
	s.conf = meta.GetConfState()
	_, err = s.log.Add(recReset, v)
	return err
}

// compact stages the truncation of the log up to and including c, whose
// configuration was cs, into the log and memory. c must be applied, and
// the state machine's applies up to c durable (the caller syncs the
// store first). Once it is written and synced, release drops what it
// frees.
func (s *logStore) compact(c uint64, cs *pb.ConfState) error {
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
	s.terms = append([]uint64(nil), s.terms[c-t:]...)
	s.pos = append([]raftlog.Pos(nil), s.pos[c-t:]...)
	s.trunc = meta
	if keep := s.last() - c; uint64(len(s.cache)) > keep {
		over := len(s.cache) - int(keep)
		for _, e := range s.cache[:over] {
			s.cacheBytes -= entryCost(e)
		}
		s.cache = append([]*pb.Entry(nil), s.cache[over:]...)
	}
	_, err = s.log.Add(recTrunc, v)
	return err
}

// firstFrom is the index of the first retained entry written in segment
// seq or later, or last()+1 if there is none.
func (s *logStore) firstFrom(seq uint64) uint64 {
	i, _ := slices.BinarySearchFunc(s.pos, seq, func(p raftlog.Pos, seq uint64) int { return cmp.Compare(p.Seq(), seq) })
	return s.trunc.GetIndex() + 1 + uint64(i)
}

// release drops the log segments that hold no retained entry, once the
// truncation or reset that freed them is durable.
func (s *logStore) release() error {
	seq := s.log.ActiveSeq()
	if len(s.pos) > 0 {
		seq = s.pos[0].Seq()
	}
	return s.log.Release(seq)
}

// prologue is what every new log segment starts with: the hard state and
// the truncation point, which may otherwise only be in segments released
// later.
func (s *logStore) prologue(add func(byte, []byte)) {
	if v, err := proto.Marshal(s.trunc); err == nil {
		add(recTrunc, v)
	}
	if v, err := proto.Marshal(s.hs); err == nil {
		add(recHard, v)
	}
}

// logLoc is where a group's log lives.
type logLoc struct {
	fs      vfs.FS
	dir     string
	segment int64
}

// openLog loads the group's raft state, creating it on first use. boot is
// the configuration a brand-new group starts with (empty when the replica
// joins an existing group and learns its configuration from the leader).
func openLog(db *kv.DB, k keys, loc logLoc, boot *pb.ConfState, maxCache int, self uint64, join bool) (*logStore, error) {
	v, err := db.Get(k.version)
	switch {
	case errors.Is(err, kv.ErrNotFound):
		// Either a new group, or one whose first start crashed before the
		// format was recorded (its log holds the bootstrap point alone).
		// A log holding more means the store lost what it had recorded:
		// starting over would wipe the group's history.
		if held, err := priorLog(loc); err != nil || held != "" {
			if err == nil {
				err = fmt.Errorf("%w: the store %s has no record of its raft log, but the log %s holds %s: "+
					"the store lost data (a damaged write-ahead log?); not starting, so that the log is kept", raftlog.ErrCorrupt, db.Dir(), loc.dir, held)
			}
			return nil, err
		}
		if !join && !slices.Contains(boot.GetVoters(), self) {
			return nil, fmt.Errorf("a new group needs its replicas in Config.Peers, and replica %d is not among %v (or set Config.Join)", self, boot.GetVoters())
		}
		// A new group: record the initial configuration as a truncation
		// point, which is how etcd raft recommends bootstrapping (no
		// synthetic conf change entries). The point is at index 1, not
		// 0, so that no entry before the first real one exists anywhere:
		// a replica that joins later cannot replay the log from the start
		// without knowing the initial voters (it would apply "add me" to
		// an empty configuration and lead alone); it needs entry 1, finds
		// it compacted, and gets a snapshot, whose metadata holds the
		// configuration. CockroachDB bootstraps ranges the same way. A
		// joining replica starts at 0 with no configuration and waits for
		// that snapshot.
		meta := &pb.SnapshotMetadata{ConfState: proto.Clone(pb.EnsureConfState(boot)).(*pb.ConfState)}
		if len(boot.GetVoters()) > 0 {
			meta.Index, meta.Term = new(uint64(bootIndex)), new(uint64(bootTerm))
		}
		s, err := createLog(loc, pb.EnsureSnapshotMetadata(meta), &pb.HardState{}, nil, maxCache)
		if err != nil {
			return nil, err
		}
		if err := db.Set(k.version, binary.BigEndian.AppendUint64(nil, logFormat), true); err != nil {
			s.log.Close()
			return nil, fmt.Errorf("initialise raft log: %w", err)
		}
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("read raft log format: %w", err)
	case len(v) == 8 && binary.BigEndian.Uint64(v) == logFormatV1:
		return migrateV1(db, k, loc, maxCache)
	case len(v) != 8 || binary.BigEndian.Uint64(v) != logFormat:
		return nil, fmt.Errorf("raft log format %x is not the supported format %d: written by another Nacre release", v, logFormat)
	}

	s := &logStore{maxCache: maxCache, hs: &pb.HardState{}}
	r := replayer{s: s}
	l, err := raftlog.Open(loc.fs, loc.dir, raftlog.Options{SegmentSize: loc.segment}, r.record)
	if err != nil {
		return nil, err
	}
	if err := r.finish(loc.dir); err != nil {
		l.Close()
		return nil, err
	}
	s.log = l
	s.applied = s.trunc.GetIndex()
	s.conf = s.trunc.GetConfState()
	l.SetPrologue(s.prologue)
	if err := l.Write(true); err != nil {
		l.Close()
		return nil, err
	}
	return s, nil
}

// priorLog describes what a log left in loc holds beyond a new group's
// bootstrap point ("" if nothing, or there is no log).
func priorLog(loc logLoc) (string, error) {
	names, err := loc.fs.List(loc.dir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && len(names) == 0) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read raft log directory %s: %w", loc.dir, err)
	}
	s := &logStore{hs: &pb.HardState{}}
	r := replayer{s: s}
	l, err := raftlog.Open(loc.fs, loc.dir, raftlog.Options{SegmentSize: loc.segment}, r.record)
	if err != nil {
		return "", fmt.Errorf("the store has no record of its raft log, and the log %s left there cannot be read: %w", loc.dir, err)
	}
	l.Close()
	switch {
	case len(r.ents) > 0:
		return fmt.Sprintf("entries up to %d (term %d)", r.base+uint64(len(r.ents)), r.ents[len(r.ents)-1].GetTerm()), nil
	case s.hs.GetTerm() > 0 || s.hs.GetCommit() > 0:
		return fmt.Sprintf("the state of term %d (commit %d)", s.hs.GetTerm(), s.hs.GetCommit()), nil
	case s.trunc.GetIndex() > bootIndex:
		return fmt.Sprintf("a truncation point at %d", s.trunc.GetIndex()), nil
	}
	return "", nil
}

// createLog starts a new log in loc holding trunc, hs and ents, synced. A
// log directory there (left by a crash before the caller recorded the
// format in the store) is wiped first.
func createLog(loc logLoc, trunc *pb.SnapshotMetadata, hs *pb.HardState, ents []*pb.Entry, maxCache int) (*logStore, error) {
	if err := raftlog.Remove(loc.fs, loc.dir); err != nil {
		return nil, err
	}
	l, err := raftlog.Open(loc.fs, loc.dir, raftlog.Options{SegmentSize: loc.segment}, func(raftlog.Record) error { return nil })
	if err != nil {
		return nil, err
	}
	s := &logStore{log: l, maxCache: maxCache, trunc: trunc, hs: hs, applied: trunc.GetIndex(), conf: trunc.GetConfState()}
	l.SetPrologue(s.prologue)
	if err := s.append(ents); err != nil {
		l.Close()
		return nil, err
	}
	if err := l.Write(true); err != nil {
		l.Close()
		return nil, fmt.Errorf("initialise raft log: %w", err)
	}
	return s, nil
}

// migrateV1 moves a format-1 log (in the kv.DB) into a raftlog, then
// deletes it from the DB. A crash before the format key changes leaves
// the old log in place, and the move starts over.
func migrateV1(db *kv.DB, k keys, loc logLoc, maxCache int) (*logStore, error) {
	trunc := new(pb.SnapshotMetadata)
	if err := getProto(db, k.trunc, trunc); err != nil {
		return nil, fmt.Errorf("read raft log truncation point: %w", err)
	}
	trunc = pb.EnsureSnapshotMetadata(trunc)
	hs := &pb.HardState{}
	if err := getProto(db, k.hardState, hs); err != nil && !errors.Is(err, kv.ErrNotFound) {
		return nil, fmt.Errorf("read raft hard state: %w", err)
	}
	it, err := db.NewIter(k.logLo, k.logHi)
	if err != nil {
		return nil, err
	}
	var ents []*pb.Entry
	want := trunc.GetIndex() + 1
	for it.First(); it.Valid(); it.Next() {
		e := new(pb.Entry)
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			it.Close()
			return nil, fmt.Errorf("decode raft log entry %d: %w", want, err)
		}
		if e.GetIndex() != want {
			it.Close()
			return nil, fmt.Errorf("raft log has entry %d where %d belongs (truncated at %d): store damaged", e.GetIndex(), want, trunc.GetIndex())
		}
		ents = append(ents, e)
		want++
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return nil, fmt.Errorf("read raft log: %w", err)
	}
	s, err := createLog(loc, trunc, hs, ents, maxCache)
	if err != nil {
		return nil, fmt.Errorf("move the raft log out of the store: %w", err)
	}
	// One atomic write: the old log goes as the new format is recorded.
	b := db.NewWriteBatch()
	defer b.Close()
	b.DeleteRange(k.logLo, k.logHi)
	b.Delete(k.trunc)
	b.Delete(k.hardState)
	b.Set(k.version, binary.BigEndian.AppendUint64(nil, logFormat))
	if err := b.Commit(true); err != nil {
		s.log.Close()
		return nil, fmt.Errorf("drop the old raft log from the store: %w", err)
	}
	return s, nil
}

// replayer rebuilds a logStore from the records of its log. Entries below
// the final truncation point may be missing (their segments were
// released); the ones above it must all be there.
type replayer struct {
	s     *logStore
	base  uint64 // the entries in memory are (base, base+len]
	ents  []*pb.Entry
	pos   []raftlog.Pos
	seenT bool
}

func (r *replayer) record(rec raftlog.Record) error {
	s := r.s
	switch rec.Type {
	case recHard:
		hs := new(pb.HardState)
		if err := proto.Unmarshal(rec.Payload, hs); err != nil {
			return fmt.Errorf("decode raft hard state: %w", err)
		}
		s.hs = hs
	case recTrunc, recReset:
		meta := new(pb.SnapshotMetadata)
		if err := proto.Unmarshal(rec.Payload, meta); err != nil {
			return fmt.Errorf("decode raft log truncation point: %w", err)
		}
		meta = pb.EnsureSnapshotMetadata(meta)
		s.trunc, r.seenT = meta, true
		c := meta.GetIndex()
		switch {
		case rec.Type == recReset || c >= r.base+uint64(len(r.ents)):
			r.base, r.ents, r.pos = c, nil, nil
		case c > r.base:
			r.ents = r.ents[c-r.base:]
			r.pos = r.pos[c-r.base:]
			r.base = c
		default:
			// c <= base: the entries in memory begin after a gap that a
			// later truncation point must cover; nothing to drop.
		}
	case recEntry:
		e := new(pb.Entry)
		if err := proto.Unmarshal(rec.Payload, e); err != nil {
			return fmt.Errorf("decode raft log entry: %w", err)
		}
		i := e.GetIndex()
		last := r.base + uint64(len(r.ents))
		switch {
		case s.trunc != nil && i <= s.trunc.GetIndex():
			// Below the truncation point: no longer part of the log.
		case i > last+1 || i <= r.base:
			// The entries before it were in released segments; a later
			// truncation point must cover them (finish checks).
			r.base, r.ents, r.pos = i-1, []*pb.Entry{e}, []raftlog.Pos{rec.Pos}
		default:
			// i <= last overwrites a tail, i == last+1 extends.
			r.ents = append(r.ents[:i-r.base-1], e)
			r.pos = append(r.pos[:i-r.base-1], rec.Pos)
		}
	default:
		return fmt.Errorf("unknown raft log record type %q", rec.Type)
	}
	return nil
}

func (r *replayer) finish(dir string) error {
	s := r.s
	if !r.seenT {
		return fmt.Errorf("%w: raft log %s holds no truncation point, but the store says the log is there: "+
			"the log directory is missing or damaged", raftlog.ErrCorrupt, dir)
	}
	t := s.trunc.GetIndex()
	if len(r.ents) > 0 && r.base != t {
		return fmt.Errorf("%w: raft log %s misses entries (%d, %d] after its truncation point %d", raftlog.ErrCorrupt, dir, t, r.base, t)
	}
	for _, e := range r.ents {
		s.terms = append(s.terms, e.GetTerm())
		s.cache = append(s.cache, e)
		s.cacheBytes += entryCost(e)
		s.trimCache()
	}
	s.pos = r.pos
	return nil
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
	v, _ := proto.MarshalOptions{Deterministic: true}.Marshal(peersMsg(m))
	return v
}

// peersMsg is the address book m as a message, in id order.
func peersMsg(m map[uint64]string) *nacrepb.RaftPeers {
	ps := &nacrepb.RaftPeers{}
	for id, a := range m {
		ps.Peers = append(ps.Peers, &nacrepb.RaftPeer{Id: id, Addr: a})
	}
	slices.SortFunc(ps.Peers, func(a, b *nacrepb.RaftPeer) int { return cmp.Compare(a.Id, b.Id) })
	return ps
}

// entryCost is what a cached entry costs in memory, roughly: its body plus
// the Go objects around it.
func entryCost(e *pb.Entry) int { return len(e.GetData()) + 96 }

// RecordsLog says whether the store db records the Raft log of the group
// whose keys start with prefix: a group writes that record when it first
// starts, so a store that has served a group and lacks it lost data (the
// group refuses to start on it). It only reads, for tools that look at a
// stopped target (nacre mdt backup).
func RecordsLog(db kv.Reader, prefix []byte) (bool, error) {
	_, err := db.Get(newKeys(prefix).version)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, kv.ErrNotFound):
		return false, nil
	}
	return false, fmt.Errorf("read the store's record of its raft log: %w", err)
}
