package mgs

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/raftgroup"
)

// The replicated state machine of the MGS: the target registry, the
// sequence controller, the FLD and the nodemaps, changed only by
// MGSCommand entries of the MGS's Raft group (one replica by default,
// three with --replicas 3).
// Apply reads only the command and this state, so every replica computes
// the same registry and grants the same sequence ranges; a range is
// granted once, by the entry that allocates it, whichever replica leads.

var (
	pfxTarget  = []byte("t/")
	keyNext    = []byte("seq/next")
	pfxFLD     = []byte("fld/")
	keyApplied = []byte("m/applied")
	pfxNodemap = []byte("nm/")
)

// stateRanges are the keys a snapshot carries (the store identity and
// the Raft log, under "\x00", are each replica's own).
var stateRanges = []raftgroup.KeyRange{
	{Lower: pfxFLD, Upper: kv.PrefixEnd(pfxFLD)},
	{Lower: []byte("m/"), Upper: kv.PrefixEnd([]byte("m/"))},
	{Lower: []byte("seq/"), Upper: kv.PrefixEnd([]byte("seq/"))},
	{Lower: pfxTarget, Upper: kv.PrefixEnd(pfxTarget)},
	{Lower: pfxNodemap, Upper: kv.PrefixEnd(pfxNodemap)},
}

// targetKey is "t/" kind(1) index(4), plus replica(8) for a replica of a
// replicated target (replica id 0 is an unreplicated target).
func targetKey(kind pb.TargetKind, index uint32, replica uint64) []byte {
	k := append(append([]byte(nil), pfxTarget...), byte(kind))
	k = binary.BigEndian.AppendUint32(k, index)
	if replica != 0 {
		k = binary.BigEndian.AppendUint64(k, replica)
	}
	return k
}

// load (re)reads the replicated state from the store. Callers hold s.mu.
func (s *Server) load() error {
	s.targets = map[string]*entry{}
	s.nextSeq = fid.SeqNormal
	s.fld = nil
	s.applied = 0
	it, err := s.cfg.DB.NewIter(pfxTarget, kv.PrefixEnd(pfxTarget))
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		ti := &pb.TargetInfo{}
		if err := proto.Unmarshal(it.Value(), ti); err != nil {
			it.Close()
			return fmt.Errorf("MGS store: corrupt target record %x: %w", it.Key(), err)
		}
		key := string(it.Key())
		e := &entry{info: ti}
		if old := s.health[key]; old != nil && old.uuid == ti.Uuid {
			e.h = old.h
		}
		s.targets[key] = e
	}
	it.Close()
	if v, err := s.cfg.DB.Get(keyNext); err == nil && len(v) == 8 {
		s.nextSeq = binary.BigEndian.Uint64(v)
	} else if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return err
	}
	if v, err := s.cfg.DB.Get(keyApplied); err == nil && len(v) == 8 {
		s.applied = binary.BigEndian.Uint64(v)
	} else if err != nil && !errors.Is(err, kv.ErrNotFound) {
		return err
	}
	it, err = s.cfg.DB.NewIter(pfxFLD, kv.PrefixEnd(pfxFLD))
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		r := &pb.SeqRange{}
		if err := proto.Unmarshal(it.Value(), r); err != nil {
			it.Close()
			return fmt.Errorf("MGS store: corrupt FLD record: %w", err)
		}
		s.fld = append(s.fld, r)
	}
	it.Close()
	return s.loadNodemaps()
}

// sm adapts the Server to raftgroup.StateMachine.
type sm struct{ s *Server }

// result is what Apply returns for a command: its refusal (an
// *errno.Error), or the granted range.
type result struct {
	err   error
	grant *pb.SeqRange
}

func (m sm) Apply(es []raftgroup.Entry) ([]any, error) {
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.cfg.DB.NewWriteBatch()
	defer b.Close()
	out := make([]any, len(es))
	for i, e := range es {
		if e.Data == nil {
			continue
		}
		cmd := &pb.MGSCommand{}
		if err := proto.Unmarshal(e.Data, cmd); err != nil {
			out[i] = result{err: errno.Errorf(errno.Internal, "undecodable MGS command at index %d: %v", e.Index, err)}
			continue
		}
		out[i] = s.apply(b, cmd)
	}
	last := es[len(es)-1].Index
	b.Set(keyApplied, binary.BigEndian.AppendUint64(nil, last))
	if err := b.Commit(false); err != nil {
		return nil, fmt.Errorf("MGS store write failed: %w", err)
	}
	s.applied = last
	return out, nil
}

func (m sm) Applied() uint64 {
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return m.s.applied
}

func (m sm) Snapshot() (raftgroup.SnapshotData, error) {
	return raftgroup.SnapshotKV(m.s.cfg.DB, stateRanges...), nil
}

func (m sm) Restore(r raftgroup.SnapshotData) error {
	defer r.Close()
	s := m.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := raftgroup.RestoreKV(s.cfg.DB, r, stateRanges...); err != nil {
		return err
	}
	s.keepHealth()
	return s.load()
}

// keepHealth remembers the in-memory health of every target across a
// reload (callers hold s.mu).
func (s *Server) keepHealth() {
	s.health = map[string]*entry{}
	for k, e := range s.targets {
		s.health[k] = &entry{uuid: e.info.Uuid, h: e.h}
	}
}

// apply runs one command against the state (s.mu held), staging its
// writes in b.
func (s *Server) apply(b *kv.Batch, cmd *pb.MGSCommand) result {
	switch op := cmd.Op.(type) {
	case *pb.MGSCommand_Register:
		return s.applyRegister(b, op.Register, cmd.NowNs)
	case *pb.MGSCommand_AllocSeq:
		return s.applyAlloc(b, op.AllocSeq)
	case *pb.MGSCommand_Deregister:
		d := op.Deregister
		key := string(targetKey(d.Kind, d.Index, d.ReplicaId))
		if _, ok := s.targets[key]; !ok {
			return result{}
		}
		b.Delete([]byte(key))
		delete(s.targets, key)
		return result{}
	case *pb.MGSCommand_NodemapSet:
		return s.applyNodemapSet(b, op.NodemapSet)
	case *pb.MGSCommand_NodemapRemove:
		return s.applyNodemapRemove(b, op.NodemapRemove)
	}
	return result{err: errno.Errorf(errno.InvalidArgument, "unknown MGS command %T", cmd.Op)}
}

func (s *Server) applyRegister(b *kv.Batch, ti *pb.TargetInfo, now int64) result {
	if ti.Fsname != s.cfg.ID.Fsname {
		return result{err: errno.Errorf(errno.FailedPrecondition, "%s belongs to file system %q but this MGS serves %q; point it at the right MGS: mgs_node in its directory's nacre-target.json (nacre format --mgsnode)",
			label(ti.Kind, ti.Index), ti.Fsname, s.cfg.ID.Fsname)}
	}
	switch {
	case ti.Kind == pb.TargetKind_TARGET_MDT, ti.Kind == pb.TargetKind_TARGET_OST:
	case ti.Kind == pb.TargetKind_TARGET_MGS && ti.ReplicaId != 0:
	default:
		return result{err: errno.Errorf(errno.InvalidArgument, "cannot register a target of kind %v", ti.Kind)}
	}
	key := string(targetKey(ti.Kind, ti.Index, ti.ReplicaId))
	if old, ok := s.targets[key]; ok && old.info.Uuid != ti.Uuid {
		what := label(ti.Kind, ti.Index)
		why := "two targets were formatted with the same index"
		if ti.ReplicaId != 0 {
			what += fmt.Sprintf(" replica %d", ti.ReplicaId)
			why = fmt.Sprintf("two replicas were formatted with the same id, or this one was formatted again after its store was lost; "+
				"a replica id is never reused: give this one a new id and replace the old one (nacre replica replace --id %d --new-id M)", ti.ReplicaId)
		}
		return result{err: errno.Errorf(errno.AlreadyExists, "%s is already registered by another target (uuid %s, at %s); this one has uuid %s: %s",
			what, old.info.Uuid, old.info.Addr, ti.Uuid, why)}
	}
	ti = proto.Clone(ti).(*pb.TargetInfo)
	ti.State, ti.LastHeardNs, ti.Statfs, ti.Leader = "", 0, nil, false
	ti.RegisteredNs = now
	b.Set([]byte(key), mustMarshal(ti))
	e := s.targets[key]
	if e == nil {
		e = &entry{}
		s.targets[key] = e
	}
	e.info = ti
	return result{}
}

func (s *Server) applyAlloc(b *kv.Batch, r *pb.AllocSeqRangeRequest) result {
	if r.Count == 0 || r.Count > 1<<20 {
		return result{err: errno.Errorf(errno.InvalidArgument, "sequence count %d out of range (1..%d)", r.Count, 1<<20)}
	}
	g := &pb.SeqRange{Start: s.nextSeq, End: s.nextSeq + r.Count, Mdt: r.Mdt}
	b.Set(keyNext, binary.BigEndian.AppendUint64(nil, g.End))
	b.Set(binary.BigEndian.AppendUint64(append([]byte(nil), pfxFLD...), g.Start), mustMarshal(g))
	s.nextSeq = g.End
	s.fld = append(s.fld, g)
	return result{grant: proto.Clone(g).(*pb.SeqRange)}
}
