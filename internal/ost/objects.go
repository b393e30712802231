package ost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"syscall"

	"nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// MaxPrecreate bounds the objects one Precreate call makes, and so the
// size of its batch; a caller asking for more gets a shorter range back.
const MaxPrecreate = 1 << 16

// destroyChunk bounds the objects one Cleanup batch destroys.
const destroyChunk = 4096

// maxKeptWarnings bounds the per-object warnings of one Cleanup.
const maxKeptWarnings = 100

// Precreate makes objects [start, start+count) of seq exist, in one synced
// batch, leaving existing ones alone (it is idempotent), and raises seq's
// LAST_ID to the last of them. It returns the end of the range created,
// which is start+count unless count exceeds MaxPrecreate. Object ids start
// at 1.
func (s *Store) Precreate(seq, start, count uint64) (end uint64, err error) {
	op := fmt.Sprintf("precreate %s objects 0x%x:0x%x+%d", s.label, seq, start, count)
	if err := s.enter(); err != nil {
		return start, fmt.Errorf("%s: %w", op, err)
	}
	defer s.leave()
	if start == 0 {
		return start, fmt.Errorf("%s: object ids start at 1: %w", op, ErrInvalid)
	}
	count = min(count, MaxPrecreate)
	if start > math.MaxUint64-count {
		return start, fmt.Errorf("%s: range overflows: %w", op, ErrInvalid)
	}
	end = start + count
	if count == 0 {
		return end, nil
	}
	s.metaMu.Lock()
	defer s.metaMu.Unlock()

	b := s.db.NewWriteBatch()
	defer b.Close()
	created := uint64(0)
	add := func(oid uint64) error {
		created++
		return b.Set(objKey(fid.ObjID{Seq: seq, Oid: oid}), encodeRecord(&nacrepb.ObjectAttr{Seq: seq, Oid: oid}))
	}
	// Walk the existing records of the range and fill the gaps between them.
	it, err := s.db.NewIter(objKey(fid.ObjID{Seq: seq, Oid: start}), objKey(fid.ObjID{Seq: seq, Oid: end}))
	if err != nil {
		return start, fmt.Errorf("%s: %w", op, err)
	}
	next := start
	for it.First(); it.Valid(); it.Next() {
		obj, _ := objOfKey(it.Key())
		for ; next < obj.Oid; next++ {
			if err := add(next); err != nil {
				it.Close()
				return start, fmt.Errorf("%s: %w", op, err)
			}
		}
		next = obj.Oid + 1
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return start, fmt.Errorf("%s: %w", op, err)
	}
	for ; next < end; next++ {
		if err := add(next); err != nil {
			return start, fmt.Errorf("%s: %w", op, err)
		}
	}
	last, err := s.lastID(seq)
	if err != nil {
		return start, fmt.Errorf("%s: %w", op, err)
	}
	if end-1 > last {
		b.Set(lastIDKey(seq), u64(end-1))
	}
	if created > 0 {
		b.Set(countKey, u64(s.Objects()+created))
	}
	if b.Empty() {
		return end, nil
	}
	if err := b.Commit(true); err != nil {
		return start, fmt.Errorf("%s: %w", op, err)
	}
	s.objects.Add(int64(created))
	s.precreated.Add(created)
	s.log.Debug("objects precreated", "seq", fmt.Sprintf("0x%x", seq),
		"start", start, "end", end, "created", created)
	return end, nil
}

// LastID returns seq's LAST_ID: the highest oid precreated (0: none), or
// after a Cleanup, the highest oid left.
func (s *Store) LastID(seq uint64) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	return s.lastID(seq)
}

func (s *Store) lastID(seq uint64) (uint64, error) {
	v, err := s.db.Get(lastIDKey(seq))
	switch {
	case errors.Is(err, kv.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	case len(v) != 8:
		return 0, fmt.Errorf("LAST_ID of 0x%x is %d bytes: %w", seq, len(v), ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
}

// Cleanup destroys every object of seq with oid >= from that has no PFID:
// objects precreated for an MDS that never used them (the MDS calls it
// after a restart with the first oid it did not hand out). Objects with a
// PFID were written through a layout: they are kept, with a warning, for
// the checker to settle. It iterates only seq's records from `from` on,
// sets LAST_ID to the highest oid left in seq, and returns it.
func (s *Store) Cleanup(seq, from uint64) (destroyed, lastID uint64, err error) {
	op := fmt.Sprintf("cleanup %s objects 0x%x:0x%x and up", s.label, seq, from)
	if err := s.enter(); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", op, err)
	}
	defer s.leave()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()

	_, hi := seqBounds(seq)
	it, err := s.db.NewIter(objKey(fid.ObjID{Seq: seq, Oid: from}), hi)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: %w", op, err)
	}
	var victims []fid.ObjID
	kept := 0
	for it.First(); it.Valid(); it.Next() {
		obj, _ := objOfKey(it.Key())
		rec, err := decodeRecord(obj, it.Value())
		switch {
		case err != nil:
			// Not ours to judge: the checker repairs corrupt records.
			kept++
			s.log.Warn("orphan cleanup keeps an object with a corrupt record", "object", obj.String(), "err", err)
		case hasPFID(rec):
			kept++
			if kept <= maxKeptWarnings {
				s.log.Warn("orphan cleanup keeps an object written through a layout",
					"object", obj.String(), "pfid", fid.FromPB(rec.Parent).String(), "stripe", rec.StripeIndex)
			}
		default:
			victims = append(victims, obj)
		}
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", op, err)
	}
	for len(victims) > destroyChunk {
		n, err := s.destroyLocked(victims[:destroyChunk], nil, nil)
		destroyed += n
		if err != nil {
			return destroyed, 0, fmt.Errorf("%s: %w", op, err)
		}
		victims = victims[destroyChunk:]
	}
	n, err := s.destroyLocked(victims, nil, func(b *kv.Batch) error {
		// The records are gone from the batch's view only at commit, so
		// find the highest oid that survives it: skip the victims.
		lastID, err = s.highestOidExcept(seq, victims)
		if err != nil {
			return err
		}
		return b.Set(lastIDKey(seq), u64(lastID))
	})
	destroyed += n
	if err != nil {
		return destroyed, 0, fmt.Errorf("%s: %w", op, err)
	}
	s.log.Info("orphan cleanup done", "seq", fmt.Sprintf("0x%x", seq), "from", from,
		"destroyed", destroyed, "kept_with_pfid", kept, "last_id", lastID)
	return destroyed, lastID, nil
}

// highestOidExcept returns the highest oid of seq that is not in skip
// (skip is sorted, as Cleanup collects it), or 0.
func (s *Store) highestOidExcept(seq uint64, skip []fid.ObjID) (uint64, error) {
	lo, hi := seqBounds(seq)
	it, err := s.db.NewIter(lo, hi)
	if err != nil {
		return 0, err
	}
	defer it.Close()
	i := len(skip) - 1
	for ok := it.Last(); ok; ok = it.Prev() {
		obj, _ := objOfKey(it.Key())
		for i >= 0 && skip[i].Oid > obj.Oid {
			i--
		}
		if i >= 0 && skip[i].Oid == obj.Oid {
			continue
		}
		return obj.Oid, nil
	}
	return 0, it.Error()
}

// Destroy deletes objects, data and records. Missing objects are skipped,
// so a repeated Destroy is harmless. It returns how many it destroyed.
func (s *Store) Destroy(objs []fid.ObjID) (uint64, error) {
	if err := s.enter(); err != nil {
		return 0, fmt.Errorf("destroy %s objects: %w", s.label, err)
	}
	defer s.leave()
	s.metaMu.Lock()
	defer s.metaMu.Unlock()
	n, err := s.destroyLocked(objs, nil, nil)
	if err != nil {
		return n, fmt.Errorf("destroy %s objects: %w", s.label, err)
	}
	s.log.Debug("objects destroyed", "asked", len(objs), "destroyed", n)
	return n, nil
}

// destroyLocked destroys objs (metaMu held): first the data files, made
// durable by fsyncing their directories, then the records in one synced
// batch, to which final may add. The objects count as missing from the
// moment their files go, so no write can recreate a file in between. With
// cond, only the objects for which it holds, asked under the object's lock
// with the record, are destroyed.
func (s *Store) destroyLocked(objs []fid.ObjID, cond func(fid.ObjID, []byte) bool, final func(*kv.Batch) error) (uint64, error) {
	b := s.db.NewWriteBatch()
	defer b.Close()
	dirs := make(map[string]struct{})
	var marked []fid.ObjID
	defer func() { s.setDestroying(marked, false) }()
	var failed error
	for _, obj := range objs {
		if err := s.unlinkForDestroy(obj, cond, b, dirs, &marked); err != nil {
			failed = err
			break
		}
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			// The unlinks may not be durable: keep the records, so that a
			// crash cannot leave files that no record owns.
			return 0, errors.Join(failed, err)
		}
	}
	n := uint64(len(marked))
	if n > 0 {
		b.Set(countKey, u64(s.Objects()-min(n, s.Objects())))
	}
	if final != nil && failed == nil {
		if err := final(b); err != nil {
			return 0, err
		}
	}
	if !b.Empty() {
		if err := b.Commit(true); err != nil {
			return 0, errors.Join(failed, err)
		}
	}
	s.objects.Add(-int64(n))
	return n, failed
}

// unlinkForDestroy removes obj's data file under obj's lock and adds the
// deletion of its record to b. A missing object is skipped.
func (s *Store) unlinkForDestroy(obj fid.ObjID, cond func(fid.ObjID, []byte) bool, b *kv.Batch, dirs map[string]struct{}, marked *[]fid.ObjID) error {
	mu := s.lockFor(obj)
	mu.Lock()
	defer mu.Unlock()
	if s.isDestroying(obj) {
		return nil // listed twice
	}
	if v, err := s.db.Get(objKey(obj)); errors.Is(err, kv.ErrNotFound) {
		return nil
	} else if err != nil {
		return fmt.Errorf("object %s: %w", obj, err)
	} else if cond != nil && !cond(obj, v) {
		return nil
	}
	s.fds.drop(obj)
	p := s.path(obj)
	switch err := os.Remove(p); {
	case err == nil:
		dirs[filepath.Dir(p)] = struct{}{}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return fmt.Errorf("object %s: %w", obj, err)
	}
	s.setDestroying([]fid.ObjID{obj}, true)
	*marked = append(*marked, obj)
	return b.Delete(objKey(obj))
}

// GetObjects returns the attributes of objs, in order, for the checker:
// the record (PFID, layout, owner) and the data file's size, blocks and
// mtime. A missing object gives a reply with Exists false.
func (s *Store) GetObjects(objs []fid.ObjID) ([]*nacrepb.ObjectAttr, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("get %s objects: %w", s.label, err)
	}
	defer s.leave()
	out := make([]*nacrepb.ObjectAttr, 0, len(objs))
	for _, obj := range objs {
		rec, err := s.getRecord(obj)
		if errors.Is(err, ErrNoObject) || (err == nil && s.isDestroying(obj)) {
			out = append(out, &nacrepb.ObjectAttr{Seq: obj.Seq, Oid: obj.Oid})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("get %s object %s: %w", s.label, obj, err)
		}
		rec.Exists = true
		// Stat by path, not through the descriptor cache: a checker's
		// sweep must not evict the files clients are using.
		var st syscall.Stat_t
		switch err := syscall.Stat(s.path(obj), &st); {
		case err == nil:
			rec.Size, rec.Blocks, rec.MtimeNs = uint64(st.Size), uint64(st.Blocks), st.Mtim.Nano()
		case err != syscall.ENOENT:
			return nil, fmt.Errorf("get %s object %s: stat %s: %w", s.label, obj, s.path(obj), err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// IterObjects calls fn for the record of every object in [from, to) in
// key order (to zero: no upper bound), from a consistent snapshot, for the
// checker's orphan scan. Only record fields are set (Exists is true; size
// and blocks are not looked up: ask GetObjects). An error from fn stops the
// iteration and is returned.
func (s *Store) IterObjects(from, to fid.ObjID, fn func(*nacrepb.ObjectAttr) error) error {
	if err := s.enter(); err != nil {
		return fmt.Errorf("iterate %s objects: %w", s.label, err)
	}
	defer s.leave()
	hi := []byte{prefixObject + 1}
	if to != (fid.ObjID{}) {
		hi = objKey(to)
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(objKey(from), hi)
	if err != nil {
		return fmt.Errorf("iterate %s objects: %w", s.label, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		obj, _ := objOfKey(it.Key())
		rec, err := decodeRecord(obj, it.Value())
		if err != nil {
			return fmt.Errorf("iterate %s objects: object %s: %w", s.label, obj, err)
		}
		rec.Exists = true
		if err := fn(rec); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("iterate %s objects: %w", s.label, err)
	}
	return nil
}
