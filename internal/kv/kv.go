// Package kv is the narrow seam between Nacre's targets and their embedded
// key-value store (pebble). Targets see ordered keys, point reads, bounded
// iterators, atomic batches with optional sync, snapshots and checkpoints;
// nothing else of pebble leaks out, so the store can be swapped, crashed or
// made to fail under tests.
//
// OpenMem gives the in-memory twin (pebble over its memory file system);
// Options.FS lets tests inject pebble's crashable or error-injecting file
// systems.
package kv

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrNotFound is returned by Get when the key is absent.
var ErrNotFound = errors.New("kv: key not found")

// ErrNoStore is returned by Open with MustExist when dir holds no store.
var ErrNoStore = errors.New("no store there")

// ErrDamaged is returned by Open when the store's files are damaged (a
// write-ahead log or table that fails its checksums): the store cannot be
// opened as it is, and the caller says what its target can do about it.
var ErrDamaged = errors.New("its files are damaged")

// Reader is what read paths need; DB, Batch and Snapshot implement it.
type Reader interface {
	// Get returns a copy of the value, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// NewIter iterates keys in [lower, upper); nil bounds are open.
	NewIter(lower, upper []byte) (*Iter, error)
}

// Options configure Open.
type Options struct {
	// FS is the file system under the store; nil means the real disk.
	FS vfs.FS
	// CacheSize is the block cache size in bytes (0: 64 MiB).
	CacheSize int64
	// ReadOnly opens the store without writing to it.
	ReadOnly bool
	// MemTableSize is the size of one memtable (0: DefaultMemTableSize).
	MemTableSize uint64
	// MustExist refuses to create a new store (ErrNoStore): a target
	// that has run before must find its data, not start empty.
	MustExist bool
}

// DB is an open store.
type DB struct {
	p     *pebble.DB
	cache *pebble.Cache
	dir   string
	fs    vfs.FS
	// memtable is the memtable size it was opened with.
	memtable uint64
}

// quietLogger drops pebble's informational lines; errors still reach us
// as returned errors.
type quietLogger struct{ dir string }

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}

// Fatalf is pebble finding the store unusable where no error can be
// returned (a write-ahead log or manifest it cannot write: a full or
// failing device): the process stops with one line naming the store, not
// a panic whose goroutine dump hides the cause (nacre up shows a log's
// last lines).
func (l quietLogger) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "nacre: store %s cannot be used: %s; the process stops. "+
		"If its device is full or failing, fix that and start the target again; "+
		"if the store's files were damaged, %s\n", l.dir, fmt.Sprintf(strings.ReplaceAll(format, "%+v", "%v"), args...), damagedFix)
	os.Exit(1)
}

// damagedFix is what to do about a store whose files are damaged.
const damagedFix = "replace the replica (nacre replica replace) of a replicated MGS or MDT, " +
	"or restore the directory from a backup (nacre mdt restore for an MDT); nacre lfsck reports what an OST lost"

// corruption reports a damaged file of the store found by a read, once
// per file; the read itself fails with the error (pebble's default for
// this event stopped the process, also from a checker's read, which must
// never take its server down).
func corruption(dir string) func(pebble.DataCorruptionInfo) {
	var seen sync.Map
	return func(info pebble.DataCorruptionInfo) {
		if _, dup := seen.LoadOrStore(info.Path, true); dup {
			return
		}
		fmt.Fprintf(os.Stderr, "nacre: store %s: the file %s is damaged (%v); reads of it fail. %s\n",
			dir, info.Path, info.Details, strings.ToUpper(damagedFix[:1])+damagedFix[1:])
	}
}

// DefaultMemTableSize is the memtable size of a store whose options name
// none.
const DefaultMemTableSize = 32 << 20

// MemTable is the memtable size these options give a store.
func (o Options) MemTable() uint64 {
	if o.MemTableSize == 0 {
		return DefaultMemTableSize
	}
	return o.MemTableSize
}

// mkdirPrivate makes a missing store directory, and its missing parents,
// readable by their owner only (0700; pebble makes them 0755): a store's
// data is its owner's alone (docs/architecture.md, "Who may do what").
// As pebble does for the directories it makes, it syncs each parent that
// gained an entry, so that the store's directory survives a crash.
func mkdirPrivate(fs vfs.FS, dir string) error {
	if _, err := fs.Stat(dir); err == nil || !errors.Is(err, os.ErrNotExist) {
		return nil // there, or pebble says what is wrong
	}
	var parents []string
	for p := fs.PathDir(dir); ; p = fs.PathDir(p) {
		parents = append(parents, p)
		if fs.PathDir(p) == p {
			break
		}
		if _, err := fs.Stat(p); err == nil {
			break
		}
	}
	if err := fs.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, p := range parents {
		d, err := fs.OpenDir(p)
		if err != nil {
			return err
		}
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("sync directory %s: %w", p, err)
		}
	}
	return nil
}

// Open opens (creating if needed) the store in dir.
func Open(dir string, o Options) (*DB, error) {
	size := o.CacheSize
	if size == 0 {
		size = 64 << 20
	}
	cache := pebble.NewCache(size)
	memtable := o.MemTable()
	opts := &pebble.Options{
		FS:                    o.FS,
		Cache:                 cache,
		ReadOnly:              o.ReadOnly,
		Logger:                quietLogger{dir: dir},
		EventListener:         &pebble.EventListener{DataCorruption: corruption(dir)},
		FormatMajorVersion:    pebble.FormatNewest,
		MemTableSize:          memtable,
		ErrorIfNotExists:      o.MustExist,
		L0CompactionThreshold: 4,
		// Keep the WAL files for reuse so that a sync is an fdatasync of a
		// preallocated file, not a size change.
		WALBytesPerSync: 0,
	}
	// Bloom filters: most point reads of a metadata store are misses
	// (reply cache, a name being created); without filters each miss
	// visits every level.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	if !o.ReadOnly && !o.MustExist {
		fs := o.FS
		if fs == nil {
			fs = vfs.Default
		}
		if err := mkdirPrivate(fs, dir); err != nil {
			cache.Unref()
			return nil, fmt.Errorf("open store %s: %w", dir, err)
		}
	}
	p, err := pebble.Open(dir, opts)
	if err != nil {
		cache.Unref()
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			return nil, fmt.Errorf("open store %s: %w", dir, ErrNoStore)
		}
		if damaged(err) {
			return nil, fmt.Errorf("open store %s: %w (%w)", dir, ErrDamaged, err)
		}
		return nil, fmt.Errorf("open store %s: %w", dir, err)
	}
	fs := o.FS
	if fs == nil {
		fs = vfs.Default
	}
	return &DB{p: p, cache: cache, dir: dir, fs: fs, memtable: memtable}, nil
}

// damaged says whether err, from pebble.Open, is a damaged file: a
// checksum that fails, or a write-ahead log whose records fail before
// valid ones (pebble reports those with its record errors, which are not
// corruption errors).
func damaged(err error) bool {
	return pebble.IsCorruptionError(err) || errors.Is(err, record.ErrInvalidChunk) ||
		errors.Is(err, record.ErrZeroedChunk) || errors.Is(err, record.ErrUnexpectedEOF)
}

// OpenMem opens an empty in-memory store.
func OpenMem() (*DB, error) { return Open("", Options{FS: vfs.NewMem()}) }

// MemTableSize is the size of the store's memtables.
func (d *DB) MemTableSize() uint64 { return d.memtable }

// Dir is the directory the store lives in.
func (d *DB) Dir() string { return d.dir }

// FS is the file system the store lives on (what Options.FS gave, or the
// real disk), for files kept next to it (the Raft log).
func (d *DB) FS() vfs.FS { return d.fs }

// Close closes the store.
func (d *DB) Close() error {
	err := d.p.Close()
	d.cache.Unref()
	return err
}

// Get implements Reader.
func (d *DB) Get(key []byte) ([]byte, error) { return get(d.p.Get(key)) }

// NewIter implements Reader.
func (d *DB) NewIter(lower, upper []byte) (*Iter, error) {
	it, err := d.p.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	return &Iter{it: it}, nil
}

// Set writes one key, synced to stable storage if sync.
func (d *DB) Set(key, value []byte, sync bool) error {
	return d.p.Set(key, value, writeOpts(sync))
}

// Delete removes one key.
func (d *DB) Delete(key []byte, sync bool) error {
	return d.p.Delete(key, writeOpts(sync))
}

// NewBatch returns a batch whose reads see its own writes.
func (d *DB) NewBatch() *Batch { return &Batch{b: d.p.NewIndexedBatch(), indexed: true} }

// NewWriteBatch returns a write-only batch (cheaper: no index).
func (d *DB) NewWriteBatch() *Batch { return &Batch{b: d.p.NewBatch()} }

// NewSnapshot returns a consistent read view; Close it when done.
func (d *DB) NewSnapshot() *Snapshot { return &Snapshot{s: d.p.NewSnapshot()} }

// Checkpoint writes a consistent copy of the store into dest (which must
// not exist), hard-linking files where it can.
func (d *DB) Checkpoint(dest string) error {
	if err := d.p.Checkpoint(dest, pebble.WithFlushedWAL()); err != nil {
		return fmt.Errorf("checkpoint %s to %s: %w", d.dir, dest, err)
	}
	return nil
}

// Flush writes the memtable to disk.
func (d *DB) Flush() error { return d.p.Flush() }

// SyncWAL makes every earlier write durable.
func (d *DB) SyncWAL() error { return d.p.LogData(nil, pebble.Sync) }

// DiskUsage is the store's size on disk in bytes.
func (d *DB) DiskUsage() uint64 { return d.p.Metrics().DiskSpaceUsage() }

// Metrics exposes pebble's metrics for the observability layer.
func (d *DB) Metrics() *pebble.Metrics { return d.p.Metrics() }

func writeOpts(sync bool) *pebble.WriteOptions {
	if sync {
		return pebble.Sync
	}
	return pebble.NoSync
}

func get(v []byte, c io.Closer, err error) ([]byte, error) {
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	out := append([]byte(nil), v...)
	c.Close()
	return out, nil
}

// Batch is an atomic group of writes.
type Batch struct {
	b       *pebble.Batch
	indexed bool
}

// Get implements Reader; it needs a batch from NewBatch.
func (b *Batch) Get(key []byte) ([]byte, error) {
	if !b.indexed {
		return nil, errors.New("kv: Get on a write-only batch")
	}
	return get(b.b.Get(key))
}

// NewIter implements Reader; it needs a batch from NewBatch.
func (b *Batch) NewIter(lower, upper []byte) (*Iter, error) {
	if !b.indexed {
		return nil, errors.New("kv: NewIter on a write-only batch")
	}
	it, err := b.b.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	return &Iter{it: it}, nil
}

// Set adds a write of key.
func (b *Batch) Set(key, value []byte) error { return b.b.Set(key, value, nil) }

// Delete adds a deletion of key.
func (b *Batch) Delete(key []byte) error { return b.b.Delete(key, nil) }

// DeleteRange adds a deletion of every key in [start, end).
func (b *Batch) DeleteRange(start, end []byte) error { return b.b.DeleteRange(start, end, nil) }

// Empty reports whether the batch holds no writes.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Len is the batch's encoded size in bytes.
func (b *Batch) Len() int { return b.b.Len() }

// Commit applies the batch atomically, synced to stable storage if sync.
// Concurrent synced commits share one fsync (pebble's group commit).
func (b *Batch) Commit(sync bool) error { return b.b.Commit(writeOpts(sync)) }

// Close releases the batch; uncommitted writes are dropped.
func (b *Batch) Close() error { return b.b.Close() }

// Snapshot is a consistent read view.
type Snapshot struct{ s *pebble.Snapshot }

// Get implements Reader.
func (s *Snapshot) Get(key []byte) ([]byte, error) { return get(s.s.Get(key)) }

// NewIter implements Reader.
func (s *Snapshot) NewIter(lower, upper []byte) (*Iter, error) {
	it, err := s.s.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return nil, err
	}
	return &Iter{it: it}, nil
}

// Close releases the snapshot.
func (s *Snapshot) Close() error { return s.s.Close() }

// Iter walks keys in order. Key and Value are valid until the next move.
type Iter struct{ it *pebble.Iterator }

func (i *Iter) First() bool            { return i.it.First() }
func (i *Iter) Last() bool             { return i.it.Last() }
func (i *Iter) Next() bool             { return i.it.Next() }
func (i *Iter) Prev() bool             { return i.it.Prev() }
func (i *Iter) SeekGE(key []byte) bool { return i.it.SeekGE(key) }
func (i *Iter) SeekLT(key []byte) bool { return i.it.SeekLT(key) }
func (i *Iter) Valid() bool            { return i.it.Valid() }
func (i *Iter) Key() []byte            { return i.it.Key() }
func (i *Iter) Value() []byte          { return i.it.Value() }
func (i *Iter) Error() error           { return i.it.Error() }
func (i *Iter) Close() error           { return i.it.Close() }

// PrefixEnd returns the smallest key greater than every key with prefix p,
// or nil if there is none (all 0xff).
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// Digest is a CRC-64 over every key and value of r, in order (each
// preceded by its length), and the number of keys: two stores with the
// same digest hold the same data. The checker's tests and `nacre lfsck
// digest` compare stores with it (a dry run must change nothing).
func Digest(r Reader) (crc, keys uint64, err error) {
	it, err := r.NewIter(nil, nil)
	if err != nil {
		return 0, 0, err
	}
	defer it.Close()
	var lb [8]byte
	for it.First(); it.Valid(); it.Next() {
		binary.BigEndian.PutUint64(lb[:], uint64(len(it.Key())))
		crc = crc64.Update(crc, crcTable, lb[:])
		crc = crc64.Update(crc, crcTable, it.Key())
		binary.BigEndian.PutUint64(lb[:], uint64(len(it.Value())))
		crc = crc64.Update(crc, crcTable, lb[:])
		crc = crc64.Update(crc, crcTable, it.Value())
		keys++
	}
	return crc, keys, it.Error()
}
