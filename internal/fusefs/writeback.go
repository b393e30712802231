package fusefs

import (
	"sync"

	"nacre/internal/fid"
)

// Write-behind.
//
// The kernel sends the writes of one file one at a time, each waiting for
// the previous reply, so a write that went to the OSTs before replying
// would make every write pay a network round trip. Instead a buffered
// write is copied, acknowledged, and sent to the OSTs in the background,
// with up to writeWindow bytes per file and writeBudget bytes per mount
// in flight. What this keeps POSIX-correct:
//
//   - a write that overlaps one still in flight waits for it, so the OSTs
//     apply overlapping writes in order;
//   - reads, getattr, truncate, fallocate, fsync, flush (close) and
//     release first wait for the file's writes in flight (fence);
//   - an error of a background write is returned by the file's next
//     write, fsync or close (as with NFS or Lustre's client cache);
//   - O_SYNC, O_DSYNC and O_DIRECT writes are written through, and O_SYNC
//     and O_DSYNC ones made durable, before they are acknowledged.
const (
	writeWindow = 16 << 20
	writeBudget = 256 << 20
)

// budget bounds the bytes in flight of a whole mount.
type budget struct {
	mu   sync.Mutex
	cond *sync.Cond
	used int
	max  int
}

func newBudget(max int) *budget {
	b := &budget{max: max}
	b.cond = sync.NewCond(&b.mu)
	return b
}

func (b *budget) take(n int) {
	b.mu.Lock()
	for b.used > 0 && b.used+n > b.max {
		b.cond.Wait()
	}
	b.used += n
	b.mu.Unlock()
}

func (b *budget) give(n int) {
	b.mu.Lock()
	b.used -= n
	b.cond.Broadcast()
	b.mu.Unlock()
}

type flight struct {
	off, end uint64
}

// writeBehind is one open file's writes in flight.
type writeBehind struct {
	mu      sync.Mutex
	cond    *sync.Cond
	flights map[*flight]struct{}
	bytes   int
	// err is the first failure of a background write (or of a close's
	// flush). Writes and closes report it and keep it; fsync reports it
	// and clears it (takeErr). As NFS does, every file description open
	// then hears of it at close and at fsync: a child's close (a fork's
	// copy of the descriptor) must not hide it from the parent's fsync.
	err error
}

func newWriteBehind() *writeBehind {
	w := &writeBehind{flights: map[*flight]struct{}{}}
	w.cond = sync.NewCond(&w.mu)
	return w
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1<<20); return &b }}

func (w *writeBehind) overlaps(off, end uint64) bool {
	for f := range w.flights {
		if f.off < end && off < f.end {
			return true
		}
	}
	return false
}

// keepErr records err for the next fsync, unless one is there already.
func (w *writeBehind) keepErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// takeErr returns and clears a background write's error.
func (w *writeBehind) takeErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	w.err = nil
	return err
}

// fence waits until none of the file's writes is in flight. With report
// it returns the error of a failed one (kept for fsync, see err), for
// writes, fsync and close to return; other callers leave it for them.
func (w *writeBehind) fence(report bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.flights) > 0 {
		w.cond.Wait()
	}
	if !report {
		return nil
	}
	return w.err
}

// maxEnd is the end of the furthest write in flight (0 if none).
func (w *writeBehind) maxEnd() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var end uint64
	for f := range w.flights {
		end = max(end, f.end)
	}
	return end
}

// busy reports whether writes are in flight.
func (w *writeBehind) busy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.flights) > 0
}

// writeAsync queues a copy of data at off; write does the I/O.
func (fs *FS) writeAsync(of *openFile, data []byte, off uint64, write func(p []byte) error) error {
	w := of.wb
	n := len(data)
	end := off + uint64(n)
	fs.budget.take(n)
	w.mu.Lock()
	if err := w.err; err != nil {
		w.mu.Unlock()
		fs.budget.give(n)
		return err
	}
	for (w.bytes > 0 && w.bytes+n > writeWindow) || w.overlaps(off, end) {
		w.cond.Wait()
	}
	fl := &flight{off: off, end: end}
	w.flights[fl] = struct{}{}
	w.bytes += n
	w.mu.Unlock()
	bp := bufPool.Get().(*[]byte)
	buf := append((*bp)[:0], data...)
	go func() {
		err := write(buf)
		*bp = buf[:0]
		if cap(buf) <= 1<<20 {
			bufPool.Put(bp)
		}
		w.mu.Lock()
		delete(w.flights, fl)
		w.bytes -= n
		if err != nil && w.err == nil {
			w.err = err
		}
		w.cond.Broadcast()
		w.mu.Unlock()
		fs.budget.give(n)
	}()
	return nil
}

// fenceFID waits for the writes in flight of f, if it is open here, so
// that what follows sees them.
func (fs *FS) fenceFID(f fid.FID) {
	fs.mu.Lock()
	of := fs.files[f]
	fs.mu.Unlock()
	if of != nil && of.wb.busy() {
		of.wb.fence(false)
	}
}
