package mdt

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"time"

	"nacre/internal/kv"
	"nacre/internal/target"
)

// File-level backup and restore of an MDT (`nacre mdt backup|restore`),
// as Lustre's administrators back up an ldiskfs MDT with tar: every object
// with its attributes, directory entries and xattrs, and the other state
// files, OI included. A restore writes the objects back under NEW local
// keys (as a restored file system gives files new inode numbers), so the
// OI it restores is stale: every FID maps to a key that no longer holds
// its object. The restore leaves a marker (K "m"); the MDS notices it when
// it leads and runs an OI scrub at full speed to rebuild the OI (seed
// 003's restore scenario). The root keeps its reserved local key 1.
//
// Format: the line "NACRE-MDT-BACKUP 1\n", a JSON header line, then
// records (kind byte, key length uvarint, key, value length uvarint,
// value) and an end record (kind 'E') holding the CRC-32C of every byte
// before it. Kinds: 'O' object (key: old local key), 'S' any other state
// key (verbatim). Records of one object's entries and xattrs follow it.

const backupMagic = "NACRE-MDT-BACKUP 1\n"

// BackupHeader describes a backup.
type BackupHeader struct {
	Fsname  string    `json:"fsname"`
	Index   uint32    `json:"index"`
	UUID    string    `json:"uuid"`
	Created time.Time `json:"created"`
	Objects uint64    `json:"objects"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type backupWriter struct {
	w   *bufio.Writer
	crc uint32
	n   uint64
}

func (b *backupWriter) write(p []byte) error {
	b.crc = crc32.Update(b.crc, castagnoli, p)
	_, err := b.w.Write(p)
	return err
}

func (b *backupWriter) record(kind byte, k, v []byte) error {
	var hdr [1 + 2*binary.MaxVarintLen64]byte
	hdr[0] = kind
	n := 1 + binary.PutUvarint(hdr[1:], uint64(len(k)))
	if err := b.write(hdr[:n]); err != nil {
		return err
	}
	if err := b.write(k); err != nil {
		return err
	}
	n = binary.PutUvarint(hdr[:], uint64(len(v)))
	if err := b.write(hdr[:n]); err != nil {
		return err
	}
	b.n++
	return b.write(v)
}

// stateRanges are the key ranges a backup holds besides objects, entries
// and xattrs: counters, OI, reply cache, destroy queue, open orphans.
func isBackedUpState(k []byte) bool {
	if len(k) == 0 {
		return false
	}
	switch k[0] {
	case pfxMeta, pfxOI, pfxReply, pfxUnlink, pfxPending:
		return true
	}
	return false
}

// Backup writes a file-level backup of the MDT store db (opened read-only
// by the caller, with the server stopped) to w.
func Backup(db *kv.DB, id target.Identity, w io.Writer) (*BackupHeader, error) {
	snap := db.NewSnapshot()
	defer snap.Close()
	h := &BackupHeader{Fsname: id.Fsname, Index: id.Index, UUID: id.UUID, Created: time.Now().UTC()}
	if v, err := snap.Get(keyInodes); err == nil {
		h.Objects = u64(v)
	}
	bw := &backupWriter{w: bufio.NewWriterSize(w, 1<<20)}
	hb, _ := json.Marshal(h)
	if err := bw.write([]byte(backupMagic)); err != nil {
		return nil, err
	}
	if err := bw.write(append(hb, '\n')); err != nil {
		return nil, err
	}
	// Objects, each followed by its entries and xattrs (a tar walks the
	// same way: a directory, then what is in it).
	it, err := snap.NewIter([]byte{pfxObj}, kv.PrefixEnd([]byte{pfxObj}))
	if err != nil {
		return nil, err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			continue
		}
		local := binary.BigEndian.Uint64(k[1:])
		if err := bw.record('O', k, it.Value()); err != nil {
			it.Close()
			return nil, err
		}
		for _, p := range [][]byte{DirentPrefix(local), xattrPrefix(local)} {
			sub, err := snap.NewIter(p, kv.PrefixEnd(p))
			if err != nil {
				it.Close()
				return nil, err
			}
			for sub.First(); sub.Valid(); sub.Next() {
				if err := bw.record('S', sub.Key(), sub.Value()); err != nil {
					sub.Close()
					it.Close()
					return nil, err
				}
			}
			sub.Close()
		}
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return nil, err
	}
	all, err := snap.NewIter(StateLower, nil)
	if err != nil {
		return nil, err
	}
	for all.First(); all.Valid(); all.Next() {
		if isBackedUpState(all.Key()) {
			if err := bw.record('S', all.Key(), all.Value()); err != nil {
				all.Close()
				return nil, err
			}
		}
	}
	err = all.Error()
	all.Close()
	if err != nil {
		return nil, err
	}
	if err := bw.write([]byte{'E'}); err != nil {
		return nil, err
	}
	crc := bw.crc
	var cb [4]byte
	binary.BigEndian.PutUint32(cb[:], crc)
	if _, err := bw.w.Write(cb[:]); err != nil {
		return nil, err
	}
	return h, bw.w.Flush()
}

// Restore replaces the state of the MDT store db (server stopped) with a
// backup, giving every object but the root a new local key. The Raft log
// starts empty. It returns the backup's header. A backup of another MDT
// (another uuid: every `nacre up` cluster is named "nacre") is refused
// over a store that holds objects besides the root, unless force: the
// restore would replace a namespace whose files live on this cluster's
// OSTs with one whose files do not. Over an empty store (one reformatted
// to restore onto, as seed 003's scenario) it is what is asked.
//
// beforeWipe (may be nil) runs once the backup has been read whole and
// checked, right before the store's state is wiped: the caller removes
// the group's Raft log there, so that no interruption leaves a log whose
// store no longer records it (the group would refuse to start) beside a
// store that is intact.
func Restore(db *kv.DB, id target.Identity, r io.Reader, force bool, beforeWipe func() error) (*BackupHeader, error) {
	h, recs, maxLocal, err := readBackup(r)
	if err != nil {
		return nil, err
	}
	if err := h.CheckFor(id); err != nil {
		return nil, err
	}
	if h.UUID != id.UUID && !force {
		n, err := countObjects(db)
		if err != nil {
			return nil, err
		}
		if n > 1 {
			return nil, fmt.Errorf("the backup (%d objects, backed up %s) is of another %s (uuid %s), and this one (uuid %s) holds %d objects, "+
				"which it would replace: their files' data is on this cluster's OSTs, the backup's is not. Restore a backup of this MDT, "+
				"or give --force to replace them anyway", h.Objects, h.Created.Format(time.RFC3339), id.Label(), h.UUID, id.UUID, n)
		}
	}
	// New local keys: every object moves above every old key.
	shift := maxLocal + 1
	newLocal := func(l uint64) uint64 {
		if l == rootLocal || l >= farLocal {
			return l
		}
		return l + shift
	}
	if beforeWipe != nil {
		if err := beforeWipe(); err != nil {
			return nil, err
		}
	}
	// Wipe the Raft log and the state (keep the store's identity).
	wipe := db.NewWriteBatch()
	wipe.DeleteRange(RaftPrefix, kv.PrefixEnd(RaftPrefix))
	wipe.DeleteRange(StateLower, []byte{0xff})
	if err := wipe.Commit(true); err != nil {
		wipe.Close()
		return nil, err
	}
	wipe.Close()
	b := db.NewWriteBatch()
	flush := func(force bool) error {
		if b.Len() < 8<<20 && !force {
			return nil
		}
		if err := b.Commit(true); err != nil {
			return err
		}
		b.Close()
		b = db.NewWriteBatch()
		return nil
	}
	var next uint64 = rootLocal + 1
	for _, r := range recs {
		k := r.k
		switch {
		case r.kind == 'O' && len(k) == 9:
			nl := newLocal(binary.BigEndian.Uint64(k[1:]))
			k = ObjKey(nl)
			next = max(next, nl+1)
		case len(k) >= 9 && (k[0] == pfxDirent || k[0] == pfxXattr):
			k = append([]byte{k[0]}, binary.BigEndian.AppendUint64(nil, newLocal(binary.BigEndian.Uint64(k[1:9])))...)
			k = append(k, r.k[9:]...)
		case k[0] == pfxPending && len(r.v) == 16:
			r.v = binary.BigEndian.AppendUint64(append([]byte(nil), r.v[:8]...), newLocal(binary.BigEndian.Uint64(r.v[8:])))
		case bytes.Equal(k, keyApplied):
			r.v = putU64(0) // the Raft log starts again
		case bytes.Equal(k, keyNextLocal):
			continue
		}
		b.Set(k, r.v)
		if err := flush(false); err != nil {
			return nil, err
		}
	}
	b.Set(keyNextLocal, putU64(next))
	hb, _ := json.Marshal(h)
	b.Set(KeyRestored, hb)
	if err := b.Commit(true); err != nil {
		b.Close()
		return nil, err
	}
	b.Close()
	return h, nil
}

// CheckBackup reads a backup through and checks it (format, every
// record, the CRC of its end record) without restoring anything: a
// restore checks the backup before it touches the store.
func CheckBackup(r io.Reader) (*BackupHeader, error) {
	h, _, _, err := readBackup(r)
	return h, err
}

// CheckFor refuses a backup of another MDT than id's (file system name
// and index; another uuid is Restore's to judge).
func (h *BackupHeader) CheckFor(id target.Identity) error {
	if h.Fsname != id.Fsname || h.Index != id.Index {
		return fmt.Errorf("the backup is of %s-MDT%04x, this is %s-MDT%04x", h.Fsname, h.Index, id.Fsname, id.Index)
	}
	return nil
}

// backupRec is one record of a backup.
type backupRec struct {
	kind byte
	k, v []byte
}

// readBackup reads a whole backup: its header, its records and the
// largest old local key of its objects. A backup that ends early (an
// interrupted backup, a partial copy) is named truncated, with where it
// ends.
func readBackup(r io.Reader) (*BackupHeader, []backupRec, uint64, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var crc uint32
	var off int64 // bytes read so far
	truncated := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("the backup is truncated: it ends after %d bytes, before its end record, so it is incomplete "+
				"(a backup that was interrupted or failed, or a partial copy); restore a whole copy", off)
		}
		return fmt.Errorf("read the backup: %w", err)
	}
	read := func(p []byte) error {
		n, err := io.ReadFull(br, p)
		off += int64(n)
		if err != nil {
			return truncated(err)
		}
		crc = crc32.Update(crc, castagnoli, p)
		return nil
	}
	magic := make([]byte, len(backupMagic))
	n, err := io.ReadFull(br, magic)
	off += int64(n)
	const family = "NACRE-MDT-BACKUP "
	switch {
	case string(magic) == backupMagic:
		crc = crc32.Update(crc, castagnoli, magic)
	case n > len(family) && string(magic[:len(family)]) == family:
		v, _, _ := strings.Cut(string(magic[len(family):n]), "\n")
		return nil, nil, 0, fmt.Errorf("the backup is of format version %q, and this nacre reads version 1: restore it with the release that wrote it", v)
	case err != nil && n > 0 && string(magic[:n]) == backupMagic[:n]:
		return nil, nil, 0, truncated(err)
	case err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF):
		return nil, nil, 0, truncated(err)
	default:
		return nil, nil, 0, errors.New("not a Nacre MDT backup (bad magic): give a file `nacre mdt backup` wrote")
	}
	line, err := br.ReadBytes('\n')
	off += int64(len(line))
	if err != nil {
		return nil, nil, 0, truncated(err)
	}
	crc = crc32.Update(crc, castagnoli, line)
	h := &BackupHeader{}
	if err := json.Unmarshal(line, h); err != nil {
		return nil, nil, 0, fmt.Errorf("backup corrupt: its header: %w", err)
	}
	uvarint := func() (uint64, error) {
		var buf []byte
		for {
			b, err := br.ReadByte()
			if err != nil {
				return 0, truncated(err)
			}
			off++
			buf = append(buf, b)
			if b < 0x80 || len(buf) == binary.MaxVarintLen64 {
				break
			}
		}
		crc = crc32.Update(crc, castagnoli, buf)
		v, n := binary.Uvarint(buf)
		if n <= 0 {
			return 0, fmt.Errorf("backup corrupt: bad length at byte %d", off)
		}
		return v, nil
	}
	var recs []backupRec
	var maxLocal uint64
	for {
		kind := []byte{0}
		if err := read(kind); err != nil {
			return nil, nil, 0, err
		}
		if kind[0] == 'E' {
			want := crc
			var cb [4]byte
			if err := read(cb[:]); err != nil {
				return nil, nil, 0, err
			}
			if binary.BigEndian.Uint32(cb[:]) != want {
				return nil, nil, 0, errors.New("backup corrupt: CRC mismatch (the file was changed or damaged after it was written); restore another copy")
			}
			break
		}
		kl, err := uvarint()
		if err != nil {
			return nil, nil, 0, err
		}
		if kl > 1<<16 {
			return nil, nil, 0, fmt.Errorf("backup corrupt: key length %d at byte %d", kl, off)
		}
		k := make([]byte, kl)
		if err := read(k); err != nil {
			return nil, nil, 0, err
		}
		vl, err := uvarint()
		if err != nil {
			return nil, nil, 0, err
		}
		if vl > 64<<20 {
			return nil, nil, 0, fmt.Errorf("backup corrupt: value length %d at byte %d", vl, off)
		}
		v := make([]byte, vl)
		if err := read(v); err != nil {
			return nil, nil, 0, err
		}
		if kind[0] == 'O' && len(k) == 9 {
			maxLocal = max(maxLocal, binary.BigEndian.Uint64(k[1:]))
		}
		recs = append(recs, backupRec{kind[0], k, v})
	}
	return h, recs, maxLocal, nil
}

// countObjects counts the objects (inodes) of an MDT store: the count
// it keeps, else by its keys.
func countObjects(db *kv.DB) (int, error) {
	if v, err := db.Get(keyInodes); err == nil && len(v) == 8 {
		return int(u64(v)), nil
	}
	p := []byte{pfxObj}
	it, err := db.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return 0, err
	}
	defer it.Close()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	return n, it.Error()
}
