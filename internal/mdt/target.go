package mdt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/target"
)

// Target is an open MDT. Apply must be called from one goroutine at a time
// (the Raft group's apply loop); the read methods are safe concurrently.
type Target struct {
	db  *kv.DB
	id  target.Identity
	log *slog.Logger

	// mu guards the cached replicated state below. Apply holds it for
	// writing; the MDS's background loops read it.
	mu        sync.RWMutex
	applied   uint64
	nextLocal uint64
	inodes    uint64
	seq       seqState
	pools     map[uint32]*PoolState
	// rootLayout is the file system's default layout (the root's), read
	// by every create whose directory has none.
	rootLayout *pb.Layout
	c          caches
	// dq is where DestroyQueue starts.
	dq destroyQueueState
	// pending: the directories a participant's pending intent holds
	// (dtx.go): one transaction at a time each, and none takes new names
	// while an rmdir holds it. Apply's alone.
	pending map[fid.FID]pendingIntent
}

// rootLocal is the root directory's local key.
const rootLocal = 1

// seqState is the FID allocator: the current sequence, the next object id
// in it, and the granted ranges not yet used up.
type seqState struct {
	Cur    uint64
	Next   uint32
	Ranges [][2]uint64 // [start, end) sequences, in grant order
}

// PoolState is one OST's precreate pool as recorded in replicated state:
// objects [Next, End) of Seq exist on the OST and are unused.
type PoolState struct {
	Seq  uint64
	Next uint64
	End  uint64
}

// Avail is the number of unused precreated objects.
func (p PoolState) Avail() uint64 {
	if p.End > p.Next {
		return p.End - p.Next
	}
	return 0
}

func (s *seqState) encode() []byte {
	b := make([]byte, 0, 16+16*len(s.Ranges))
	b = binary.BigEndian.AppendUint64(b, s.Cur)
	b = binary.BigEndian.AppendUint32(b, s.Next)
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Ranges)))
	for _, r := range s.Ranges {
		b = binary.BigEndian.AppendUint64(b, r[0])
		b = binary.BigEndian.AppendUint64(b, r[1])
	}
	return b
}

func decodeSeqState(b []byte) (seqState, error) {
	var s seqState
	if len(b) < 16 {
		return s, fmt.Errorf("FID sequence state: %d bytes", len(b))
	}
	s.Cur = binary.BigEndian.Uint64(b)
	s.Next = binary.BigEndian.Uint32(b[8:])
	n := int(binary.BigEndian.Uint32(b[12:]))
	b = b[16:]
	if len(b) != 16*n {
		return s, fmt.Errorf("FID sequence state: %d ranges in %d bytes", n, len(b))
	}
	for i := 0; i < n; i++ {
		s.Ranges = append(s.Ranges, [2]uint64{binary.BigEndian.Uint64(b[16*i:]), binary.BigEndian.Uint64(b[16*i+8:])})
	}
	return s, nil
}

func (p *PoolState) encode() []byte {
	b := binary.BigEndian.AppendUint64(nil, p.Seq)
	b = binary.BigEndian.AppendUint64(b, p.Next)
	return binary.BigEndian.AppendUint64(b, p.End)
}

// Open opens the MDT state machine on db (which the Raft log shares),
// creating the root directory in a new store.
func Open(db *kv.DB, id target.Identity, log *slog.Logger) (*Target, error) {
	if log == nil {
		log = slog.Default()
	}
	t := &Target{db: db, id: id, log: log, pools: map[uint32]*PoolState{}, c: newCaches()}
	if _, err := db.Get(keyNextLocal); errors.Is(err, kv.ErrNotFound) {
		if err := t.bootstrap(); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, fmt.Errorf("open %s: %w", id.Name(), err)
	}
	if err := t.load(); err != nil {
		return nil, fmt.Errorf("open %s: %w", id.Name(), err)
	}
	return t, nil
}

// bootstrap writes the root directory (on MDT0). It is the same on every replica
// (its times come from the format time), so replicas start identical.
func (t *Target) bootstrap() error {
	b := t.db.NewWriteBatch()
	defer b.Close()
	now := t.id.Created.UnixNano()
	inodes := uint64(0)
	// The root lives on MDT0; another MDT starts empty and holds only
	// what remote directories and their contents put there.
	if t.id.Index == 0 {
		root := &pb.Inode{
			Fid: fid.Root.PB(), Mode: syscall.S_IFDIR | 0o755, Nlink: 2,
			AtimeNs: now, MtimeNs: now, CtimeNs: now, BtimeNs: now, Size: 4096, Blocks: 8,
		}
		b.Set(OIKey(fid.Root), putU64(rootLocal))
		b.Set(ObjKey(rootLocal), mustMarshal(root))
		inodes = 1
	}
	b.Set(keyNextLocal, putU64(rootLocal+1))
	b.Set(keyInodes, putU64(inodes))
	b.Set(keyApplied, putU64(0))
	s := seqState{}
	b.Set(keyFidSeq, s.encode())
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("create root of %s: %w", t.id.Name(), err)
	}
	return nil
}

func (t *Target) load() error {
	if _, root, err := getInode(t.db, fid.Root); err == nil {
		t.rootLayout = root.Layout
	}
	if err := t.loadPending(); err != nil {
		return fmt.Errorf("load cross-MDT transactions: %w", err)
	}
	if err := t.loadReplyIndex(); err != nil {
		return fmt.Errorf("load reply cache index: %w", err)
	}
	t.applied = t.getU64(keyApplied)
	t.nextLocal = t.getU64(keyNextLocal)
	t.inodes = t.getU64(keyInodes)
	v, err := t.db.Get(keyFidSeq)
	if err != nil {
		return fmt.Errorf("read FID sequence state: %w", err)
	}
	if t.seq, err = decodeSeqState(v); err != nil {
		return err
	}
	lo := metaKey("pool/")
	it, err := t.db.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k, v := it.Key(), it.Value()
		if len(k) != len(lo)+4 || len(v) != 24 {
			return fmt.Errorf("corrupt pool record %x", k)
		}
		ost := binary.BigEndian.Uint32(k[len(lo):])
		t.pools[ost] = &PoolState{Seq: binary.BigEndian.Uint64(v), Next: binary.BigEndian.Uint64(v[8:]), End: binary.BigEndian.Uint64(v[16:])}
	}
	return it.Error()
}

func (t *Target) getU64(k []byte) uint64 {
	v, _ := t.db.Get(k)
	return u64(v)
}

// DB is the target's store (shared with the Raft log and the checker).
func (t *Target) DB() *kv.DB { return t.db }

// Identity is the target's identity.
func (t *Target) Identity() target.Identity { return t.id }

// Applied is the last applied Raft index.
func (t *Target) Applied() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.applied
}

// Pools returns a copy of the precreate pools, by OST index.
func (t *Target) Pools() map[uint32]PoolState {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make(map[uint32]PoolState, len(t.pools))
	for k, v := range t.pools {
		out[k] = *v
	}
	return out
}

// PoolOSTs lists the OSTs that have a pool, in index order.
func (t *Target) PoolOSTs() []uint32 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]uint32, 0, len(t.pools))
	for k := range t.pools {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// SeqRemaining is the number of FIDs left in the granted ranges.
func (t *Target) SeqRemaining() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var n uint64
	if t.seq.Cur != 0 {
		n += uint64(fid.Width - t.seq.Next)
	}
	for _, r := range t.seq.Ranges {
		n += (r[1] - r[0]) * uint64(fid.Width)
	}
	return n
}

// Inodes is the number of objects on the MDT.
func (t *Target) Inodes() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.inodes
}

func mustMarshal(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", m, err))
	}
	return b
}

// StateLower is the first key of the replicated state (everything from the
// counters on; the store identity and the Raft log sort before it).
var StateLower = []byte{pfxMeta}

// ReplaceState swaps the whole replicated state (a Raft snapshot being
// installed): restore rewrites the store's state range, then the cached
// counters are reloaded. Apply cannot run meanwhile.
func (t *Target) ReplaceState(restore func(db *kv.DB) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := restore(t.db); err != nil {
		return err
	}
	t.pools = map[uint32]*PoolState{}
	t.invalidate()
	t.dq.noteQueued(queueStart) // the image may hold any queue
	return t.load()
}
