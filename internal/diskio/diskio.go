// Package diskio counts what a server writes to its storage device, as the
// device writes it: whole pages, each once per sync.
//
// The kernel's own figure for a process (/proc/PID/io write_bytes) counts
// a page each time it turns dirty, at the size of its folio: since ext4
// caches files in large folios (Linux 6.16), a 100-byte append to a log
// that was read in 2 MiB folios counts 2 MiB, and an MDT that wrote 9 MiB
// to its disk reported 2 GiB. Counting here, where the server writes,
// gives what the device receives: a synced 100-byte append writes one
// 4 KiB page; rewriting a page before its sync writes it once.
package diskio

import (
	"sort"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// PageSize is the unit the device writes a file's data in.
const PageSize = 4096

// maxSpans bounds the dirty ranges a file remembers between syncs; a file
// written at more scattered places than that forgets them, and may count
// a page rewritten before its sync twice.
const maxSpans = 1024

// Counter sums the bytes a process's files send to the device.
type Counter struct {
	written atomic.Uint64
}

// Written is the bytes counted so far.
func (c *Counter) Written() uint64 {
	if c == nil {
		return 0
	}
	return c.written.Load()
}

// File tracks the pages of one file that are dirty (written since its last
// sync). Its methods are safe for concurrent use; a nil File counts
// nothing.
type File struct {
	c     *Counter
	mu    sync.Mutex
	spans []span // sorted, disjoint, not adjacent
}

// span is the pages [lo, hi).
type span struct{ lo, hi int64 }

// NewFile tracks one file for c (nil c: a File that counts nothing).
func (c *Counter) NewFile() *File {
	if c == nil {
		return nil
	}
	return &File{c: c}
}

// Wrote notes n bytes written at off: the pages they touch that were not
// dirty yet are counted.
func (f *File) Wrote(off int64, n int) {
	if f == nil || n <= 0 || off < 0 {
		return
	}
	lo, hi := off/PageSize, (off+int64(n)+PageSize-1)/PageSize
	f.mu.Lock()
	fresh := f.add(lo, hi)
	f.mu.Unlock()
	f.c.written.Add(uint64(fresh) * PageSize)
}

// add marks pages [lo, hi) dirty and returns how many were not.
func (f *File) add(lo, hi int64) int64 {
	// The common case: appending at (or past) the last dirty page.
	if k := len(f.spans); k == 0 || lo > f.spans[k-1].hi {
		f.push(span{lo, hi})
		return hi - lo
	} else if last := &f.spans[k-1]; lo >= last.lo {
		if hi <= last.hi {
			return 0
		}
		fresh := hi - last.hi
		last.hi = hi
		return fresh
	}
	// Elsewhere: merge every span that touches [lo, hi).
	i := sort.Search(len(f.spans), func(i int) bool { return f.spans[i].hi >= lo })
	j := i
	covered := int64(0)
	nlo, nhi := lo, hi
	for ; j < len(f.spans) && f.spans[j].lo <= hi; j++ {
		s := f.spans[j]
		covered += min(s.hi, hi) - max(s.lo, lo)
		nlo, nhi = min(nlo, s.lo), max(nhi, s.hi)
	}
	f.spans = append(f.spans[:i], append([]span{{nlo, nhi}}, f.spans[j:]...)...)
	if len(f.spans) > maxSpans {
		f.spans = f.spans[:0]
	}
	return hi - lo - max(covered, 0)
}

func (f *File) push(s span) {
	if len(f.spans) >= maxSpans {
		f.spans = f.spans[:0]
	}
	f.spans = append(f.spans, s)
}

// Synced notes that the file's data reached the device: its pages are
// clean again.
func (f *File) Synced() {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.spans = f.spans[:0]
	f.mu.Unlock()
}

// syncedTo notes that the file's first length bytes reached the device.
func (f *File) syncedTo(length int64) {
	if f == nil {
		return
	}
	end := length / PageSize // pages below end are whole and clean
	f.mu.Lock()
	defer f.mu.Unlock()
	keep := f.spans[:0]
	for _, s := range f.spans {
		if s.hi <= end {
			continue
		}
		s.lo = max(s.lo, end)
		keep = append(keep, s)
	}
	f.spans = keep
}

// FS wraps fs so that the files it writes count on c.
func (c *Counter) FS(fs vfs.FS) vfs.FS {
	if c == nil {
		return fs
	}
	return &countingFS{FS: fs, c: c}
}

type countingFS struct {
	vfs.FS
	c *Counter
}

func (fs *countingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return f, err
	}
	return &countingFile{File: f, t: fs.c.NewFile()}, nil
}

func (fs *countingFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.Create(name, category))
}

func (fs *countingFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return fs.wrap(fs.FS.OpenReadWrite(name, category, opts...))
}

func (fs *countingFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, category))
}

// countingFile follows the file offset of Read and Write (vfs.File has no
// Seek), and counts what Write and WriteAt dirty.
type countingFile struct {
	vfs.File
	t   *File
	pos atomic.Int64
}

func (f *countingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.pos.Add(int64(n))
	return n, err
}

func (f *countingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.t.Wrote(f.pos.Add(int64(n))-int64(n), n)
	return n, err
}

func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.t.Wrote(off, n)
	return n, err
}

func (f *countingFile) Sync() error {
	err := f.File.Sync()
	if err == nil {
		f.t.Synced()
	}
	return err
}

func (f *countingFile) SyncData() error {
	err := f.File.SyncData()
	if err == nil {
		f.t.Synced()
	}
	return err
}

func (f *countingFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	if err == nil {
		if full {
			f.t.Synced()
		} else {
			// Queued, not done: the pages are being written now, and a
			// write to them after this dirties them again.
			f.t.syncedTo(length)
		}
	}
	return full, err
}
