package ost

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacrepb"
	"nacre/internal/bulk"
	"nacre/internal/diskio"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/reserve"
	"nacre/internal/target"
)

// errnoError is a sentinel error that carries an errno, so that both
// errors.Is(err, ErrNoObject) and errors.Is(err, syscall.ENOENT) hold and
// the bulk server and the gRPC adapter (errno.CodeOf, through internal/grpcx)
// translate it without a table of their own.
type errnoError struct {
	msg   string
	errno syscall.Errno
}

func (e *errnoError) Error() string { return e.msg }
func (e *errnoError) Unwrap() error { return e.errno }

// Sentinel errors.
var (
	// ErrNoObject: the object has no attribute record (never precreated,
	// or destroyed).
	ErrNoObject error = &errnoError{"object does not exist", syscall.ENOENT}
	// ErrCorrupt: an attribute record does not decode or names another object.
	ErrCorrupt error = &errnoError{"corrupt attribute record", syscall.EIO}
	// ErrClosed: the store is closed (the server is shutting down).
	ErrClosed error = &errnoError{"object store closed", syscall.ESHUTDOWN}
	// ErrInvalid: a request's arguments are out of range.
	ErrInvalid error = &errnoError{"invalid argument", syscall.EINVAL}
	// ErrTooBig: an offset or size beyond the largest object.
	ErrTooBig error = &errnoError{"offset beyond the largest object size", syscall.EFBIG}
	// ErrDataLost: the object's data file, once synced, is not there.
	ErrDataLost error = &errnoError{"its data file is missing, although data was written to it and synced; restore the file from a backup of the OST's objects directory, or remove the file that holds this object", syscall.EIO}
)

// Options configure Open.
type Options struct {
	// Log receives one line per event (nil: discard); the store adds the
	// target's name to every line.
	Log *slog.Logger
	// MaxOpenFiles bounds the cache of open data files (0: 1024).
	MaxOpenFiles int
	// KV configures the attribute store; tests put a crashable file
	// system here.
	KV kv.Options
	// Statfs reports the device's usage for the space reserve (nil:
	// reserve.Statfs); tests make a device look full with it.
	Statfs func(string) (reserve.Usage, error)
	// Disk counts what the data files write to the device (nil: not
	// counted); the attribute store's writes count through KV.FS.
	Disk *diskio.Counter
}

// Store is an open object target. It is safe for concurrent use and
// implements bulk.Handler.
type Store struct {
	dir    string
	objDir string
	id     target.Identity
	label  string // OST0001, for messages
	db     *kv.DB
	log    *slog.Logger
	fds    *fdCache
	disk   *diskio.Counter
	// space refuses data writes that would eat into the room the
	// attribute store needs (package space); memtable is that store's
	// memtable size, which the reserve is made of.
	space    *reserve.Guard
	memtable uint64
	// fullWarned is when warnFull last logged (unix ns).
	fullWarned atomic.Int64

	// locks serialise, per object, record read-modify-writes, file
	// creation and Destroy; striped to bound memory.
	locks [256]sync.Mutex
	// metaMu serialises Precreate, Cleanup and Destroy, which maintain
	// the object count and LAST_ID.
	metaMu     sync.Mutex
	objects    atomic.Int64
	precreated atomic.Uint64 // objects made by Precreate since Open

	// destroying holds objects whose files are gone but whose records are
	// not yet deleted; they already count as missing.
	destroyMu  sync.Mutex
	destroying map[fid.ObjID]struct{}

	// dirtyDirs are bucket directories that gained a file since their
	// last fsync.
	dirMu     sync.Mutex
	dirtyDirs map[string]struct{}

	// recDirty counts unsynced record writes; recSynced is the count
	// covered by the last WAL sync. Sync skips the WAL when they match.
	recDirty, recSynced atomic.Uint64

	closeMu sync.RWMutex // held shared by every operation
	closed  bool

	epoch    uint64   // this start's (epoch.go)
	epochRec epochRec // as recorded at start
}

var _ bulk.Handler = (*Store)(nil)

// Store keys; see the package documentation.
const (
	prefixObject = 'o'
	prefixLastID = 'l'
)

var countKey = []byte{'n'}

func objKey(obj fid.ObjID) []byte {
	k := make([]byte, 17)
	k[0] = prefixObject
	binary.BigEndian.PutUint64(k[1:], obj.Seq)
	binary.BigEndian.PutUint64(k[9:], obj.Oid)
	return k
}

// seqBounds are the keys bounding seq's records.
func seqBounds(seq uint64) (lo, hi []byte) {
	lo = objKey(fid.ObjID{Seq: seq})
	hi = kv.PrefixEnd(lo[:9])
	if hi == nil {
		hi = []byte{prefixObject + 1}
	}
	return lo, hi
}

func objOfKey(k []byte) (fid.ObjID, bool) {
	if len(k) != 17 || k[0] != prefixObject {
		return fid.ObjID{}, false
	}
	return fid.ObjID{Seq: binary.BigEndian.Uint64(k[1:]), Oid: binary.BigEndian.Uint64(k[9:])}, true
}

func lastIDKey(seq uint64) []byte {
	k := make([]byte, 9)
	k[0] = prefixLastID
	binary.BigEndian.PutUint64(k[1:], seq)
	return k
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// Open opens the OST in dir, whose identity must be id's: an MDT's or
// another file system's directory is refused, as is a store that belongs
// to another target.
func Open(dir string, id target.Identity, opts Options) (*Store, error) {
	if id.Kind != target.OST {
		return nil, fmt.Errorf("open object store %s: %s is not an OST", dir, id.Describe())
	}
	disk, err := target.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("open object store: %w", err)
	}
	if disk.Kind != target.OST {
		return nil, fmt.Errorf("open object store %s: the directory holds %s, not an OST; give the OSS an OST directory",
			dir, disk.Describe())
	}
	if disk.Fsname != id.Fsname || disk.Index != id.Index || (id.UUID != "" && disk.UUID != id.UUID) {
		return nil, fmt.Errorf("open object store %s: the directory holds %s (uuid %s), not %s (uuid %s)",
			dir, disk.Describe(), disk.UUID, id.Describe(), id.UUID)
	}
	if err := reserve.CheckOpen(target.StoreDir(dir), disk.Label(), opts.KV.MemTable(), opts.Statfs); err != nil {
		return nil, err
	}
	db, err := kv.Open(target.StoreDir(dir), opts.KV)
	if err != nil {
		return nil, fmt.Errorf("open object store of %s: %w", disk.Label(), err)
	}
	fail := func(err error) (*Store, error) {
		db.Close()
		return nil, err
	}
	if err := target.CheckStore(db, disk); err != nil {
		return fail(err)
	}
	objDir := filepath.Join(dir, "objects")
	if err := os.MkdirAll(objDir, 0o700); err != nil {
		return fail(fmt.Errorf("open object store of %s: %w", disk.Label(), err))
	}
	n := uint64(0)
	switch v, err := db.Get(countKey); {
	case err == nil && len(v) == 8:
		n = binary.BigEndian.Uint64(v)
	case err == nil:
		return fail(fmt.Errorf("open object store of %s: object count record of %d bytes: %w", disk.Label(), len(v), ErrCorrupt))
	case !errors.Is(err, kv.ErrNotFound):
		return fail(fmt.Errorf("open object store of %s: %w", disk.Label(), err))
	}
	max := opts.MaxOpenFiles
	if max <= 0 {
		max = 1024
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The caller names the target in its logger.
	s := &Store{
		dir:        dir,
		objDir:     objDir,
		id:         disk,
		label:      disk.Label(),
		disk:       opts.Disk,
		db:         db,
		log:        log,
		fds:        newFDCache(max),
		space:      reserve.NewGuard(dir, disk.Label(), opts.KV.MemTable(), opts.Statfs),
		memtable:   opts.KV.MemTable(),
		destroying: make(map[fid.ObjID]struct{}),
		dirtyDirs:  make(map[string]struct{}),
	}
	s.objects.Store(int64(n))
	if err := s.startEpoch(); err != nil {
		return fail(fmt.Errorf("open object store of %s: %w", disk.Label(), err))
	}
	return s, nil
}

// Close syncs the attribute records and closes the store. Calls made after
// Close fail with ErrClosed; Close waits for calls in progress.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.fds.clear()
	err := s.endEpoch()
	if serr := s.db.SyncWAL(); err == nil {
		err = serr
	}
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close object store of %s: %w", s.label, err)
	}
	return nil
}

// enter admits an operation unless the store is closed; leave ends it.
func (s *Store) enter() error {
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) leave() { s.closeMu.RUnlock() }

// Identity is the target's identity as recorded in its directory.
func (s *Store) Identity() target.Identity { return s.id }

// Objects is the number of objects (records) in the store.
func (s *Store) Objects() uint64 { return uint64(max(s.objects.Load(), 0)) }

// Precreated is the number of objects Precreate made since Open (not
// counting those that already existed).
func (s *Store) Precreated() uint64 { return s.precreated.Load() }

// OpenFiles is the number of data files held open by the cache.
func (s *Store) OpenFiles() int { return s.fds.len() }

func (s *Store) lockFor(obj fid.ObjID) *sync.Mutex {
	h := obj.Oid*0x9e3779b97f4a7c15 ^ obj.Seq
	return &s.locks[h%uint64(len(s.locks))]
}

func (s *Store) isDestroying(obj fid.ObjID) bool {
	s.destroyMu.Lock()
	defer s.destroyMu.Unlock()
	_, ok := s.destroying[obj]
	return ok
}

func (s *Store) setDestroying(objs []fid.ObjID, on bool) {
	s.destroyMu.Lock()
	defer s.destroyMu.Unlock()
	for _, o := range objs {
		if on {
			s.destroying[o] = struct{}{}
		} else {
			delete(s.destroying, o)
		}
	}
}

// bucketDir and path name an object's data file.
func (s *Store) bucketDir(obj fid.ObjID) string {
	const hex = "0123456789abcdef"
	b := obj.Oid % 256
	return filepath.Join(s.objDir, strconv.FormatUint(obj.Seq, 16), string([]byte{hex[b>>4], hex[b&15]}))
}

func (s *Store) path(obj fid.ObjID) string {
	return filepath.Join(s.bucketDir(obj), strconv.FormatUint(obj.Oid, 16))
}

// getRecord returns obj's attribute record, ErrNoObject or ErrCorrupt.
func (s *Store) getRecord(obj fid.ObjID) (*nacrepb.ObjectAttr, error) {
	v, err := s.db.Get(objKey(obj))
	if errors.Is(err, kv.ErrNotFound) {
		return nil, ErrNoObject
	}
	if err != nil {
		return nil, err
	}
	return decodeRecord(obj, v)
}

func decodeRecord(obj fid.ObjID, v []byte) (*nacrepb.ObjectAttr, error) {
	rec := &nacrepb.ObjectAttr{}
	if err := proto.Unmarshal(v, rec); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	if rec.Seq != obj.Seq || rec.Oid != obj.Oid {
		return nil, fmt.Errorf("%w: the record under %s names object 0x%x:0x%x", ErrCorrupt, obj, rec.Seq, rec.Oid)
	}
	return rec, nil
}

func encodeRecord(rec *nacrepb.ObjectAttr) []byte {
	stored := &nacrepb.ObjectAttr{
		Seq: rec.Seq, Oid: rec.Oid, Parent: rec.Parent,
		StripeIndex: rec.StripeIndex, StripeSize: rec.StripeSize, StripeCount: rec.StripeCount,
		LayoutGen: rec.LayoutGen, Uid: rec.Uid, Gid: rec.Gid, Projid: rec.Projid,
		DataSynced: rec.DataSynced,
	}
	b, err := proto.Marshal(stored)
	if err != nil {
		// Marshalling a message of scalar fields cannot fail.
		panic(fmt.Sprintf("ost: marshal object record: %v", err))
	}
	return b
}

// putRecord writes a record without syncing; Sync makes it durable.
func (s *Store) putRecord(obj fid.ObjID, rec *nacrepb.ObjectAttr) error {
	if err := s.db.Set(objKey(obj), encodeRecord(rec), false); err != nil {
		return err
	}
	s.recDirty.Add(1)
	return nil
}

func hasPFID(rec *nacrepb.ObjectAttr) bool {
	return rec.Parent != nil && !fid.FromPB(rec.Parent).IsZero()
}

// applyMeta copies the groups of m into rec.
func applyMeta(rec *nacrepb.ObjectAttr, m *bulk.ObjMeta) {
	if m.Has(bulk.MetaPFID) {
		rec.Parent = m.Parent.PB()
		rec.StripeIndex, rec.StripeSize, rec.StripeCount = m.StripeIndex, m.StripeSize, m.StripeCount
		rec.LayoutGen = m.LayoutGen
	}
	if m.Has(bulk.MetaOwner) {
		rec.Uid, rec.Gid = m.UID, m.GID
	}
	if m.Has(bulk.MetaProjID) {
		rec.Projid = m.ProjID
	}
}

// syncRecords makes every record write so far durable, unless a WAL sync
// since the last write already did.
func (s *Store) syncRecords() error {
	d := s.recDirty.Load()
	if s.recSynced.Load() >= d {
		return nil
	}
	if err := s.db.SyncWAL(); err != nil {
		return err
	}
	for {
		cur := s.recSynced.Load()
		if cur >= d || s.recSynced.CompareAndSwap(cur, d) {
			return nil
		}
	}
}

// markDirDirty notes that dir gained a file that is not yet durable.
func (s *Store) markDirDirty(dir string) {
	s.dirMu.Lock()
	s.dirtyDirs[dir] = struct{}{}
	s.dirMu.Unlock()
}

// syncBucket fsyncs obj's bucket directory if it gained a file since its
// last fsync, so that a synced object's file survives a crash.
func (s *Store) syncBucket(obj fid.ObjID) error {
	dir := s.bucketDir(obj)
	s.dirMu.Lock()
	_, dirty := s.dirtyDirs[dir]
	delete(s.dirtyDirs, dir)
	s.dirMu.Unlock()
	if !dirty {
		return nil
	}
	if err := syncDir(dir); err != nil {
		s.markDirDirty(dir)
		return err
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// mkdirSynced creates dir (and its parent bucket levels) if needed,
// fsyncing each parent that gained an entry.
func mkdirSynced(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if err := mkdirSynced(parent); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	}
	return syncDir(parent)
}

// control runs f on f's descriptor, retrying EINTR.
func control(f *os.File, op string, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = fn(int(fd))
			if ferr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if ferr != nil {
		return &fs.PathError{Op: op, Path: f.Name(), Err: ferr}
	}
	return nil
}

// Statfs reports the space of the file system under the target and the
// objects: inodes_total is the file system's inode count, inodes_free what
// is left of it after our objects (or the file system's free inodes, if
// fewer).
func (s *Store) Statfs() (*nacrepb.Statfs, error) {
	if err := s.enter(); err != nil {
		return nil, fmt.Errorf("statfs %s: %w", s.label, err)
	}
	defer s.leave()
	var st unix.Statfs_t
	if err := unix.Statfs(s.objDir, &st); err != nil {
		return nil, fmt.Errorf("statfs %s: %s: %w", s.label, s.objDir, err)
	}
	bs := uint64(st.Bsize)
	// Available is what clients can still write: the store's reserve
	// (package space) is not theirs, as ext4's root-reserved blocks are
	// not an ordinary user's, so df shows 100 % when writes are refused.
	total, avail := st.Blocks*bs, st.Bavail*bs
	avail -= min(avail, reserve.Bytes(total, s.memtable))
	// Inodes of an OST are its objects (as `lfs df -i` shows them): used
	// is the object count, free what the local file system could still
	// hold, since every written object becomes one local file. A file
	// system without an inode limit (btrfs; tmpfs with nr_inodes=0)
	// reports none at all: so does the OST (total 0), rather than look
	// out of inodes.
	// The inodes the store keeps for itself (package space) are not
	// free for objects.
	inodesTotal := s.Objects() + st.Ffree
	inodesFree := st.Ffree - min(st.Ffree, reserve.Inodes)
	if st.Files == 0 {
		inodesTotal, inodesFree = 0, 0
	}
	return &nacrepb.Statfs{
		BytesTotal:  total,
		BytesFree:   st.Bfree * bs,
		BytesAvail:  avail,
		InodesTotal: inodesTotal,
		InodesFree:  inodesFree,
	}, nil
}
