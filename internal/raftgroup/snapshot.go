package raftgroup

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"

	"nacre/internal/kv"
)

// Snapshots.
//
// Raft's snapshot (what Storage.Snapshot returns and MsgSnap carries) is
// only metadata here: index, term and configuration as of the leader's
// applied index, plus the address book. The state machine image travels
// next to it: the transport asks the leader's state machine for an image
// when it sends the MsgSnap, streams it, and the receiver spools it before
// it hands the MsgSnap to raft. The image may be newer than the metadata
// (the leader kept applying); the receiver's state machine then reports a
// higher applied index after Restore, and the loop skips the entries the
// image already covers as raft re-delivers them.
//
// SnapshotKV and RestoreKV are a ready-made image format for a state
// machine that keeps its state in key ranges of the shared kv.DB.

// KeyRange is the keys in [Lower, Upper); nil bounds are open.
type KeyRange struct {
	Lower, Upper []byte
}

func (r KeyRange) contains(k []byte) bool {
	return (r.Lower == nil || bytes.Compare(k, r.Lower) >= 0) && (r.Upper == nil || bytes.Compare(k, r.Upper) < 0)
}

// The image format of SnapshotKV:
//
//	"NACRKV1\n"
//	{ 0x01 | uvarint(len(key)) | key | uvarint(len(value)) | value }
//	0x00 | CRC-32C (big endian) of every byte before it
const kvImageMagic = "NACRKV1\n"

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// SnapshotKV returns an image of every key in ranges, read from one
// consistent view of db taken now. Reading it streams the keys; Close
// releases the view.
func SnapshotKV(db *kv.DB, ranges ...KeyRange) SnapshotData {
	img := &kvImage{snap: db.NewSnapshot(), ranges: ranges, crc: crc32.New(crcTable)}
	img.buf = append(img.buf, kvImageMagic...)
	img.crc.Write(img.buf)
	return img
}

type kvImage struct {
	snap   *kv.Snapshot
	ranges []KeyRange
	next   int // next range to open
	it     *kv.Iter
	buf    []byte
	off    int
	crc    hash.Hash32
	done   bool
	err    error
}

func (m *kvImage) Read(p []byte) (int, error) {
	for m.off == len(m.buf) {
		if m.err != nil {
			return 0, m.err
		}
		if m.done {
			return 0, io.EOF
		}
		m.buf, m.off = m.buf[:0], 0
		m.err = m.fill()
	}
	n := copy(p, m.buf[m.off:])
	m.off += n
	return n, nil
}

// fill encodes records into buf until it holds about 256 KiB.
func (m *kvImage) fill() error {
	for len(m.buf) < 256<<10 {
		if m.it == nil {
			if m.next == len(m.ranges) {
				m.buf = append(m.buf, 0)
				m.crc.Write(m.buf)
				m.buf = binary.BigEndian.AppendUint32(m.buf, m.crc.Sum32())
				m.done = true
				return nil
			}
			r := m.ranges[m.next]
			m.next++
			it, err := m.snap.NewIter(r.Lower, r.Upper)
			if err != nil {
				return fmt.Errorf("snapshot image: %w", err)
			}
			m.it = it
			if !it.First() {
				if err := m.closeIter(); err != nil {
					return err
				}
				continue
			}
		}
		k, v := m.it.Key(), m.it.Value()
		m.buf = append(m.buf, 1)
		m.buf = binary.AppendUvarint(m.buf, uint64(len(k)))
		m.buf = append(m.buf, k...)
		m.buf = binary.AppendUvarint(m.buf, uint64(len(v)))
		m.buf = append(m.buf, v...)
		if !m.it.Next() {
			if err := m.closeIter(); err != nil {
				return err
			}
		}
	}
	m.crc.Write(m.buf)
	return nil
}

func (m *kvImage) closeIter() error {
	err := m.it.Error()
	m.it.Close()
	m.it = nil
	if err != nil {
		return fmt.Errorf("snapshot image: %w", err)
	}
	return nil
}

func (m *kvImage) Close() error {
	if m.it != nil {
		m.it.Close()
		m.it = nil
	}
	if m.snap != nil {
		err := m.snap.Close()
		m.snap = nil
		return err
	}
	return nil
}

// ErrBadImage: a snapshot image is truncated, corrupt, or holds keys
// outside the ranges it should restore.
var ErrBadImage = errors.New("raftgroup: bad snapshot image")

// RestoreKV replaces every key in ranges by the keys of an image written
// by SnapshotKV, in one synced batch: the store holds the old state or
// the new one, never a mix. The image must hold nothing outside ranges.
func RestoreKV(db *kv.DB, r io.Reader, ranges ...KeyRange) error {
	br := &imageReader{br: bufio.NewReaderSize(r, 256<<10)}
	magic := make([]byte, len(kvImageMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != kvImageMagic {
		return fmt.Errorf("%w: no image header (%v)", ErrBadImage, err)
	}
	b := db.NewWriteBatch()
	defer b.Close()
	for _, rg := range ranges {
		if err := deleteRange(db, b, rg); err != nil {
			return err
		}
	}
	var key, val []byte
	for {
		tag, err := br.ReadByte()
		if err != nil {
			return fmt.Errorf("%w: truncated after %d bytes: %v", ErrBadImage, br.n, err)
		}
		if tag == 0 {
			break
		}
		if tag != 1 {
			return fmt.Errorf("%w: unknown record tag %#x at byte %d", ErrBadImage, tag, br.n)
		}
		if key, err = readChunk(br, key); err != nil {
			return err
		}
		if val, err = readChunk(br, val); err != nil {
			return err
		}
		in := false
		for _, rg := range ranges {
			if rg.contains(key) {
				in = true
				break
			}
		}
		if !in {
			return fmt.Errorf("%w: key %q outside the restored ranges", ErrBadImage, key)
		}
		if err := b.Set(key, val); err != nil {
			return err
		}
	}
	want := br.crc // everything up to and including the end tag
	var sum [4]byte
	if _, err := io.ReadFull(br, sum[:]); err != nil {
		return fmt.Errorf("%w: no checksum: %v", ErrBadImage, err)
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return fmt.Errorf("%w: checksum %08x, computed %08x", ErrBadImage, got, want)
	}
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("restore snapshot image: %w", err)
	}
	return nil
}

// deleteRange stages the deletion of every key in r. An open upper bound
// becomes a range deletion up to a key of 64 0xff bytes plus point
// deletions of the (unlikely) keys beyond it.
func deleteRange(db *kv.DB, b *kv.Batch, r KeyRange) error {
	lo, hi := r.Lower, r.Upper
	if lo == nil {
		lo = []byte{}
	}
	if hi == nil {
		hi = bytes.Repeat([]byte{0xff}, 64)
		it, err := db.NewIter(hi, nil)
		if err != nil {
			return err
		}
		for it.First(); it.Valid(); it.Next() {
			if err := b.Delete(it.Key()); err != nil {
				it.Close()
				return err
			}
		}
		err = it.Error()
		it.Close()
		if err != nil {
			return fmt.Errorf("restore snapshot image: %w", err)
		}
	}
	if bytes.Compare(lo, hi) >= 0 {
		return nil
	}
	return b.DeleteRange(lo, hi)
}

func readChunk(br *imageReader, buf []byte) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("%w: truncated record at byte %d: %v", ErrBadImage, br.n, err)
	}
	if n > 1<<30 {
		return nil, fmt.Errorf("%w: record of %d bytes at byte %d", ErrBadImage, n, br.n)
	}
	if uint64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, fmt.Errorf("%w: truncated record at byte %d: %v", ErrBadImage, br.n, err)
	}
	return buf, nil
}

// imageReader reads an image, keeping the CRC-32C of, and counting, the
// bytes consumed so far.
type imageReader struct {
	br  *bufio.Reader
	crc uint32
	n   int64
}

func (r *imageReader) Read(p []byte) (int, error) {
	n, err := r.br.Read(p)
	r.crc = crc32.Update(r.crc, crcTable, p[:n])
	r.n += int64(n)
	return n, err
}

func (r *imageReader) ReadByte() (byte, error) {
	b, err := r.br.ReadByte()
	if err == nil {
		r.crc = crc32.Update(r.crc, crcTable, []byte{b})
		r.n++
	}
	return b, err
}

// spool holds a received image until the loop restores it: in memory, or
// in a file under Config.SnapshotDir.
type spool struct {
	buf  []byte
	path string
	size int64
}

func newSpool(dir string, r io.Reader) (*spool, error) {
	if dir == "" {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, fmt.Errorf("receive snapshot image: %w", err)
		}
		return &spool{buf: b, size: int64(len(b))}, nil
	}
	f, err := os.CreateTemp(dir, "raft-image-*")
	if err != nil {
		return nil, fmt.Errorf("receive snapshot image: %w", err)
	}
	n, err := io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return nil, fmt.Errorf("receive snapshot image into %s: %w", f.Name(), err)
	}
	return &spool{path: f.Name(), size: n}, nil
}

func (s *spool) open() (io.ReadCloser, error) {
	if s.path == "" {
		return io.NopCloser(bytes.NewReader(s.buf)), nil
	}
	f, err := os.Open(s.path)
	if err != nil {
		return nil, fmt.Errorf("open snapshot image: %w", err)
	}
	return f, nil
}

func (s *spool) release() {
	if s.path != "" {
		os.Remove(s.path)
	}
	s.buf = nil
}
