package ost

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"nacre/api/nacrepb"
	"nacre/internal/bulk"
	"nacre/internal/fid"
)

// open returns obj's data file from the cache, opening it if needed, with
// a reference the caller releases. With create, a missing file is created;
// without, a missing file gives (nil, nil): the object exists but holds no
// data yet. A missing object is ErrNoObject.
func (s *Store) open(obj fid.ObjID, create bool) (*fdEntry, error) {
	if e := s.fds.get(obj); e != nil {
		return e, nil
	}
	mu := s.lockFor(obj)
	mu.Lock()
	defer mu.Unlock()
	if e := s.fds.get(obj); e != nil {
		return e, nil
	}
	if s.isDestroying(obj) {
		return nil, ErrNoObject
	}
	rec, err := s.getRecord(obj)
	if err != nil {
		return nil, err
	}
	p := s.path(obj)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		if rec.DataSynced {
			// Lost, not "no data yet": zeros in its place would be
			// silent corruption.
			return nil, &dataLostError{label: s.label, path: p}
		}
		if !create {
			return nil, nil
		}
		// The object's file (and perhaps its bucket directory) takes
		// inodes, which the store must never run out of.
		if err := s.space.AdmitFiles(2); err != nil {
			s.warnFull(err)
			return nil, err
		}
		// We hold the object's lock, so nobody else creates this file.
		dir := s.bucketDir(obj)
		if err := mkdirSynced(dir); err != nil {
			return nil, err
		}
		f, err = os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			s.markDirDirty(dir)
		}
	}
	if err != nil {
		return nil, err
	}
	e := s.fds.add(obj, f, hasPFID(rec), rec.DataSynced)
	e.dirty = s.disk.NewFile()
	return e, nil
}

// checkRange refuses offsets that do not fit a file offset.
func checkRange(off, length uint64) error {
	if off > math.MaxInt64 || length > math.MaxInt64-off {
		return ErrTooBig
	}
	return nil
}

// Read implements bulk.Handler: it reads from obj at off into p and
// returns fewer bytes than len(p) only at the object's end.
func (s *Store) Read(obj fid.ObjID, off uint64, p []byte) (int, error) {
	if err := s.enter(); err != nil {
		return 0, s.ioErr("read", obj, off, err)
	}
	defer s.leave()
	e, err := s.open(obj, false)
	if err != nil {
		return 0, s.ioErr("read", obj, off, err)
	}
	if e == nil {
		return 0, nil // no data yet
	}
	defer s.fds.release(e)
	if off > math.MaxInt64 {
		return 0, nil // beyond any file
	}
	n, err := e.f.ReadAt(p, int64(off))
	if err == io.EOF {
		err = nil
	}
	if err != nil {
		return n, s.ioErr("read", obj, off, err)
	}
	return n, nil
}

// Write implements bulk.Handler: it writes data at off of obj, which must
// exist (a write to a missing object is a dangling layout reference, made
// visible as ENOENT, never silently created). The first write with a PFID
// records it (not synced: see Sync).
func (s *Store) Write(obj fid.ObjID, off uint64, data []byte, meta *bulk.ObjMeta) error {
	if err := s.enter(); err != nil {
		return s.ioErr("write", obj, off, err)
	}
	defer s.leave()
	if err := checkRange(off, uint64(len(data))); err != nil {
		return s.ioErr("write", obj, off, err)
	}
	if err := s.space.Admit(uint64(len(data))); err != nil {
		s.warnFull(err)
		return s.ioErr("write", obj, off, err)
	}
	defer s.space.Done(uint64(len(data)))
	e, err := s.open(obj, true)
	if err != nil {
		return s.ioErr("write", obj, off, err)
	}
	defer s.fds.release(e)
	if err := s.recordFirstMeta(obj, e, meta); err != nil {
		return s.ioErr("write", obj, off, err)
	}
	end := off + uint64(len(data))
	var before unix.Stat_t
	if end >= farWrite {
		// Near the largest file the backing file system holds, a write
		// may land in part and then fail (EFBIG); what landed must not
		// stay, or the object grows by a write its client reports failed.
		if err := control(e.f, "fstat", func(fd int) error { return unix.Fstat(fd, &before) }); err != nil {
			return s.ioErr("write", obj, off, err)
		}
	}
	n, err := e.f.WriteAt(data, int64(off))
	e.dirty.Wrote(int64(off), n)
	if err != nil {
		if n > 0 && end >= farWrite && uint64(before.Size) <= off {
			_ = e.f.Truncate(before.Size)
		}
		return s.ioErr("write", obj, off, err)
	}
	return nil
}

// farWrite is the object offset from which a write's end may pass the
// largest file of the backing file system (16 TiB on ext4).
const farWrite = 1 << 40

// Punch implements bulk.Handler: it deallocates [off, off+length) of obj
// (reads of it return zeros) without changing its size.
func (s *Store) Punch(obj fid.ObjID, off, length uint64) error {
	if err := s.enter(); err != nil {
		return s.ioErr("punch", obj, off, err)
	}
	defer s.leave()
	if off > math.MaxInt64 {
		return nil // beyond any data
	}
	length = min(length, math.MaxInt64-off)
	e, err := s.open(obj, false)
	if err != nil {
		return s.ioErr("punch", obj, off, err)
	}
	if e == nil || length == 0 {
		return nil
	}
	defer s.fds.release(e)
	// Nothing is allocated past the end, and a range "to infinity" would
	// exceed the file system's largest file (EFBIG): stop at the size.
	var st unix.Stat_t
	err = control(e.f, "fstat", func(fd int) error { return unix.Fstat(fd, &st) })
	if err != nil {
		return s.ioErr("punch", obj, off, err)
	}
	if off >= uint64(st.Size) {
		return nil
	}
	length = min(length, uint64(st.Size)-off)
	err = control(e.f, "fallocate", func(fd int) error {
		return unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, int64(off), int64(length))
	})
	if err != nil {
		return s.ioErr("punch", obj, off, err)
	}
	return nil
}

// Truncate implements bulk.Handler: it sets obj's size, recording meta as
// Write does.
func (s *Store) Truncate(obj fid.ObjID, size uint64, meta *bulk.ObjMeta) error {
	op := func(err error) error { return fmt.Errorf("truncate %s object %s to %d: %w", s.label, obj, size, err) }
	if err := s.enter(); err != nil {
		return op(err)
	}
	defer s.leave()
	if size > math.MaxInt64 {
		return op(ErrTooBig)
	}
	// Truncating to zero needs no file; anything else makes one.
	e, err := s.open(obj, size > 0)
	if err != nil {
		return op(err)
	}
	if e != nil {
		defer s.fds.release(e)
	}
	if err := s.recordFirstMeta(obj, e, meta); err != nil {
		return op(err)
	}
	if e != nil {
		if err := e.f.Truncate(int64(size)); err != nil {
			return op(err)
		}
	}
	return nil
}

// GetAttr implements bulk.Handler: size, blocks and mtime of obj's data;
// a missing object is Exists false, not an error.
func (s *Store) GetAttr(obj fid.ObjID) (bulk.ObjAttr, error) {
	op := func(err error) error { return fmt.Errorf("getattr %s object %s: %w", s.label, obj, err) }
	if err := s.enter(); err != nil {
		return bulk.ObjAttr{}, op(err)
	}
	defer s.leave()
	e, err := s.open(obj, false)
	if errors.Is(err, ErrNoObject) {
		return bulk.ObjAttr{}, nil
	}
	if err != nil {
		return bulk.ObjAttr{}, op(err)
	}
	if e == nil {
		return bulk.ObjAttr{Exists: true}, nil
	}
	defer s.fds.release(e)
	var st unix.Stat_t
	if err := control(e.f, "fstat", func(fd int) error { return unix.Fstat(fd, &st) }); err != nil {
		return bulk.ObjAttr{}, op(err)
	}
	return bulk.ObjAttr{Size: uint64(st.Size), Blocks: uint64(st.Blocks), MtimeNs: st.Mtim.Nano(), Exists: true}, nil
}

// Sync implements bulk.Handler: it makes obj's data and attribute record
// durable. It fdatasyncs the file, fsyncs its directory if the file is new
// since the last such fsync, and syncs the store's WAL if any record
// changed since the last WAL sync.
func (s *Store) Sync(obj fid.ObjID) error {
	op := func(err error) error { return fmt.Errorf("sync %s object %s: %w", s.label, obj, err) }
	if err := s.enter(); err != nil {
		return op(err)
	}
	defer s.leave()
	e, err := s.open(obj, false)
	if err != nil {
		return op(err)
	}
	if e != nil {
		err := control(e.f, "fdatasync", unix.Fdatasync)
		if err == nil {
			e.dirty.Synced()
			err = s.syncBucket(obj)
		}
		if err == nil && !e.synced.Load() {
			// The file is on disk now, with its directory entry: from
			// here its absence is lost data (open).
			err = s.markSynced(obj, e)
		}
		s.fds.release(e)
		if err != nil {
			return op(err)
		}
	} else if err := s.syncBucket(obj); err != nil {
		return op(err)
	}
	if err := s.syncRecords(); err != nil {
		return op(err)
	}
	return nil
}

// SetAttr implements bulk.Handler: it sets the groups of obj's record that
// meta names (the owner and project a chown gave the file, pushed by the
// client once the MDT committed it), durably: nothing else would make the
// change survive a crash.
func (s *Store) SetAttr(obj fid.ObjID, meta *bulk.ObjMeta) error {
	op := func(err error) error { return fmt.Errorf("setattr %s object %s: %w", s.label, obj, err) }
	if err := s.enter(); err != nil {
		return op(err)
	}
	defer s.leave()
	if meta == nil {
		return op(ErrInvalid)
	}
	rec, err := s.updateRecord(obj, func(rec *nacrepb.ObjectAttr) bool {
		applyMeta(rec, meta)
		return true
	})
	if err != nil {
		return op(err)
	}
	if e := s.fds.get(obj); e != nil {
		e.hasPFID.Store(hasPFID(rec))
		s.fds.release(e)
	}
	if err := s.syncRecords(); err != nil {
		return op(err)
	}
	return nil
}

// dataLostError is ErrDataLost for one object: the client is told which
// OST's file is missing (bulk.PublicError), the OST's log has the path.
type dataLostError struct{ label, path string }

func (e *dataLostError) Error() string { return e.path + ": " + ErrDataLost.Error() }
func (e *dataLostError) Unwrap() error { return ErrDataLost }
func (e *dataLostError) Public() string {
	return "the object's data file is missing on " + e.label + ", although data was synced to it: see that OST's log"
}

// markSynced records in obj's record that its data file was synced
// (made durable by the next syncRecords).
func (s *Store) markSynced(obj fid.ObjID, e *fdEntry) error {
	_, err := s.updateRecord(obj, func(rec *nacrepb.ObjectAttr) bool {
		changed := !rec.DataSynced
		rec.DataSynced = true
		return changed
	})
	if err == nil {
		e.synced.Store(true)
	}
	return err
}

// updateRecord applies change to obj's record under the object's lock and
// stores it if change says it changed; it returns the record as it is
// now. A missing object, or one being destroyed, is ErrNoObject.
func (s *Store) updateRecord(obj fid.ObjID, change func(rec *nacrepb.ObjectAttr) bool) (*nacrepb.ObjectAttr, error) {
	mu := s.lockFor(obj)
	mu.Lock()
	defer mu.Unlock()
	if s.isDestroying(obj) {
		return nil, ErrNoObject
	}
	rec, err := s.getRecord(obj)
	if err != nil {
		return nil, err
	}
	if change(rec) {
		if err := s.putRecord(obj, rec); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// recordFirstMeta records meta's PFID, layout slot and owner in obj's
// record if it has no PFID yet: the first write through a layout names
// the object's parent, as Lustre's filter_fid does. Later writes leave a
// recorded PFID alone; a different one is for the checker to find.
func (s *Store) recordFirstMeta(obj fid.ObjID, e *fdEntry, meta *bulk.ObjMeta) error {
	if meta == nil || !meta.Has(bulk.MetaPFID) || meta.Parent.IsZero() || (e != nil && e.hasPFID.Load()) {
		return nil
	}
	_, err := s.updateRecord(obj, func(rec *nacrepb.ObjectAttr) bool {
		if hasPFID(rec) {
			if got := fid.FromPB(rec.Parent); got != meta.Parent {
				s.log.Debug("write names another parent than the object's PFID",
					"object", obj.String(), "pfid", got.String(), "write_parent", meta.Parent.String())
			}
			return false
		}
		applyMeta(rec, meta)
		return true
	})
	if err != nil {
		return err
	}
	if e != nil {
		e.hasPFID.Store(true)
	}
	return nil
}

// ioErr gives an I/O error its context; the errno stays reachable.
func (s *Store) ioErr(op string, obj fid.ObjID, off uint64, err error) error {
	return fmt.Errorf("%s %s object %s at %d: %w", op, s.label, obj, off, err)
}

// fullWarnEvery spaces the log lines of a full OST: the bulk server logs
// each refused write at debug level only, and the log is on the full
// device.
const fullWarnEvery = time.Minute

// warnFull logs that the OST refuses writes, at most once a minute.
func (s *Store) warnFull(err error) {
	now := time.Now().UnixNano()
	last := s.fullWarned.Load()
	if now-last < int64(fullWarnEvery) || !s.fullWarned.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("OST full: refusing writes (logged at most once a minute)", "err", err)
}
