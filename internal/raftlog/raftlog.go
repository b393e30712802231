// Package raftlog is the Raft log on disk: a directory of segment files
// that exist at their full size before a record is written to them, so
// that appending a record and syncing it is an fdatasync of blocks the
// file system already has. An append into a growing file, or into space
// reserved with fallocate (what pebble's WAL does), must also journal the
// new size or the converted extents on every sync, which costs more than
// the overwrite (docs/architecture.md, "The Raft log", has the figures).
//
// The package knows records, segments and crashes; what the records mean
// (entries, hard state, truncation points) is its caller's business
// (internal/raftgroup).
//
// # Format
//
// A segment is a file named by its sequence number, "%016x.seg". It is
// written from offset 0 as a run of records:
//
//	length uint32, little endian: bytes of type and payload (at least 1)
//	crc    uint32, little endian: CRC-32C of the segment's sequence number
//	       (uint64, little endian), the type and the payload
//	type   byte
//	payload
//
// The first record of a segment is its header (type 'S': the magic
// "nacre-raftlog", the format version and the sequence number); every
// segment but the newest ends with an end record (type 'X'). Past the
// last record a segment holds zeros (a new file) or the bytes of the
// segment it was recycled from; the sequence number inside every CRC makes
// those fail the check, so the first record that does not check ends the
// segment. Other types belong to the caller.
//
// # Crashes
//
// Write(true) makes every record added so far durable. A crash can leave
// the newest segment with a torn tail; Open keeps the records before the
// first one that fails its check, seals that segment with an end record
// and starts a new one, so that nothing written before the crash and not
// made durable can reappear later (a newest segment without a valid
// header is sealed as an empty one, so that its sequence number is never
// used again). A failing record followed, in the same disk sector, by one
// that checks was not torn by a crash, which keeps or loses whole sectors:
// it is refused as damage. Any other damage (a segment that is not the
// newest and does not end with an end record, a bad header) is refused
// with an error naming the file and the offset.
//
// Segments are prepared ahead by a background goroutine: a new file is
// written with zeros and synced, or a segment the caller released is
// recycled as it is. A segment changes name only by a rename followed by
// a sync of the directory.
package raftlog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Format is the version of the segment format.
const Format = 1

const (
	magic     = "nacre-raftlog"
	hdrLen    = 9 // length, crc, type
	typHeader = 'S'
	typEnd    = 'X'
	segSuffix = ".seg"
	// spare- files are whole, synced, ready to be renamed into segments;
	// prep- files are being written and are removed at Open.
	sparePrefix = "spare-"
	prepPrefix  = "prep-"
	// maxSpares bounds the prepared segments kept (recycled ones beyond
	// it are deleted).
	maxSpares = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt marks damage that Open refuses to repair by itself.
var ErrCorrupt = errors.New("raft log damaged")

// Options configure a log.
type Options struct {
	// SegmentSize is the size of a segment file (default 8 MiB). A record
	// larger than a segment gets a segment of its own size.
	SegmentSize int64
}

// Pos is where a record lies: its segment's sequence number in the high
// 32 bits, its offset in the low 32.
type Pos uint64

// Seq is the sequence number of the segment holding the record.
func (p Pos) Seq() uint64 { return uint64(p) >> 32 }

func (p Pos) off() int64 { return int64(uint32(p)) }

func mkPos(seq uint64, off int64) Pos { return Pos(seq<<32 | uint64(off)) }

// Record is one record as Open replays it. Payload is valid only during
// the callback.
type Record struct {
	Type    byte
	Payload []byte
	Pos     Pos
}

type segment struct {
	seq  uint64
	name string
	size int64
	rf   vfs.File // opened for reading on first use (the active one: wf)
}

// Log is an open log. Its methods other than Close must be called from one
// goroutine at a time (the Raft group's loop).
type Log struct {
	fs   vfs.FS
	dir  string
	opts Options

	segs   []*segment // live segments, oldest first; the last is active
	wf     vfs.File   // the active segment, open for writing
	off    int64      // where buf goes in the active segment
	buf    []byte     // records added and not yet written
	unsync bool       // written bytes not yet synced
	synced int64      // the active segment is durable up to here

	prologue func(add func(typ byte, payload []byte))

	prep *preparer

	// failed is the first error of a write, sync or segment switch. After
	// it the log refuses all use: what reached the disk is unknown, and a
	// later fsync can report success for pages a failed one dropped (the
	// kernel marks them clean), so only a reopen, which replays what the
	// disk holds, is safe.
	failed error
}

func segName(seq uint64) string { return fmt.Sprintf("%016x%s", seq, segSuffix) }

func parseSeg(name string) (uint64, bool) {
	if !strings.HasSuffix(name, segSuffix) || len(name) != 16+len(segSuffix) {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(name, segSuffix), 16, 64)
	return v, err == nil
}

// Open opens the log in dir, creating the directory if needed, and calls
// fn for every record of every live segment, oldest first (headers and
// end records are not shown). It then starts a new segment, whose first
// records after the header are what SetPrologue's function adds, so the
// caller sets the prologue before its first Add or Write; Open itself
// writes only the header.
func Open(fs vfs.FS, dir string, o Options, fn func(Record) error) (*Log, error) {
	if o.SegmentSize <= 0 {
		o.SegmentSize = 8 << 20
	}
	if o.SegmentSize > 1<<31 {
		return nil, fmt.Errorf("raft log %s: segment size %d is over 2 GiB", dir, o.SegmentSize)
	}
	if _, err := fs.Stat(dir); err != nil {
		// A new log: its directory entry must be durable before any
		// record in it can be.
		if err := fs.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create raft log directory %s: %w", dir, err)
		}
		if err := syncDir(fs, filepath.Dir(dir)); err != nil {
			return nil, err
		}
	}
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("list raft log directory %s: %w", dir, err)
	}
	l := &Log{fs: fs, dir: dir, opts: o}
	var spares []string
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, prepPrefix):
			if err := fs.Remove(filepath.Join(dir, n)); err != nil {
				return nil, fmt.Errorf("remove unfinished raft log segment %s: %w", filepath.Join(dir, n), err)
			}
		case strings.HasPrefix(n, sparePrefix):
			spares = append(spares, n)
		default:
			if seq, ok := parseSeg(n); ok {
				l.segs = append(l.segs, &segment{seq: seq, name: n})
			}
		}
	}
	slices.SortFunc(l.segs, func(a, b *segment) int { return cmp.Compare(a.seq, b.seq) })
	l.prep = newPreparer(fs, dir, o.SegmentSize, spares)

	// Replay. Every segment but the newest must end with an end record.
	var tail int64 = -1 // end of the valid records of the newest segment
	for i, s := range l.segs {
		last := i == len(l.segs)-1
		end, sealed, err := l.replay(s, last, fn)
		if err != nil {
			l.closeFiles()
			return nil, err
		}
		if last && !sealed {
			tail = end
		}
	}
	if tail >= 0 {
		// Seal the newest segment where its valid records end, so that
		// bytes after them that were written but never synced cannot be
		// read back as records later. A segment without a valid header
		// (a crash came before its first write was synced) is sealed
		// too, as an empty one, not recycled: a crash can lose the page
		// with the header and keep later records of that write, and
		// recycling would give its sequence number, which those records'
		// CRCs are seeded with, to the next segment, written over the
		// same file.
		if err := l.seal(l.segs[len(l.segs)-1], tail); err != nil {
			l.closeFiles()
			return nil, err
		}
	}
	if err := l.rotate(0); err != nil {
		l.closeFiles()
		return nil, err
	}
	l.prep.start()
	return l, nil
}

// replay reads segment s and calls fn for its records. It returns where
// the valid records end and whether an end record closed them.
func (l *Log) replay(s *segment, last bool, fn func(Record) error) (int64, bool, error) {
	path := filepath.Join(l.dir, s.name)
	f, err := l.fs.Open(path)
	if err != nil {
		return 0, false, fmt.Errorf("open raft log segment %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, false, fmt.Errorf("stat raft log segment %s: %w", path, err)
	}
	data := make([]byte, st.Size())
	if _, err := f.ReadAt(data, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, false, fmt.Errorf("read raft log segment %s: %w", path, err)
	}
	s.size = st.Size()
	damaged := func(off int64, what string) error {
		return fmt.Errorf("%w: segment %s, offset %d: %s; this replica's log cannot be trusted", ErrCorrupt, path, off, what)
	}
	var off int64
	for {
		typ, payload, n := parseRecord(data, off, s.seq)
		if n == 0 {
			break
		}
		if off == 0 {
			if typ != typHeader {
				return 0, false, damaged(0, "the first record is not a segment header")
			}
			if err := checkHeader(payload, s.seq); err != nil {
				return 0, false, damaged(0, err.Error())
			}
			off += n
			continue
		}
		if typ == typEnd {
			return off, true, nil
		}
		if err := fn(Record{Type: typ, Payload: payload, Pos: mkPos(s.seq, off)}); err != nil {
			return 0, false, fmt.Errorf("raft log segment %s, offset %d: %w", path, off, err)
		}
		off += n
	}
	if off == 0 {
		if last {
			return 0, false, nil
		}
		return 0, false, damaged(0, "no valid segment header")
	}
	if !last {
		return 0, false, damaged(off, "a record fails its checksum before the segment's end record (the segment was cut short or overwritten)")
	}
	if writtenWhole(data, off, s.seq) {
		return 0, false, damaged(off, "a record fails its checksum, and the record after it, in the same disk sector, checks "+
			"(the record was damaged after it was written; a crash cannot do that)")
	}
	return off, false, nil
}

// sectorSize is what a disk writes atomically: a crash leaves a sector
// as it was written or as it was before, never part of each.
const sectorSize = 512

// writtenWhole reports whether the record at off, which fails its check,
// is known to have reached the disk as written, so that the failure is
// damage and not a write a crash lost: its length leads to a record that
// checks and starts in the sector the failing record lies in. That record
// was written after the failing one (records are written in order, and a
// segment's sequence number is never used for another file), so the sector
// reached the disk holding both. Anything else, such as a damaged length,
// is taken for a torn tail: nothing tells the two apart.
func writtenWhole(data []byte, off int64, seq uint64) bool {
	if off+8 > int64(len(data)) {
		return false
	}
	next := off + 8 + int64(binary.LittleEndian.Uint32(data[off:]))
	if next <= off+8 || next/sectorSize != off/sectorSize {
		return false
	}
	_, _, n := parseRecord(data, next, seq)
	return n > 0
}

// parseRecord decodes the record at off; n is 0 when none checks there.
func parseRecord(data []byte, off int64, seq uint64) (typ byte, payload []byte, n int64) {
	if off+hdrLen > int64(len(data)) {
		return 0, nil, 0
	}
	ln := int64(binary.LittleEndian.Uint32(data[off:]))
	if ln < 1 || off+8+ln > int64(len(data)) {
		return 0, nil, 0
	}
	body := data[off+8 : off+8+ln]
	if binary.LittleEndian.Uint32(data[off+4:]) != recordCRC(seq, body) {
		return 0, nil, 0
	}
	return body[0], body[1:], 8 + ln
}

func recordCRC(seq uint64, body []byte) uint32 {
	var s [8]byte
	binary.LittleEndian.PutUint64(s[:], seq)
	return crc32.Update(crc32.Update(0, castagnoli, s[:]), castagnoli, body)
}

func headerPayload(seq uint64) []byte {
	p := append([]byte(magic), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(p[len(magic):], Format)
	return binary.LittleEndian.AppendUint64(p, seq)
}

func checkHeader(p []byte, seq uint64) error {
	if len(p) != len(magic)+12 || string(p[:len(magic)]) != magic {
		return errors.New("not a Nacre raft log segment header")
	}
	if v := binary.LittleEndian.Uint32(p[len(magic):]); v != Format {
		return fmt.Errorf("segment format %d, this release reads format %d (written by another Nacre release)", v, Format)
	}
	if s := binary.LittleEndian.Uint64(p[len(magic)+4:]); s != seq {
		return fmt.Errorf("header says segment %d, the file name %d", s, seq)
	}
	return nil
}

// appendRecord encodes a record for segment seq onto buf.
func appendRecord(buf []byte, seq uint64, typ byte, payload []byte) []byte {
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(1+len(payload)))
	buf = append(buf, 0, 0, 0, 0, typ)
	buf = append(buf, payload...)
	binary.LittleEndian.PutUint32(buf[start+4:], recordCRC(seq, buf[start+8:]))
	return buf
}

// seal writes an end record at off in segment s and syncs it; at offset
// 0 it writes a header first.
func (l *Log) seal(s *segment, off int64) error {
	path := filepath.Join(l.dir, s.name)
	f, err := l.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("open raft log segment %s to seal it: %w", path, err)
	}
	defer f.Close()
	var rec []byte
	if off == 0 {
		rec = appendRecord(rec, s.seq, typHeader, headerPayload(s.seq))
	}
	rec = appendRecord(rec, s.seq, typEnd, nil)
	if _, err := f.WriteAt(rec, off); err != nil {
		return fmt.Errorf("seal raft log segment %s: %w", path, err)
	}
	if err := f.SyncData(); err != nil {
		return fmt.Errorf("sync raft log segment %s: %w", path, err)
	}
	return nil
}

// SetPrologue sets what every new segment starts with after its header:
// the records a replay needs that may otherwise only be in segments the
// caller releases (the hard state, the truncation point). It is called
// at once for the segment Open started.
func (l *Log) SetPrologue(fn func(add func(typ byte, payload []byte))) {
	l.prologue = fn
	fn(l.addRaw)
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

func (l *Log) addRaw(typ byte, payload []byte) {
	l.buf = appendRecord(l.buf, l.active().seq, typ, payload)
}

// room is how many bytes of records still fit in the active segment,
// keeping space for its end record.
func (l *Log) room() int64 {
	return l.active().size - l.off - int64(len(l.buf)) - hdrLen
}

// Add stages a record of the caller's type (not 'S' or 'X') and returns
// where it will lie. Nothing reaches the file before Write; a full
// segment is closed (synced) and a new one begun on the way.
func (l *Log) Add(typ byte, payload []byte) (Pos, error) {
	if typ == typHeader || typ == typEnd {
		return 0, fmt.Errorf("raft log: record type %q is reserved", typ)
	}
	if l.failed != nil {
		return 0, l.refused()
	}
	need := int64(8 + 1 + len(payload))
	if need > l.room() {
		if err := l.rotate(need); err != nil {
			return 0, l.fail(err)
		}
	}
	p := mkPos(l.active().seq, l.off+int64(len(l.buf)))
	l.buf = appendRecord(l.buf, l.active().seq, typ, payload)
	return p, nil
}

// Write writes the staged records; with sync, it also makes them and
// every earlier record durable.
func (l *Log) Write(sync bool) error {
	if l.failed != nil {
		return l.refused()
	}
	return l.fail(l.write(sync))
}

// fail records the first error (nil passes through).
func (l *Log) fail(err error) error {
	if err != nil && l.failed == nil {
		l.failed = err
	}
	return err
}

func (l *Log) refused() error {
	return fmt.Errorf("raft log %s: unusable after an earlier failure (%v); restart to replay what the disk holds", l.dir, l.failed)
}

func (l *Log) write(sync bool) error {
	if len(l.buf) > 0 {
		if _, err := l.wf.WriteAt(l.buf, l.off); err != nil {
			return noSpace(fmt.Errorf("write raft log segment %s: %w", filepath.Join(l.dir, l.active().name), err), l.dir)
		}
		l.off += int64(len(l.buf))
		l.buf = l.buf[:0]
		l.unsync = true
	}
	if sync && l.unsync {
		if err := l.wf.SyncData(); err != nil {
			return fmt.Errorf("sync raft log segment %s: %w", filepath.Join(l.dir, l.active().name), err)
		}
		l.unsync = false
		l.synced = l.off
	}
	return nil
}

// LoseUnsynced zeroes what the active segment holds past its last sync and
// drops staged records, as a power cut would lose them, and makes the log
// unusable: the process is about to exit (a fault test's power cut;
// raftgroup.FaultPowerCut). Earlier segments are durable: a segment
// switch syncs the old one.
func (l *Log) LoseUnsynced() error {
	l.buf = l.buf[:0]
	if l.wf != nil && l.off > l.synced {
		if _, err := l.wf.WriteAt(make([]byte, l.off-l.synced), l.synced); err != nil {
			return fmt.Errorf("raft log %s: zero unsynced bytes: %w", l.dir, err)
		}
		if err := l.wf.SyncData(); err != nil {
			return fmt.Errorf("raft log %s: zero unsynced bytes: %w", l.dir, err)
		}
	}
	l.failed = errors.New("the unsynced tail was dropped (a power cut test)")
	return nil
}

// rotate closes the active segment (if any) with an end record, synced,
// and begins the next one, large enough for a record of need bytes, with
// its header and the prologue. Records staged before are written first.
func (l *Log) rotate(need int64) error {
	var next uint64 = 1
	if len(l.segs) > 0 {
		next = l.segs[len(l.segs)-1].seq + 1
	}
	if l.wf != nil {
		l.buf = appendRecord(l.buf, l.active().seq, typEnd, nil)
		if err := l.write(true); err != nil {
			return err
		}
		// The active file stays open for reads of its records.
		l.active().rf = l.wf
		l.wf = nil
	}
	// The header, the prologue, the record and the end record must fit.
	fixed := appendRecord(nil, next, typHeader, headerPayload(next))
	if l.prologue != nil {
		l.prologue(func(typ byte, p []byte) { fixed = appendRecord(fixed, next, typ, p) })
	}
	size := max(l.opts.SegmentSize, len64(fixed)+need+hdrLen)
	name := segName(next)
	path := filepath.Join(l.dir, name)
	if err := l.prep.take(path, size); err != nil {
		return err
	}
	f, err := l.fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("open raft log segment %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat raft log segment %s: %w", path, err)
	}
	l.segs = append(l.segs, &segment{seq: next, name: name, size: st.Size()})
	l.wf, l.off, l.unsync, l.synced = f, 0, false, 0
	l.buf = append(l.buf, fixed...)
	return nil
}

func len64(b []byte) int64 { return int64(len(b)) }

// Read returns the type and payload of the record at p, which must be a
// position Add or Open gave and in a segment not released.
func (l *Log) Read(p Pos) (byte, []byte, error) {
	s := l.seg(p.Seq())
	if s == nil {
		return 0, nil, fmt.Errorf("raft log: no live segment %d for record at %d/%d", p.Seq(), p.Seq(), p.off())
	}
	if s == l.active() && p.off() >= l.off {
		// Still staged.
		typ, payload, n := parseRecord(l.buf, p.off()-l.off, s.seq)
		if n == 0 {
			return 0, nil, fmt.Errorf("raft log: no staged record at %d/%d", p.Seq(), p.off())
		}
		return typ, append([]byte(nil), payload...), nil
	}
	f := s.rf
	if s == l.active() {
		f = l.wf
	}
	path := filepath.Join(l.dir, s.name)
	if f == nil {
		var err error
		if f, err = l.fs.Open(path); err != nil {
			return 0, nil, fmt.Errorf("open raft log segment %s: %w", path, err)
		}
		s.rf = f
	}
	var h [8]byte
	if _, err := f.ReadAt(h[:], p.off()); err != nil {
		return 0, nil, fmt.Errorf("read raft log segment %s at %d: %w", path, p.off(), err)
	}
	ln := int64(binary.LittleEndian.Uint32(h[:]))
	if ln < 1 || p.off()+8+ln > s.size {
		return 0, nil, fmt.Errorf("%w: segment %s, offset %d: bad record length %d", ErrCorrupt, path, p.off(), ln)
	}
	rec := make([]byte, 8+ln)
	if _, err := f.ReadAt(rec, p.off()); err != nil {
		return 0, nil, fmt.Errorf("read raft log segment %s at %d: %w", path, p.off(), err)
	}
	typ, payload, n := parseRecord(rec, 0, s.seq)
	if n == 0 {
		return 0, nil, fmt.Errorf("%w: segment %s, offset %d: the record fails its checksum", ErrCorrupt, path, p.off())
	}
	return typ, payload, nil
}

func (l *Log) seg(seq uint64) *segment {
	i, ok := slices.BinarySearchFunc(l.segs, seq, func(s *segment, q uint64) int { return cmp.Compare(s.seq, q) })
	if !ok {
		return nil
	}
	return l.segs[i]
}

// ActiveSeq is the sequence number of the segment records go to now.
func (l *Log) ActiveSeq() uint64 { return l.active().seq }

// Release gives up every segment older than seq (never the active one):
// the caller no longer needs their records, and the records it still
// needs that they held are in the prologue of a newer segment. Released
// segments are recycled as spares or deleted.
func (l *Log) Release(seq uint64) error {
	if l.failed != nil {
		return l.refused()
	}
	n := 0
	for n < len(l.segs)-1 && l.segs[n].seq < seq {
		n++
	}
	for _, s := range l.segs[:n] {
		if s.rf != nil {
			s.rf.Close()
			s.rf = nil
		}
		if err := l.prep.recycle(s.name); err != nil {
			return err
		}
	}
	l.segs = append(l.segs[:0], l.segs[n:]...)
	return nil
}

// Segments is how many segments are live.
func (l *Log) Segments() int { return len(l.segs) }

// Close writes and syncs what is staged and closes the files.
func (l *Log) Close() error {
	var err error
	if l.failed == nil {
		err = l.Write(true)
	}
	l.prep.stop()
	l.closeFiles()
	return err
}

func (l *Log) closeFiles() {
	if l.wf != nil {
		l.wf.Close()
		l.wf = nil
	}
	for _, s := range l.segs {
		if s.rf != nil {
			s.rf.Close()
			s.rf = nil
		}
	}
	if l.prep != nil {
		l.prep.stop()
	}
}

// Remove deletes a log directory and everything in it (a restored target
// starts a new log).
func Remove(fs vfs.FS, dir string) error {
	if err := fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove raft log %s: %w", dir, err)
	}
	return nil
}

// preparer keeps whole, synced segment files ready (spares), written with
// zeros on a goroutine of its own or recycled from released segments.
type preparer struct {
	fs   vfs.FS
	dir  string
	size int64

	mu      sync.Mutex
	cond    *sync.Cond
	spares  []string // ready files, by name in dir
	nextID  int
	busy    bool // a spare is being written
	err     error
	stopped bool
	running bool
	done    chan struct{}
}

func newPreparer(fs vfs.FS, dir string, size int64, spares []string) *preparer {
	p := &preparer{fs: fs, dir: dir, size: size, spares: spares, done: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	for _, s := range spares {
		if id, err := strconv.Atoi(strings.TrimPrefix(s, sparePrefix)); err == nil && id >= p.nextID {
			p.nextID = id + 1
		}
	}
	return p
}

func (p *preparer) start() {
	p.mu.Lock()
	p.running = true
	p.mu.Unlock()
	go p.run()
}

// run keeps one spare ready.
func (p *preparer) run() {
	defer close(p.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	for {
		for !p.stopped && (len(p.spares) > 0 || p.err != nil) {
			p.cond.Wait()
		}
		if p.stopped {
			return
		}
		id := p.nextID
		p.nextID++
		p.busy = true
		p.mu.Unlock()
		name, err := p.write(id, p.size)
		p.mu.Lock()
		p.busy = false
		if err != nil {
			p.err = err
		} else {
			p.spares = append(p.spares, name)
		}
		p.cond.Broadcast()
	}
}

// noSpace adds to an error of a full device what to do about it: the log
// writes its segments at full size before use, so a full device stops the
// replica at the next segment, not in the middle of a record.
func noSpace(err error, dir string) error {
	if !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	return fmt.Errorf("%w: the device holding %s is full; free space there (or move the target to a larger device) and start the target again", err, dir)
}

// write makes one spare: zeros, synced, then renamed into place.
func (p *preparer) write(id int, size int64) (string, error) {
	tmp := filepath.Join(p.dir, fmt.Sprintf("%s%d", prepPrefix, id))
	f, err := p.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return "", fmt.Errorf("create raft log segment %s: %w", tmp, err)
	}
	zero := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zero)) {
		n := min(int64(len(zero)), size-off)
		if _, err := f.Write(zero[:n]); err != nil {
			f.Close()
			p.fs.Remove(tmp)
			return "", noSpace(fmt.Errorf("write raft log segment %s: %w", tmp, err), p.dir)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		p.fs.Remove(tmp)
		return "", fmt.Errorf("sync raft log segment %s: %w", tmp, err)
	}
	f.Close()
	name := fmt.Sprintf("%s%d", sparePrefix, id)
	if err := p.fs.Rename(tmp, filepath.Join(p.dir, name)); err != nil {
		return "", fmt.Errorf("rename raft log segment %s: %w", tmp, err)
	}
	return name, nil
}

// take renames a spare of at least size bytes to path and syncs the
// directory, making one first if none is ready.
func (p *preparer) take(path string, size int64) error {
	p.mu.Lock()
	var name string
	for {
		if i := p.fit(size); i >= 0 {
			name = p.spares[i]
			p.spares = slices.Delete(p.spares, i, i+1)
			break
		}
		if size > p.size || !p.running || p.err != nil || (!p.busy && len(p.spares) > 0) {
			// Nothing suitable will come from the goroutine: make one
			// here (an oversized record, Open, or a failed preparer,
			// which is retried this way).
			id := p.nextID
			p.nextID++
			p.err = nil
			p.mu.Unlock()
			n, err := p.write(id, max(size, p.size))
			if err != nil {
				return err
			}
			p.mu.Lock()
			name = n
			break
		}
		p.cond.Wait()
	}
	p.cond.Broadcast()
	p.mu.Unlock()
	if err := p.fs.Rename(filepath.Join(p.dir, name), path); err != nil {
		return fmt.Errorf("rename raft log segment into %s: %w", path, err)
	}
	return p.syncDir()
}

// fit is the index of a spare of at least size bytes, or -1.
func (p *preparer) fit(size int64) int {
	for i, n := range p.spares {
		st, err := p.fs.Stat(filepath.Join(p.dir, n))
		if err == nil && st.Size() >= size {
			return i
		}
	}
	return -1
}

func (p *preparer) syncDir() error { return syncDir(p.fs, p.dir) }

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync directory %s: %w", dir, err)
	}
	return nil
}

// recycle turns a released segment into a spare, or deletes it when
// enough spares are ready.
func (p *preparer) recycle(name string) error {
	path := filepath.Join(p.dir, name)
	p.mu.Lock()
	keep := len(p.spares) < maxSpares
	id := p.nextID
	if keep {
		p.nextID++
	}
	p.mu.Unlock()
	if !keep {
		if err := p.fs.Remove(path); err != nil {
			return fmt.Errorf("remove raft log segment %s: %w", path, err)
		}
		return nil
	}
	spare := fmt.Sprintf("%s%d", sparePrefix, id)
	if err := p.fs.Rename(path, filepath.Join(p.dir, spare)); err != nil {
		return fmt.Errorf("recycle raft log segment %s: %w", path, err)
	}
	p.mu.Lock()
	p.spares = append(p.spares, spare)
	p.cond.Broadcast()
	p.mu.Unlock()
	return nil
}

func (p *preparer) stop() {
	p.mu.Lock()
	running := p.running
	p.stopped = true
	p.running = false
	p.cond.Broadcast()
	p.mu.Unlock()
	if running {
		<-p.done
	}
}
