package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/bulk"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/layout"
)

// maxFrame is the largest piece of data sent in one frame.
const maxFrame = 1 << 20

// ioParallel bounds the chunk requests of one call in flight at once.
const ioParallel = 16

// File is an open regular file. Reads and writes go to the OSTs in
// parallel; the MDT learns the size lazily: the first write marks the size
// dirty on the MDT (so others glimpse the OSTs), and Close makes the data
// durable and records the exact size again (close-to-open consistency).
type File struct {
	c   *Client
	fid fid.FID

	mu        sync.Mutex
	dirtyMu   sync.Mutex // one setDirty call at a time
	ino       *pb.Inode
	size      uint64 // known size (own writes included)
	dirtySet  bool
	wrote     bool
	touched   map[int]uint64 // stripes changed since their last sync -> epoch (note)
	lastWrite int64
	// changed: another client changed the file (Changed) since the size
	// was last fetched: the next fetched size is the truth, not raised
	// to this File's own writes.
	changed bool
	// sizedAt: when size was last the file's whole size, asked of the
	// MDT and, where it does not know it, the OSTs (Size, Sized).
	sizedAt time.Time
}

// sizeFresh is how long a size just asked for answers a read that reaches
// past it: the open of a file (close-to-open) asks for its size, and its
// first read, moments later, reaches past the end of any file shorter
// than a page.
const sizeFresh = 20 * time.Millisecond

// Sized tells f that its size, as given to OpenInode or Refresh, was just
// asked for, the OSTs' glimpse included.
func (f *File) Sized() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sizedAt = time.Now()
}

// Open opens a regular file by FID; O_TRUNC empties it (if O_WRONLY/O_RDWR).
func (c *Client) Open(ctx context.Context, f fid.FID, flags int) (*File, error) {
	ino, err := c.Stat(ctx, f)
	if err != nil {
		return nil, err
	}
	if ino.Mode&syscall.S_IFMT == syscall.S_IFDIR {
		return nil, &errno.Errno{Op: "open " + f.String(), Errno: syscall.EISDIR}
	}
	if ino.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, &errno.Errno{Op: "open " + f.String(), Errno: syscall.EINVAL, Msg: "not a regular file"}
	}
	mask := uint32(4)
	switch flags & syscall.O_ACCMODE {
	case syscall.O_WRONLY:
		mask = 2
	case syscall.O_RDWR:
		mask = 6
	}
	if err := c.checkAccess(ctx, "open", ino, mask); err != nil {
		return nil, err
	}
	fl := c.OpenInode(ino)
	if flags&syscall.O_TRUNC != 0 && flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 && ino.Size > 0 {
		if err := fl.Truncate(ctx, 0); err != nil {
			return nil, err
		}
	}
	return fl, nil
}

// OpenInode wraps attributes already at hand (e.g. from Create).
func (c *Client) OpenInode(ino *pb.Inode) *File {
	return &File{c: c, fid: fid.FromPB(ino.Fid), ino: ino, size: ino.Size, touched: map[int]uint64{},
		dirtySet: ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0}
}

// FID is the file's identifier.
func (f *File) FID() fid.FID { return f.fid }

// Inode is the file's attributes as last known.
func (f *File) Inode() *pb.Inode {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ino
}

func objMeta(ino *pb.Inode, stripe int) *bulk.ObjMeta {
	l := ino.Layout
	return &bulk.ObjMeta{
		Parent: fid.FromPB(ino.Fid), StripeIndex: uint32(stripe), StripeSize: l.StripeSize,
		StripeCount: uint32(len(l.Objects)), LayoutGen: l.Generation,
		UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid, Valid: bulk.MetaAll,
	}
}

func objID(o *pb.StripeObject) fid.ObjID { return fid.ObjID{Seq: o.Seq, Oid: o.Oid} }

// piece is one frame-sized part of a chunk.
type piece struct {
	stripe int
	objOff uint64
	bufOff uint64 // offset in the caller's buffer
	len    uint64
}

func pieces(l *pb.Layout, off, n uint64) []piece {
	var out []piece
	for _, ch := range layout.Split(uint64(l.StripeSize), len(l.Objects), off, n) {
		for done := uint64(0); done < ch.Len; {
			m := min(ch.Len-done, maxFrame)
			out = append(out, piece{stripe: ch.Stripe, objOff: ch.ObjOff + done, bufOff: ch.FileOff - off + done, len: m})
			done += m
		}
	}
	return out
}

// farthest is the index of the piece that ends farthest into its object.
func farthest(ps []piece) int {
	far := 0
	for i, pc := range ps {
		if pc.objOff+pc.len > ps[far].objOff+ps[far].len {
			far = i
		}
	}
	return far
}

// parallel runs f for 0..n-1, at most limit at a time; the first error wins.
func parallel(ctx context.Context, n, limit int, f func(ctx context.Context, i int) error) error {
	if n == 1 {
		return f(ctx, 0)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}(i)
	}
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		first = ctx.Err()
	}
	return first
}

func (c *Client) wireFor(ost uint32) (*bulk.Client, error) {
	o, err := c.ost(ost)
	if err != nil {
		return nil, err
	}
	return o.wc, nil
}

// ReadAt reads len(p) bytes at off; holes read as zeros. It returns io.EOF
// when it reads less than len(p) because the file ends.
func (f *File) ReadAt(ctx context.Context, p []byte, off uint64) (int, error) {
	f.mu.Lock()
	ino, size, changed, sizedAt := f.ino, f.size, f.changed, f.sizedAt
	f.mu.Unlock()
	if ino.Layout == nil || len(ino.Layout.Objects) == 0 {
		return 0, io.EOF
	}
	if (off+uint64(len(p)) > size && time.Since(sizedAt) > sizeFresh) || changed {
		// Someone may have written more (or truncated) since we looked:
		// ask the OSTs.
		if s, err := f.Size(ctx); err == nil {
			size = s
		}
	}
	if off >= size {
		return 0, io.EOF
	}
	want := min(uint64(len(p)), size-off)
	buf := p[:want]
	clear(buf)
	ps := pieces(ino.Layout, off, want)
	err := parallel(ctx, len(ps), ioParallel, func(ctx context.Context, i int) error {
		pc := ps[i]
		o := ino.Layout.Objects[pc.stripe]
		if isHole(o) {
			return nil // a slot with no object (a file the checker rebuilt from some of its stripes) reads as zeros
		}
		wc, err := f.c.wireFor(o.Ost)
		if err != nil {
			return err
		}
		return f.c.retryIO(ctx, "read", objRef{o.Ost, f.fid, pc.stripe}, func(ctx context.Context) error {
			_, err := wc.Read(ctx, objID(o), pc.objOff, buf[pc.bufOff:pc.bufOff+pc.len])
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	if want < uint64(len(p)) {
		return int(want), io.EOF
	}
	return int(want), nil
}

// WriteAt writes p at off, striped over the file's objects in parallel.
func (f *File) WriteAt(ctx context.Context, p []byte, off uint64) (int, error) {
	// The write's time is when it was asked for, before the OSTs got it
	// (a close records the later of it and theirs): its end, after the
	// round trip, moved mtime a few ms past what stat showed before the
	// close.
	issued := time.Now().UnixNano()
	f.mu.Lock()
	ino := f.ino
	needDirty := !f.dirtySet
	f.mu.Unlock()
	if ino.Layout == nil && len(p) > 0 {
		// A file created with a delayed layout gets the default one now.
		nino, err := f.c.SetLayout(ctx, f.fid, &pb.Layout{StripeOffset: -1})
		if err != nil {
			return 0, err
		}
		f.mu.Lock()
		f.ino, ino = nino, nino
		f.mu.Unlock()
	}
	if ino.Layout == nil || len(ino.Layout.Objects) == 0 {
		return 0, &errno.Errno{Op: "write " + f.fid.String(), Errno: syscall.EIO, Msg: "file has no OST objects (layout lost; run `nacre lfsck start -t layout`)"}
	}
	if len(p) == 0 {
		return 0, nil
	}
	if needDirty {
		if err := f.setDirty(ctx, "write"); err != nil {
			return 0, err
		}
	}
	ps := pieces(ino.Layout, off, uint64(len(p)))
	epochs := make([]uint64, len(ps))
	one := func(ctx context.Context, i int) error {
		pc := ps[i]
		o := ino.Layout.Objects[pc.stripe]
		if isHole(o) {
			return holeErr("write", f.fid, pc.stripe)
		}
		wc, err := f.c.wireFor(o.Ost)
		if err != nil {
			return err
		}
		meta := objMeta(ino, pc.stripe)
		return f.c.retryIO(ctx, "write", objRef{o.Ost, f.fid, pc.stripe}, func(ctx context.Context) (err error) {
			epochs[i], err = wc.WriteEpoch(ctx, objID(o), pc.objOff, p[pc.bufOff:pc.bufOff+pc.len], meta)
			return err
		})
	}
	if far := farthest(ps); len(ps) > 1 && ps[far].objOff+ps[far].len >= syncObjectsFrom {
		// Far out, the piece that reaches farthest into its object goes
		// first: past the largest object an OST holds it fails (EFBIG)
		// before any other piece landed. Sent together, the others
		// landed and the file grew by a write reported as failed.
		ps[0], ps[far] = ps[far], ps[0]
		if err := one(ctx, 0); err != nil {
			return 0, err
		}
		if err := parallel(ctx, len(ps)-1, ioParallel, func(ctx context.Context, i int) error { return one(ctx, i+1) }); err != nil {
			return 0, err
		}
	} else if err := parallel(ctx, len(ps), ioParallel, one); err != nil {
		return 0, err
	}
	f.mu.Lock()
	for i, pc := range ps {
		f.note(pc.stripe, epochs[i])
	}
	if end := off + uint64(len(p)); end > f.size {
		f.size = end
	}
	f.wrote = true
	f.lastWrite = max(f.lastWrite, issued)
	f.mu.Unlock()
	return len(p), nil
}

// setDirty tells the MDT, before any byte of a change reaches an OST,
// that the file's size and mtime are no longer exact: a crash before the
// close would otherwise leave wrong ones behind, and other clients would
// trust them.
//
// Writes behind that start together (the mount's) wait for the first one's
// call instead of each sending its own: 4 KiB writes sent about 20,000 of
// them in a run of a few seconds, each past the pool of MDT connections.
func (f *File) setDirty(ctx context.Context, what string) error {
	f.dirtyMu.Lock()
	defer f.dirtyMu.Unlock()
	f.mu.Lock()
	set := f.dirtySet
	f.mu.Unlock()
	if set {
		return nil
	}
	if _, err := f.c.mutate(ctx, what+" "+f.fid.String(), f.fid, &pb.Command{Op: &pb.Command_Setattr{Setattr: &pb.SetattrOp{
		Fid: f.fid.PB(), Valid: uint32(pb.SetattrValid_SETATTR_SET_DIRTY)}}}); err != nil {
		return err
	}
	f.mu.Lock()
	f.dirtySet = true
	f.mu.Unlock()
	return nil
}

// objRef names the object an I/O is for, for OSTDownError.
type objRef struct {
	ost    uint32
	file   fid.FID
	stripe int
}

// retryIO retries an idempotent object operation while the OST is
// unreachable (restarting), within the client's timeout, or until the OST
// has been unreachable for Config.OSTDownAfter (then *OSTDownError).
func (c *Client) retryIO(ctx context.Context, what string, ref objRef, op func(ctx context.Context) error) error {
	deadline := time.Now().Add(c.cfg.Timeout)
	backoff := 20 * time.Millisecond
	notes := waitNotes{c: c}
	for {
		start := time.Now()
		err := op(ctx)
		if err == nil || !ioRetryable(err) {
			c.ostAnswered(ref.ost)
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		since, addr := c.ostUnreachable(ref.ost, start)
		if down := c.cfg.OSTDownAfter; down > 0 && time.Since(since) >= down {
			return &OSTDownError{OST: ref.ost, Addr: addr, File: ref.file, Stripe: ref.stripe, Op: what, For: time.Since(since), Err: err}
		}
		if time.Now().After(deadline) {
			return err
		}
		until := deadline
		if down := c.cfg.OSTDownAfter; down > 0 && since.Add(down).Before(until) {
			until = since.Add(down)
		}
		notes.note(Wait{Op: what, Server: fmt.Sprintf("OST%04x", ref.ost), Addr: addr, Since: since, Until: until, Cause: ShortCause(err)})
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if backoff < time.Second {
			backoff *= 2
		}
	}
}

// ostAnswered records that an OST answered (with data or an errno).
func (c *Client) ostAnswered(index uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if o := c.osts[index]; o != nil {
		o.unreachableSince = time.Time{}
	}
}

// ostUnreachable records an attempt, begun at start, that could not reach
// an OST, and returns since when the OST has been unreachable and its
// address. Failures more than 2 s apart (retries are at most 1 s apart)
// start a new count.
func (c *Client) ostUnreachable(index uint32, start time.Time) (time.Time, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.osts[index]
	if o == nil {
		return start, ""
	}
	if o.unreachableSince.IsZero() || start.Sub(o.lastFailure) > 2*time.Second {
		o.unreachableSince = start
	}
	o.lastFailure = time.Now()
	return o.unreachableSince, o.addr
}

// OSTDownError is object I/O given up because its OST could not be
// reached for Config.OSTDownAfter.
type OSTDownError struct {
	OST    uint32
	Addr   string  // the OST's data address
	File   fid.FID // the file the object belongs to
	Stripe int     // the object's stripe index in the file's layout
	Op     string  // read, write, getattr, truncate, punch, sync
	For    time.Duration
	Err    error // the last attempt's error
}

func (e *OSTDownError) Error() string { return e.Describe(e.File.String()) }

// Unwrap returns the last attempt's error.
func (e *OSTDownError) Unwrap() error { return e.Err }

// Describe is the message with the file named as name (a path).
func (e *OSTDownError) Describe(name string) string {
	verb := map[string]string{"write": "written", "getattr": "read", "truncate": "truncated", "punch": "punched", "sync": "synced"}[e.Op]
	if verb == "" {
		verb = "read"
	}
	return fmt.Sprintf("OST%04x (%s) is down: stripe %d of %s cannot be %s (no answer for %.1fs: %s)",
		e.OST, e.Addr, e.Stripe, name, verb, e.For.Seconds(), shortNetError(e.Err))
}

// shortNetError is the cause of a connection failure without the layers
// that wrapped it ("connection refused" rather than "read OST0001 object
// ...: connection to ...: dial tcp ...: connect: connection refused").
func shortNetError(err error) string {
	var errno syscall.Errno
	switch {
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	}
	return err.Error()
}

// ioRetryable: connection-level failures (not an errno from the OST).
func ioRetryable(err error) bool {
	var e *errno.Errno
	if ok := asErrno(err, &e); ok {
		return false
	}
	return true
}

type glimpseResult struct {
	size, blocks uint64
	mtime        int64
}

// glimpse asks every object for its size: the file size is the largest
// file offset any object reaches.
func (c *Client) glimpse(ctx context.Context, ino *pb.Inode) (glimpseResult, error) {
	l := ino.Layout
	sizes := make([]uint64, len(l.Objects))
	blocks := make([]uint64, len(l.Objects))
	mtimes := make([]int64, len(l.Objects))
	// A slot with no object counts as size 0.
	err := c.eachObject(ctx, ino, "getattr", func(ctx context.Context, wc *bulk.Client, o *pb.StripeObject, i int) error {
		a, err := wc.GetAttr(ctx, objID(o))
		if err != nil {
			return err
		}
		sizes[i], blocks[i], mtimes[i] = a.Size, a.Blocks, a.MtimeNs
		return nil
	})
	if err != nil {
		return glimpseResult{}, fmt.Errorf("glimpse %s: %w", fid.FromPB(ino.Fid), err)
	}
	g := glimpseResult{size: layout.FileSize(uint64(l.StripeSize), sizes)}
	for i := range sizes {
		g.blocks += blocks[i]
		g.mtime = max(g.mtime, mtimes[i])
	}
	return g, nil
}

// Size is the file's current size (from the OSTs if anyone is writing).
func (f *File) Size(ctx context.Context) (uint64, error) {
	ino, err := f.c.Stat(ctx, f.fid)
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.changed {
		ino.Size = max(ino.Size, f.size)
	}
	f.ino, f.size, f.changed, f.sizedAt = ino, ino.Size, false, time.Now()
	return f.size, nil
}

// Truncate sets the file's size, as ftruncate(2) does through a file
// opened for writing: access was checked at the open.
func (f *File) Truncate(ctx context.Context, size uint64) error {
	ino, epochs, err := f.c.setattr(ctx, &pb.SetattrOp{Fid: f.fid.PB(), Valid: uint32(pb.SetattrValid_SETATTR_SIZE | pb.SetattrValid_SETATTR_OPENED), Size: size})
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ino, f.size = ino, size
	f.dirtySet = ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0
	for i := range ino.Layout.GetObjects() {
		var e uint64
		if i < len(epochs) {
			e = epochs[i]
		}
		f.note(i, e)
	}
	return nil
}

// truncateObjects truncates every object of ino to its share of size and
// returns the epochs their OSTs answered with (File.Sync). A striped
// file's OSTs are first asked whether they answer, so that an OST known
// to be down fails the truncate before any object is cut: cutting the
// others left the file neither old nor new, its size the old one with
// zeros in the middle (a window remains for an OST that fails between
// the two rounds).
func (c *Client) truncateObjects(ctx context.Context, ino *pb.Inode, size uint64) ([]uint64, error) {
	l := ino.Layout
	if len(l.Objects) > 1 {
		if err := c.reachObjects(ctx, ino, "truncate"); err != nil {
			return nil, err
		}
	}
	epochs := make([]uint64, len(l.Objects))
	cut := func(ctx context.Context, i int) error {
		return c.onObject(ctx, ino, "truncate", i, func(ctx context.Context, wc *bulk.Client, o *pb.StripeObject, i int) (err error) {
			objSize := layout.ObjectSize(uint64(l.StripeSize), len(l.Objects), i, size)
			epochs[i], err = wc.Truncate(ctx, objID(o), objSize, objMeta(ino, i))
			return err
		})
	}
	rest := 0
	if len(l.Objects) > 1 && layout.ObjectSize(uint64(l.StripeSize), len(l.Objects), 0, size) >= syncObjectsFrom {
		// The first object gets the largest share: far out, cut it alone
		// first, so that a size past the largest object an OST holds
		// (EFBIG) fails before any other object grew (the others grew,
		// and a later write's close recorded a size of 64 TiB for a file
		// whose truncate had been refused).
		if err := cut(ctx, 0); err != nil {
			return epochs, err
		}
		rest = 1
	}
	err := parallel(ctx, len(l.Objects)-rest, ioParallel, func(ctx context.Context, i int) error { return cut(ctx, i+rest) })
	return epochs, err
}

// syncObjectsFrom is the object offset from which a change that may pass
// the largest object an OST holds (EFBIG; 16 TiB on ext4) reaches that
// object before the others, so that the refusal leaves nothing changed.
const syncObjectsFrom = 1 << 40

// eachObject runs op on every object of ino's layout (not the slots that
// name none), in parallel, each with the retries of any I/O (retryIO).
func (c *Client) eachObject(ctx context.Context, ino *pb.Inode, what string, op func(ctx context.Context, wc *bulk.Client, o *pb.StripeObject, i int) error) error {
	return parallel(ctx, len(ino.Layout.Objects), ioParallel, func(ctx context.Context, i int) error {
		return c.onObject(ctx, ino, what, i, op)
	})
}

// onObject runs op on object i of ino's layout (nothing for a slot that
// names none), with the retries of any I/O (retryIO).
func (c *Client) onObject(ctx context.Context, ino *pb.Inode, what string, i int, op func(ctx context.Context, wc *bulk.Client, o *pb.StripeObject, i int) error) error {
	o := ino.Layout.Objects[i]
	if isHole(o) {
		return nil
	}
	wc, err := c.wireFor(o.Ost)
	if err != nil {
		return err
	}
	return c.retryIO(ctx, what, objRef{o.Ost, fid.FromPB(ino.Fid), i}, func(ctx context.Context) error {
		return op(ctx, wc, o, i)
	})
}

// reachObjects asks the OST of every object of ino for it, with the
// retries of any I/O, and fails only if an OST does not answer (an
// answer that the object is missing is left to the operation itself).
func (c *Client) reachObjects(ctx context.Context, ino *pb.Inode, what string) error {
	return c.eachObject(ctx, ino, what, func(ctx context.Context, wc *bulk.Client, o *pb.StripeObject, _ int) error {
		if _, err := wc.GetAttr(ctx, objID(o)); err != nil && ioRetryable(err) {
			return err
		}
		return nil
	})
}

// Punch deallocates [off, off+n) (reads return zeros); the size stays.
func (f *File) Punch(ctx context.Context, off, n uint64) error {
	issued := time.Now().UnixNano() // as WriteAt's
	f.mu.Lock()
	ino := f.ino
	f.mu.Unlock()
	if ino.Layout == nil {
		return nil
	}
	// A punch changes data like a write: mtime and ctime move, and the
	// close records them (and other clients drop their cached pages).
	f.mu.Lock()
	needDirty := !f.dirtySet
	f.mu.Unlock()
	if needDirty {
		if err := f.setDirty(ctx, "punch"); err != nil {
			return err
		}
	}
	// One call per object, whatever the range: one per stripe unit made a
	// punch of 2^62 bytes allocate more than the machine has.
	chunks := layout.ObjectRanges(uint64(ino.Layout.StripeSize), len(ino.Layout.Objects), off, n)
	epochs := make([]uint64, len(chunks))
	err := parallel(ctx, len(chunks), ioParallel, func(ctx context.Context, i int) error {
		ch := chunks[i]
		o := ino.Layout.Objects[ch.Stripe]
		if isHole(o) {
			return nil // nothing to punch
		}
		wc, err := f.c.wireFor(o.Ost)
		if err != nil {
			return err
		}
		return f.c.retryIO(ctx, "punch", objRef{o.Ost, f.fid, ch.Stripe}, func(ctx context.Context) (err error) {
			epochs[i], err = wc.Punch(ctx, objID(o), ch.ObjOff, ch.Len)
			return err
		})
	})
	if err != nil {
		return err
	}
	f.mu.Lock()
	for i, ch := range chunks {
		f.note(ch.Stripe, epochs[i])
	}
	f.wrote = true
	f.lastWrite = max(f.lastWrite, issued)
	f.mu.Unlock()
	return nil
}

// epochMixed marks a stripe changed under two epochs of its OST: a restart
// came between the changes, and the earlier may be lost.
const epochMixed = ^uint64(0)

// note records, with f.mu held, that stripe changed; epoch is the OST's
// as the change's reply gave it (0: unknown, not checked).
func (f *File) note(stripe int, epoch uint64) {
	switch old, ok := f.touched[stripe]; {
	case !ok || old == 0:
		f.touched[stripe] = epoch
	case epoch != 0 && epoch != old:
		f.touched[stripe] = epochMixed
	}
}

// Sync makes every byte written so far durable on the OSTs. The size need
// not be recorded: while the MDT's size is marked dirty, a reader (or the
// client after a crash) takes it from the objects.
//
// An OST acknowledges a write before it is durable, and the client keeps
// no copy: if the OST restarted in a way that may have lost such writes
// (its epoch changed: a power cut), syncing what is left there would say
// nothing of them. The sync then fails with EIO naming the OST, as a local
// file system's fsync reports a failed writeback, once (NFS compares its
// write verifier the same way, and resends what it still holds).
func (f *File) Sync(ctx context.Context) error {
	f.mu.Lock()
	ino := f.ino
	stripes := make([]int, 0, len(f.touched))
	changed := make([]uint64, 0, len(f.touched)) // each stripe's epoch (note)
	for s, e := range f.touched {
		stripes = append(stripes, s)
		changed = append(changed, e)
	}
	f.mu.Unlock()
	if len(stripes) == 0 {
		return nil
	}
	lost := make([]bool, len(stripes))
	err := parallel(ctx, len(stripes), ioParallel, func(ctx context.Context, i int) error {
		o := ino.Layout.Objects[stripes[i]]
		if isHole(o) {
			return nil
		}
		wc, err := f.c.wireFor(o.Ost)
		if err != nil {
			return err
		}
		return f.c.retryIO(ctx, "sync", objRef{o.Ost, f.fid, stripes[i]}, func(ctx context.Context) error {
			synced, err := wc.SyncEpoch(ctx, objID(o))
			lost[i] = err == nil && changed[i] != 0 && synced != 0 && synced != changed[i]
			return err
		})
	})
	if err != nil {
		return err
	}
	var lostOn []string
	f.mu.Lock()
	for i, s := range stripes {
		// A change made meanwhile (another epoch, or one not synced
		// here) stays to sync.
		if f.touched[s] == changed[i] {
			delete(f.touched, s)
		}
		if lost[i] {
			lostOn = append(lostOn, fmt.Sprintf("OST%04x (stripe %d)", ino.Layout.Objects[s].Ost, s))
		}
	}
	f.mu.Unlock()
	if len(lostOn) > 0 {
		sort.Strings(lostOn)
		return &errno.Errno{Op: "sync " + f.fid.String(), Errno: syscall.EIO,
			Msg: strings.Join(lostOn, ", ") + " restarted after acknowledging writes it had not made durable yet (a power cut or a crash of its machine): they may be lost; write the file again"}
	}
	return nil
}

// Close makes written data durable and records the exact size and mtime
// on the MDT, so the next opener (any client) sees every byte.
func (f *File) Close(ctx context.Context) error {
	f.mu.Lock()
	wrote := f.wrote
	f.mu.Unlock()
	if !wrote {
		return nil
	}
	if err := f.Sync(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	ino, last := f.ino, f.lastWrite
	f.mu.Unlock()
	g, err := f.c.glimpse(ctx, ino)
	if err != nil {
		return err
	}
	mtime := max(last, g.mtime)
	nino, err := f.c.mutate(ctx, "close "+f.fid.String(), f.fid, &pb.Command{Op: &pb.Command_Setattr{Setattr: &pb.SetattrOp{
		Fid: f.fid.PB(), Size: g.size, Blocks: g.blocks, MtimeNs: mtime,
		Valid: uint32(pb.SetattrValid_SETATTR_SIZE | pb.SetattrValid_SETATTR_BLOCKS | pb.SetattrValid_SETATTR_MTIME | pb.SetattrValid_SETATTR_CLEAR_DIRTY)}}})
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.ino, f.size, f.wrote, f.dirtySet = nino.Inode, g.size, false, false
	f.mu.Unlock()
	return nil
}

// isHole says whether a layout slot names no object (0:0): the checker
// rebuilds a file from the stripes it found (lost+found), leaving holes
// for the others. A hole reads as zeros; it cannot be written.
func isHole(o *pb.StripeObject) bool { return o.GetSeq() == 0 && o.GetOid() == 0 }

func holeErr(op string, f fid.FID, stripe int) error {
	return &errno.Errno{Op: fmt.Sprintf("%s %s", op, f), Errno: syscall.EIO,
		Msg: fmt.Sprintf("stripe %d has no OST object (a file rebuilt by the checker from the stripes it found); copy the data you need to a new file", stripe)}
}

// MissingObject reports whether err is an OST's answer that an object of
// the file does not exist, to an operation on it (read, write, truncate,
// punch, getattr: the wire client names them "OP OSTxxxx object ..."):
// the file and its name are there, and one of its stripes is dangling
// (the checker's layout check reports it, and with -c makes it again,
// empty).
func MissingObject(err error) bool {
	var en *errno.Errno
	if !errors.As(err, &en) || en.Errno != syscall.ENOENT {
		return false
	}
	op, rest, ok := strings.Cut(en.Op, " OST")
	return ok && op != "" && !strings.Contains(op, " ") && strings.Contains(rest, " object ")
}
