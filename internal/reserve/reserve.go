// Package reserve keeps a target's own store from being starved of disk
// space by what clients write.
//
// A target's store (pebble, and an MDT's Raft log) must always be able to
// flush a memtable, start a log segment and write its manifest. When file
// data or new names take the device's last bytes, the store cannot do
// that: pebble then retries its flush forever, and on the next start it
// cannot even open, since replaying its write-ahead log needs a flush too.
// So a target keeps a reserve (Lustre's OSTs keep reserved_mb_low for the
// same reason): below it, the writes clients ask for fail with ENOSPC and
// the target itself goes on working, so that removing files, the checker
// and a restart all still work.
package reserve

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"nacre/internal/layout"
)

// Bytes is the space a target keeps free for its store on a device of
// total bytes: two memtables of memtable bytes (the one being flushed and
// the one taking writes meanwhile) and 16 MiB for log segments, manifests
// and the target's own log, or 0.5 % of the device if that is more (room
// for compactions on a large store).
func Bytes(total, memtable uint64) uint64 {
	return max(2*memtable+16<<20, total/200)
}

// FullMargin is what an OST of total bytes must have available (its
// reserve already taken out) for the MDS to give it new objects: files
// placed on it just before still need room.
func FullMargin(total uint64) uint64 { return max(total/1000, 4<<20) }

// Inodes is the number of free inodes a target keeps for its
// store, on a file system that counts inodes: a flush and a compaction
// each make new files before they remove old ones, a log needs a new
// segment, a manifest rotates. An OST makes one file per object written
// (and a directory per 256), so its writes could take the last ones; the
// store would then be stuck as when out of bytes.
const Inodes = 256

// Usage is what statfs says of a device.
type Usage struct {
	Total, Free, Avail uint64 // Avail: what an unprivileged writer may use
	// Files and FilesFree count inodes; a file system without an inode
	// limit (btrfs, tmpfs with nr_inodes=0) reports Files 0.
	Files, FilesFree uint64
}

// Statfs reports the usage of the device holding dir.
func Statfs(dir string) (Usage, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return Usage{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize)
	return Usage{Total: st.Blocks * bs, Free: st.Bfree * bs, Avail: st.Bavail * bs, Files: st.Files, FilesFree: st.Ffree}, nil
}

// RefreshEvery bounds how stale the guard's view of the device may get;
// what others write meanwhile (the store, logs) is what the reserve
// absorbs.
const RefreshEvery = 100 * time.Millisecond

// Guard admits writes while the device keeps its reserve. It is safe for
// concurrent use.
type Guard struct {
	dir      string
	label    string // the target, for messages
	memtable uint64
	statfs   func(string) (Usage, error)
	now      func() time.Time

	mu    sync.Mutex
	at    time.Time // of the last statfs
	usage Usage
	// inflight counts bytes admitted whose write has not returned yet
	// (statfs cannot see them); landed counts those that returned since
	// the last statfs (the one before may not have seen them either).
	inflight, landed uint64
	// files counts the inodes admitted since the last statfs.
	files uint64
}

// NewGuard guards the device of dir for the target named label, whose
// store uses memtables of memtable bytes. statfs may be nil (Statfs).
func NewGuard(dir, label string, memtable uint64, statfs func(string) (Usage, error)) *Guard {
	if statfs == nil {
		statfs = Statfs
	}
	return &Guard{dir: dir, label: label, memtable: memtable, statfs: statfs, now: time.Now}
}

// Admit accounts for a write of n bytes, or refuses it with an error
// wrapping ENOSPC when it would leave less than the reserve free. A
// caller that was admitted calls Done(n) once its write returned.
func (g *Guard) Admit(n uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.look(func() bool { return g.fits(n) }) {
		// Not knowing is no reason to refuse a write.
		g.inflight += n
		return nil
	}
	if !g.fits(n) {
		return &FullError{Label: g.label, Dir: g.dir, Usage: g.usage, Reserve: Bytes(g.usage.Total, g.memtable)}
	}
	g.inflight += n
	return nil
}

// AdmitFiles accounts for n new files or directories, or refuses them with
// an error wrapping ENOSPC when they would leave fewer than Inodes
// free inodes.
func (g *Guard) AdmitFiles(n uint64) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.look(func() bool { return g.filesFit(n) }) {
		g.files += n
		return nil
	}
	if !g.filesFit(n) {
		return &FullError{Label: g.label, Dir: g.dir, Usage: g.usage, Reserve: Inodes, Inodes: true}
	}
	g.files += n
	return nil
}

// filesFit says whether n more inodes leave the reserve free by the last
// view.
func (g *Guard) filesFit(n uint64) bool {
	return g.usage.Files == 0 || g.files+n+Inodes <= g.usage.FilesFree
}

// look takes a new view of the device (with g.mu held) when the last is
// old, or when it would refuse what fits says (space may have been freed
// since). It reports false if the device cannot be read.
func (g *Guard) look(fits func() bool) bool {
	now := g.now()
	if now.Sub(g.at) < RefreshEvery && fits() {
		return true
	}
	u, err := g.statfs(g.dir)
	if err != nil {
		return false
	}
	g.usage, g.at, g.landed, g.files = u, now, 0, 0
	return true
}

// Done notes that an admitted write of n bytes returned.
func (g *Guard) Done(n uint64) {
	g.mu.Lock()
	g.inflight -= min(n, g.inflight)
	g.landed += n
	g.mu.Unlock()
}

// fits says whether n more bytes leave the reserve free by the last view.
func (g *Guard) fits(n uint64) bool {
	return g.landed+g.inflight+n+Bytes(g.usage.Total, g.memtable) <= g.usage.Avail
}

// FullError says that a target keeps its reserve and refuses a write.
type FullError struct {
	Label   string
	Dir     string
	Usage   Usage
	Reserve uint64 // bytes, or inodes if Inodes
	Inodes  bool   // out of inodes rather than bytes
}

func (e *FullError) Error() string {
	if e.Inodes {
		return fmt.Sprintf("%s is out of inodes: %d free of %d on the device of %s, and it keeps %d for its own store; remove files, or add or grow a target",
			e.Label, e.Usage.FilesFree, e.Usage.Files, e.Dir, e.Reserve)
	}
	return fmt.Sprintf("%s is full: %sB free of %sB on the device of %s, and it keeps %sB for its own store; remove files, or add or grow a target",
		e.Label, layout.FormatSize(e.Usage.Avail), layout.FormatSize(e.Usage.Total), e.Dir, layout.FormatSize(e.Reserve))
}

// Public is the message for a client: the same without the server's
// paths.
func (e *FullError) Public() string {
	if e.Inodes {
		return fmt.Sprintf("%s is out of inodes: %d free of %d, and it keeps %d for its own store; remove files, or add or grow a target",
			e.Label, e.Usage.FilesFree, e.Usage.Files, e.Reserve)
	}
	return fmt.Sprintf("%s is full: %sB free of %sB, and it keeps %sB for its own store; remove files, or add or grow a target",
		e.Label, layout.FormatSize(e.Usage.Avail), layout.FormatSize(e.Usage.Total), layout.FormatSize(e.Reserve))
}

// Unwrap makes errors.Is(err, syscall.ENOSPC) hold.
func (e *FullError) Unwrap() error { return syscall.ENOSPC }

// ShortOfReserve says, for a target named label whose store in dir uses
// memtables of memtable bytes, whether its device already has less free
// than the target keeps: such a target starts and serves reads, but
// refuses whatever clients write until space is freed there, which an
// admin who just started it would not expect. The message is empty when
// the device has room or cannot be read.
func ShortOfReserve(dir, label string, memtable uint64, statfs func(string) (Usage, error)) string {
	if statfs == nil {
		statfs = Statfs
	}
	u, err := statfs(dir)
	if err != nil {
		return ""
	}
	if r := Bytes(u.Total, memtable); u.Avail < r {
		return fmt.Sprintf("%s's device (%s) has %sB free of %sB, less than the %sB it keeps for its own store: it refuses what clients write until more is free there; give it a larger device or one of its own",
			label, dir, layout.FormatSize(u.Avail), layout.FormatSize(u.Total), layout.FormatSize(r))
	}
	return ""
}

// openInodes is what opening a store needs in inodes: a new log, a
// manifest and options file, and the tables a replay flushes.
const openInodes = 16

// CheckOpen refuses to open a store whose write-ahead log cannot be
// replayed for lack of space: pebble flushes what it replays, and with no
// room for that it waits forever, silently, instead of failing. What a
// replay writes is at most the unflushed memtables, which the log files
// hold; pebble also keeps up to three obsolete logs at full size for
// reuse, which a replay does not touch, so the need is capped at two
// memtables (the reserve is more than that, so a target that kept its
// reserve always opens).
func CheckOpen(storeDir, label string, memtable uint64, statfs func(string) (Usage, error)) error {
	if statfs == nil {
		statfs = Statfs
	}
	if u, err := statfs(storeDir); err == nil && u.Files > 0 && u.FilesFree < openInodes {
		return fmt.Errorf("%s cannot open its store %s: opening it makes new files (a log, a manifest, the tables a replay flushes) and the device has %d free inodes of %d; remove files there and start it again",
			label, storeDir, u.FilesFree, u.Files)
	}
	logs, _ := filepath.Glob(filepath.Join(storeDir, "*.log"))
	var need uint64
	for _, l := range logs {
		if fi, err := os.Stat(l); err == nil {
			need += uint64(fi.Size())
		}
	}
	if need == 0 {
		return nil
	}
	need = min(need, 2*memtable) + 4<<20 // and a manifest, an options file, a new log
	u, err := statfs(storeDir)
	if err != nil {
		return nil // let the open say what is wrong
	}
	if u.Avail < need {
		return fmt.Errorf("%s cannot open its store %s: replaying its write-ahead log needs about %sB free on that device, which has %sB; free space there and start it again",
			label, storeDir, layout.FormatSize(need), layout.FormatSize(u.Avail))
	}
	return nil
}
