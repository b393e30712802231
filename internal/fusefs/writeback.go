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
//   - an error of a background write is returned to the handles open then
//     by their next write or fsync, and by their closes if writable;
//   - O_SYNC, O_DSYNC and O_DIRECT writes are written through, and O_SYNC
//     and O_DSYNC ones made durable, before they are acknowledged.
//
// Small writes are merged: the kernel passes an application's 4 KiB
// writes on one by one, and a call to the OSTs for each costs the mount
// a socket write and the wake-ups around it, several times the CPU of the
// copy. A write that continues the file's
// latest write not yet sent joins it, up to mergeMax; a write is held
// back, open for others to join, only while another of the file's writes
// is under way, and the open one is sent as soon as any of them ends
// (or it is full, or a fence needs it). So a lone write leaves at once,
// nothing waits on a timer, and the batch grows to what arrives during
// one call to the OSTs, as Nagle's algorithm does for TCP.
const (
	writeWindow = 16 << 20
	writeBudget = 256 << 20
	// writeFlights bounds a file's writes in flight by number too: 4 KiB
	// writes (the kernel's, for an application's small ones) would take
	// 4,096 goroutines and calls at once to fill writeWindow.
	writeFlights = 256
	// mergeMax is the largest merged write; writes of half of it or more
	// are sent as they come.
	mergeMax = 1 << 20
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

// flight is one call to the OSTs: a write, or contiguous writes merged.
type flight struct {
	off, end uint64
	bp       *[]byte // the data, a buffer of class
	class    int
	write    func(p []byte) error // of the first write; it writes at off
	// appends: an O_APPEND write the daemon placed is in it; if it
	// fails, of's next append asks where the file ends (no hole).
	appends bool
	of      *openFile
}

// writeBehind is one open file's writes in flight.
type writeBehind struct {
	mu      sync.Mutex
	cond    *sync.Cond
	flights map[*flight]struct{} // sent and open ones
	sent    int                  // flights under way
	open    *flight              // not sent yet: contiguous writes join it
	bytes   int
	budget  *budget // the mount's
	// errSeq counts the failures of background writes (and of closes'
	// flushes), err is the latest. They are never cleared: each handle
	// reports those that came after it was opened (handle.errSeen), as
	// Linux's errseq does for a file description: a writable handle's
	// close reports it without consuming it, its fsync or next write
	// consumes it. So a forked child's close (the parent's description)
	// reports it, and so does the parent's fsync after it; a handle
	// opened later, or one only reading, is not told of it.
	errSeq uint64
	err    error
}

func newWriteBehind(b *budget) *writeBehind {
	w := &writeBehind{flights: map[*flight]struct{}{}, budget: b}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// bufPools hold the copies of written data in flight, by size class: powers
// of two from 4 KiB to 1 MiB, so that a write holds a buffer of at most
// twice its size. One pool of 1 MiB buffers made each 4 KiB write pin 1 MiB,
// 256 times the bytes writeWindow and writeBudget count: a mount's heap
// reached 3.7 GB under 4 KiB writes from a few processes.
const (
	minBufShift = 12
	maxBufShift = 20
)

var bufPools [maxBufShift - minBufShift + 1]sync.Pool

// getBuf returns an empty buffer of at least n bytes' capacity and its
// class (-1: larger than the classes, not pooled).
func getBuf(n int) (*[]byte, int) {
	c := 0
	for n > 1<<(minBufShift+c) {
		c++
	}
	if c >= len(bufPools) {
		b := make([]byte, 0, n)
		return &b, -1
	}
	if bp, ok := bufPools[c].Get().(*[]byte); ok {
		return bp, c
	}
	b := make([]byte, 0, 1<<(minBufShift+c))
	return &b, c
}

// putBuf gives back a buffer of getBuf.
func putBuf(bp *[]byte, class int) {
	if class >= 0 {
		*bp = (*bp)[:0]
		bufPools[class].Put(bp)
	}
}

func (w *writeBehind) overlaps(off, end uint64) bool {
	for f := range w.flights {
		if f.off < end && off < f.end {
			return true
		}
	}
	return false
}

// fail records a failure of a write behind or of a close's flush.
func (w *writeBehind) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failLocked(err)
}

func (w *writeBehind) failLocked(err error) {
	w.errSeq++
	w.err = err
}

// errFor returns the latest failure h has not been told of (see err), and
// with consume marks it told.
func (w *writeBehind) errFor(h *handle, consume bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.errSeq <= h.errSeen {
		return nil
	}
	if consume {
		h.errSeen = w.errSeq
	}
	return w.err
}

// fence waits until none of the file's writes is in flight.
func (w *writeBehind) fence() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open != nil {
		w.sendLocked(w.open)
	}
	for len(w.flights) > 0 {
		w.cond.Wait()
	}
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
func (fs *FS) writeAsync(of *openFile, data []byte, off uint64, appended bool, write func(p []byte) error) error {
	w := of.wb
	n := len(data)
	end := off + uint64(n)
	fs.budget.take(n)
	w.mu.Lock()
	defer w.mu.Unlock()
	if o := w.open; o != nil {
		if o.end == off && int(end-o.off) <= mergeMax && !w.overlapsSent(off, end) {
			o.add(data)
			o.end = end
			o.appends = o.appends || appended
			w.bytes += n
			if end-o.off >= mergeMax/2 {
				w.sendLocked(o)
			}
			return nil
		}
		w.sendLocked(o)
	}
	for (w.bytes > 0 && w.bytes+n > writeWindow) || len(w.flights) >= writeFlights || w.overlaps(off, end) {
		w.cond.Wait()
	}
	if w.open != nil { // another write's, made while this one waited
		w.sendLocked(w.open)
	}
	bp, class := getBuf(n)
	*bp = append((*bp)[:0], data...)
	fl := &flight{off: off, end: end, bp: bp, class: class, write: write, appends: appended, of: of}
	w.flights[fl] = struct{}{}
	w.bytes += n
	if n < mergeMax/2 && w.sent > 0 {
		// Sent when one under way ends: an end is sure to come.
		w.open = fl
		return nil
	}
	w.sendLocked(fl)
	return nil
}

// add appends data to an open flight's buffer, moving to a larger class
// when it is full.
func (fl *flight) add(data []byte) {
	b := *fl.bp
	if len(b)+len(data) > cap(b) {
		bp, class := getBuf(len(b) + len(data))
		*bp = append((*bp)[:0], b...)
		putBuf(fl.bp, fl.class)
		fl.bp, fl.class = bp, class
	}
	*fl.bp = append(*fl.bp, data...)
}

// sendLocked starts a flight's call to the OSTs; when it ends, the file's
// open flight, if any, is sent.
func (w *writeBehind) sendLocked(fl *flight) {
	if w.open == fl {
		w.open = nil
	}
	w.sent++
	go func() {
		n := len(*fl.bp)
		err := fl.write(*fl.bp)
		putBuf(fl.bp, fl.class)
		w.mu.Lock()
		delete(w.flights, fl)
		w.sent--
		w.bytes -= n
		if err != nil {
			if fl.appends {
				// Before the failure is reported, so that the append
				// after it asks where the file ends.
				fl.of.endStale()
			}
			w.failLocked(err)
		}
		if w.open != nil {
			w.sendLocked(w.open)
		}
		w.cond.Broadcast()
		w.mu.Unlock()
		w.budget.give(n)
	}()
}

// overlapsSent reports whether [off, end) overlaps a flight under way.
func (w *writeBehind) overlapsSent(off, end uint64) bool {
	for f := range w.flights {
		if f != w.open && f.off < end && off < f.end {
			return true
		}
	}
	return false
}

// fenceFID waits for the writes in flight of f, if it is open here, so
// that what follows sees them.
func (fs *FS) fenceFID(f fid.FID) {
	fs.mu.Lock()
	of := fs.files[f]
	fs.mu.Unlock()
	if of != nil && of.wb.busy() {
		of.wb.fence()
	}
}
