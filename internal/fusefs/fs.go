// Package fusefs mounts a Nacre file system through FUSE: a go-fuse raw
// API (fuse.RawFileSystem) adapter over the client library.
//
// # Inodes
//
// The kernel names inodes by node ids that this package hands out; a
// table maps each node id to its FID, with the kernel's lookup count
// (FORGET removes the entry when the count reaches zero). Node id 1 is the
// root; 2 and 3 are the virtual directories .nacre and .nacre/fid. The
// inode number users see (st_ino) is derived from the FID, as Lustre's
// fid_flatten does: seq<<24 + oid, with the sequence's high bits folded
// in; object ids stay below 2^17, so numbers are unique and stable across
// mounts and clients.
//
// # Caching and consistency
//
// Attributes and entries are cached by the kernel for the mount's
// timeouts (1 s by default); data in the kernel page cache. Buffered
// writes are written behind (writeback.go); O_APPEND handles bypass the
// page cache and the daemon places their appends (append.go).
// Close-to-open consistency between clients:
//
//   - close (FUSE FLUSH) of a file this client wrote makes the data
//     durable, records the size and mtime on the MDT (client.File.Close)
//     and has the MDS tell every other mounted client to drop its cached
//     attributes and pages of the file (LDLM Invalidate), waiting for
//     their acknowledgement;
//   - open fetches fresh attributes from the MDT; if size or mtime differ
//     from what the kernel holds, the kernel's attributes are invalidated
//     and its page cache is not kept (no FOPEN_KEEP_CACHE).
//
// The kernel caches no negative entry, but under a directory's lookup
// lock the daemon answers the lookup of a missing name itself, from the
// directory's list of names (lookuplock.go): the LOOKUP before a create
// costs no MDS request.
//
// # Open-unlinked files
//
// While this client has files open, it sends unlink and rename through
// the OpenFiles service with the FIDs it holds open, so the MDT keeps a
// file whose last name goes as an orphan; the last close releases it
// (internal/mdt/open.go). O_TMPFILE files are such orphans from birth.
//
// # Locks
//
// flock(2) and POSIX/OFD byte-range locks go to the MDS that owns the
// file (internal/ldlm), so they are coherent across clients. close(2)
// (FLUSH) releases the caller's POSIX locks on the file, the last close
// of an open file (RELEASE) its flock and OFD locks; a client's locks go
// when its session ends (unmount or death of the mount process). Locks
// are also cache coherency points, as on NFS (lock.go): data reaches the
// OSTs before a lock is released, and a granted lock drops the kernel's
// cache of the file.
//
// Errors are the client library's errno values; this package maps
// nothing else (errno.go).
package fusefs

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
)

// Reserved node ids.
const (
	rootID    = fuse.FUSE_ROOT_ID
	nacreID   = 2 // .nacre
	fidDirID  = 3 // .nacre/fid
	firstNode = 16
)

// Names of the virtual directories.
const (
	nacreDirName = ".nacre"
	fidDirName   = "fid"
	// lostFoundName is .nacre/lost+found, where the checker puts
	// orphans (fid.LostFound).
	lostFoundName = "lost+found"
)

// Options configure a mount.
type Options struct {
	// Timeouts of the kernel's caches (defaults: 1 s, 1 s, 0).
	AttrTimeout     time.Duration
	EntryTimeout    time.Duration
	NegativeTimeout time.Duration
	// Name identifies this mount in the MDS's logs.
	Name string
	Log  *slog.Logger
}

// FS is a mounted Nacre file system. It implements fuse.RawFileSystem.
type FS struct {
	fuse.RawFileSystem
	c    *client.Client
	sess *client.Session
	o    Options
	log  *slog.Logger
	// kernelChecks: the kernel checks permissions (default_permissions)
	kernelChecks bool
	// kernelACLs: the kernel checks permissions, ACLs included
	// (default_permissions with acl), before an open reaches the daemon.
	kernelACLs bool
	// noNameCache: the kernel caches no name (entry timeout 0). Without
	// default_permissions it checks no directory's search permission
	// itself; only a lookup, which the MDT answers as the caller, does.
	// A name it cached would let anyone through a directory they may not
	// search, so every walk looks each name up again.
	noNameCache bool
	srv         *fuse.Server

	// llMu guards ll, the directory lists kept under lookup locks
	// (lookuplock.go); taken after mu, never before.
	llMu sync.Mutex
	ll   lookupLocks

	mu      sync.Mutex
	nodes   map[uint64]*node
	byFID   map[fid.FID]*node
	nextID  uint64
	handles map[uint64]*handle
	nextFh  uint64
	files   map[fid.FID]*openFile
	dirs    map[fid.FID]*openDir
	// opening counts opens in progress per FID (they count as open for
	// unlink and rename); nsGate orders them: unlinks and renames hold it
	// shared, an open passes through it exclusively after registering, so
	// it waits for the removals that may not have seen it.
	opening map[fid.FID]int
	nsGate  sync.RWMutex
	// releasing holds the files whose orphan is being released: an open
	// of one (through a name the kernel still caches) waits for it.
	releasing map[fid.FID]chan struct{}
	// closing holds the files whose last close is being told to the MDS
	// (Release): an open of one waits, so that the MDS hears of the
	// close before the new open.
	closing map[fid.FID]chan struct{}
	// closeq holds last closes not told to the MDS yet (queueClose);
	// closeTimer is set while a send of them is scheduled.
	closeq     map[fid.FID]time.Time
	closeTimer bool
	// inherit holds orphans whose last handle went while an open of them
	// was in progress: the new open file takes over the release.
	inherit map[fid.FID]bool
	// tokens holds the open files that hold or ask for their file's
	// append token (append.go), also while their last close flushes them.
	tokens map[fid.FID][]*openFile
	// flights tracks the unlinks and renames in flight with a list of
	// open files, and the files of those lists closed meanwhile
	// (orphans.go).
	flights flights
	// nsEpoch counts the unlinks and renames done through this mount:
	// cached attributes fetched before one may describe a file it
	// destroyed, and are not used for an open.
	nsEpoch uint64
	// staleNames holds, by name and caller, when an open through the name
	// last answered staleOpen (staleRetry).
	staleNames map[staleName]time.Time

	groupsMu sync.Mutex
	groups   map[uint32]groupsEntry

	budget *budget

	statfsMu sync.Mutex
	statfs   *pb.Statfs
	statfsAt time.Time
}

type groupsEntry struct {
	uid    uint32
	groups []uint32
	at     time.Time
}

// node is one inode the kernel knows.
type node struct {
	id      uint64
	fid     fid.FID
	lookups uint64
	// What the kernel was last told of a regular file (close-to-open).
	kSize  uint64
	kMtime int64
	kValid bool
	// ino is the last attributes fetched from the MDT, at; an
	// invalidation from another client (or a change here that they do not
	// reflect) clears it. Directories' getattr and opens within the
	// attribute timeout are answered from it (see cached).
	ino   *pb.Inode
	at    time.Time
	epoch uint64 // FS.nsEpoch when fetched
	// exact: ino's size is the file's as of at, asked of the OSTs where
	// the MDT does not know it (a getattr's, see justFetched).
	exact bool
	// last is the last attributes fetched, kept through invalidations:
	// what a getattr answers (with no links) once the object is gone from
	// the MDT while the kernel still holds it (a working directory, an
	// open file), as a local file system answers fstat.
	last *pb.Inode
	// noCapsUntil: the file had no security.capability xattr, as of
	// this deadline minus the attribute timeout. The kernel asks before
	// every write (to clear it), so the answer is cached.
	noCapsUntil time.Time
	// noSetIDUntil: the file had neither set-user-ID nor set-group-ID
	// bit, as of this deadline minus the attribute timeout (killSetID).
	noSetIDUntil time.Time
	// xattrsChanged: until then, this mount changed the object's extended
	// attributes within the attribute timeout, and attributes fetched by a
	// lookup that raced with the change may predate it: getxattr and
	// listxattr ask the MDS (see xattrsKnown).
	xattrsChanged time.Time
	// vias are the names the kernel learnt this node by (a lookup, a
	// listing with attributes, a create, link or rename here) within the
	// entry timeout, with when: an open checks them with the MDS unless
	// one was learnt just now (checkName). checked: when they last passed.
	vias    []via
	checked time.Time
}

// via is one name of a node the kernel may have cached.
type via struct {
	parent fid.FID
	name   string
	at     time.Time
	// locked: the kernel was given the name for lockedEntryTimeout,
	// under its directory's lookup lock (lookuplock.go).
	locked bool
}

// timeout is how long the kernel keeps the name cached.
func (v via) timeout(o Options) time.Duration {
	if v.locked {
		return lockedEntryTimeout
	}
	return o.EntryTimeout
}

// maxVias bounds the names kept per node (hard links).
const maxVias = 8

// New returns the file system over c. Start a session (c.StartSession)
// with fs.Invalidate as its callback and hand it over with SetSession
// before mounting.
func New(c *client.Client, o Options) *FS {
	if o.AttrTimeout == 0 {
		o.AttrTimeout = time.Second
	}
	if o.EntryTimeout == 0 {
		o.EntryTimeout = time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	fs := &FS{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		c:             c, o: o, log: o.Log,
		nodes:      map[uint64]*node{},
		ll:         lookupLocks{dirs: map[fid.FID]*dirNames{}},
		byFID:      map[fid.FID]*node{},
		nextID:     firstNode,
		handles:    map[uint64]*handle{},
		nextFh:     1,
		files:      map[fid.FID]*openFile{},
		dirs:       map[fid.FID]*openDir{},
		opening:    map[fid.FID]int{},
		releasing:  map[fid.FID]chan struct{}{},
		closing:    map[fid.FID]chan struct{}{},
		closeq:     map[fid.FID]time.Time{},
		staleNames: map[staleName]time.Time{},
		inherit:    map[fid.FID]bool{},
		tokens:     map[fid.FID][]*openFile{},
		flights:    newFlights(),
		groups:     map[uint32]groupsEntry{},
		budget:     newBudget(writeBudget),
	}
	root := &node{id: rootID, fid: fid.Root, lookups: 1}
	fs.nodes[rootID] = root
	fs.byFID[fid.Root] = root
	return fs
}

// SetSession gives the file system its session with the MDSs.
func (fs *FS) SetSession(s *client.Session) { fs.sess = s }

func (fs *FS) String() string { return "nacre" }

// Init is called by the server before the first request.
func (fs *FS) Init(s *fuse.Server) { fs.srv = s }

// Ino is the inode number of a FID (Lustre's fid_flatten).
func Ino(f fid.FID) uint64 {
	seq := f.Seq
	ino := seq<<24 + (seq>>24)&0xffffff0000 + uint64(f.Oid)
	if ino == 0 {
		return uint64(f.Oid)
	}
	return ino
}

const (
	nacreIno  = 0xfffffffffffffff0
	fidDirIno = 0xfffffffffffffff1
)

// ctx is the context of a request: the caller's identity. Namespace
// operations are never cancelled by FUSE interrupts (a mutation applied
// but reported EINTR would confuse programs); only lock waits are.
func (fs *FS) ctx(h *fuse.InHeader) context.Context {
	return client.WithCred(context.Background(), fs.cred(h))
}

// cred is the caller's identity, with its supplementary groups.
func (fs *FS) cred(h *fuse.InHeader) *pb.Cred {
	cred := &pb.Cred{Uid: h.Uid, Gid: h.Gid}
	if h.Uid != 0 && h.Pid != 0 {
		cred.Groups = fs.supplementary(h.Pid, h.Uid)
	}
	return cred
}

// supplementary returns the supplementary groups of a process (from
// /proc), cached for a second.
func (fs *FS) supplementary(pid, uid uint32) []uint32 {
	fs.groupsMu.Lock()
	e, ok := fs.groups[pid]
	fs.groupsMu.Unlock()
	if ok && e.uid == uid && time.Since(e.at) < time.Second {
		return e.groups
	}
	var gs []uint32
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
				for _, f := range strings.Fields(rest) {
					if g, err := strconv.ParseUint(f, 10, 32); err == nil {
						gs = append(gs, uint32(g))
					}
				}
				break
			}
		}
	}
	fs.groupsMu.Lock()
	if len(fs.groups) > 4096 {
		clear(fs.groups)
	}
	fs.groups[pid] = groupsEntry{uid: uid, groups: gs, at: time.Now()}
	fs.groupsMu.Unlock()
	return gs
}

func (fs *FS) node(id uint64) *node {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.nodes[id]
}

// fidOf returns the FID of a real node.
func (fs *FS) fidOf(id uint64) (fid.FID, fuse.Status) {
	n := fs.node(id)
	if n == nil || id == nacreID || id == fidDirID {
		if id == nacreID || id == fidDirID {
			return fid.FID{}, fuse.EPERM
		}
		return fid.FID{}, fuse.ENOENT
	}
	return n.fid, fuse.OK
}

// register records one more kernel lookup of ino's FID and returns its
// node.
func (fs *FS) register(ino *pb.Inode) *node {
	f := fid.FromPB(ino.Fid)
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.byFID[f]
	if n == nil {
		n = &node{id: fs.nextID, fid: f}
		fs.nextID++
		fs.nodes[n.id] = n
		fs.byFID[f] = n
	}
	n.lookups++
	return n
}

// Forget drops kernel lookups of a node.
func (fs *FS) Forget(id, nlookup uint64) {
	if id < firstNode {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[id]
	if n == nil {
		return
	}
	if n.lookups > nlookup {
		n.lookups -= nlookup
		return
	}
	delete(fs.nodes, id)
	if fs.byFID[n.fid] == n {
		delete(fs.byFID, n.fid)
		fs.forgetDirNames(n.fid)
	}
}

// Nodes is the number of inodes the kernel holds (for tests).
func (fs *FS) Nodes() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.nodes)
}

func blksize(ino *pb.Inode) uint32 {
	if ino.Mode&syscall.S_IFMT == syscall.S_IFREG && ino.Layout != nil && ino.Layout.StripeSize > 0 {
		return min(ino.Layout.StripeSize, 4<<20)
	}
	return 4096
}

func splitNs(ns int64) (uint64, uint32) {
	s, n := ns/1e9, ns%1e9
	if n < 0 {
		s, n = s-1, n+1e9
	}
	return uint64(s), uint32(n)
}

// fillAttr converts MDT attributes and notes what the kernel is told.
func (fs *FS) fillAttr(n *node, ino *pb.Inode, a *fuse.Attr) {
	a.Ino = Ino(fid.FromPB(ino.Fid))
	a.Size = ino.Size
	a.Blocks = ino.Blocks
	a.Atime, a.Atimensec = splitNs(ino.AtimeNs)
	a.Mtime, a.Mtimensec = splitNs(ino.MtimeNs)
	a.Ctime, a.Ctimensec = splitNs(ino.CtimeNs)
	a.Mode = ino.Mode
	a.Nlink = ino.Nlink
	a.Uid, a.Gid = ino.Uid, ino.Gid
	a.Rdev = ino.Rdev
	a.Blksize = blksize(ino)
	if n != nil {
		fs.mu.Lock()
		if ino.Mode&syscall.S_IFMT == syscall.S_IFREG {
			n.kSize, n.kMtime, n.kValid = ino.Size, ino.MtimeNs, true
		}
		n.ino, n.at, n.epoch, n.last, n.exact = ino, time.Now(), fs.nsEpoch, ino, false
		n.noSetIDUntil = time.Time{}
		if ino.Mode&(syscall.S_ISUID|syscall.S_ISGID) == 0 {
			n.noSetIDUntil = n.at.Add(fs.o.AttrTimeout)
		}
		fs.mu.Unlock()
	}
}

// cached returns the node's attributes if they were fetched within the
// attribute timeout and nothing invalidated them since. Another client's
// close after writing, and its truncates, invalidate them synchronously
// (LDLM Invalidate), so an open may rely on them for close-to-open.
//
// For an open (forOpen) they must also predate no unlink or rename by this
// mount, which may have destroyed the file.
func (fs *FS) cached(id uint64, forOpen bool) (*node, *pb.Inode) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[id]
	if n == nil || n.ino == nil || time.Since(n.at) > fs.o.AttrTimeout || (forOpen && n.epoch != fs.nsEpoch) {
		return n, nil
	}
	if n.ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0 {
		return n, nil
	}
	return n, proto.Clone(n.ino).(*pb.Inode)
}

// justFetched returns the node's attributes if a getattr fetched them
// just now (within nameFresh), its size included, and nothing invalidated
// them since: the kernel's GETATTR for the permission check of an open
// under way, which need not be asked again.
func (fs *FS) justFetched(id uint64) *pb.Inode {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[id]
	if n == nil || n.ino == nil || !n.exact || time.Since(n.at) > nameFresh || n.epoch != fs.nsEpoch {
		return nil
	}
	return proto.Clone(n.ino).(*pb.Inode)
}

// lastAttrs returns a copy of the node's last fetched attributes with no
// links (nil if it has none): the object is gone from the MDT.
func (fs *FS) lastAttrs(n *node) *pb.Inode {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n.last == nil {
		return nil
	}
	ino := proto.Clone(n.last).(*pb.Inode)
	ino.Nlink = 0
	return ino
}

// unlinked notes, in the cached attributes of the object a removal through
// this mount named, the link count the MDT answered (ino; nil: unknown). A
// directory's attributes are otherwise answered from the cache (GetAttr),
// and would show the links it had until they expire.
func (fs *FS) unlinked(ino *pb.Inode) {
	if ino == nil || ino.Fid == nil {
		return
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.byFID[fid.FromPB(ino.Fid)]
	if n == nil {
		return
	}
	if n.ino != nil {
		c := proto.Clone(n.ino).(*pb.Inode)
		c.Nlink, c.CtimeNs = ino.Nlink, ino.CtimeNs
		n.ino = c
	}
	if n.last != nil && ino.Nlink == 0 {
		c := proto.Clone(n.last).(*pb.Inode)
		c.Nlink, c.CtimeNs = 0, ino.CtimeNs
		n.last = c
	}
}

// removed notes an unlink or rename done through this mount.
func (fs *FS) removed() {
	fs.mu.Lock()
	fs.nsEpoch++
	fs.mu.Unlock()
}

// dirChanged notes a change this client made in directory id (a name
// added or removed) in its cached attributes: new mtime and ctime, and
// the link count when a subdirectory came or went. changed is the object
// the MDT's reply returned (nil if none): its ctime is the operation's
// time on the MDT, which the directory got too. The client's clock would
// show a time the directory's attributes take back when they are fetched
// again.
func (fs *FS) dirChanged(id uint64, nlinkDelta int, changed *pb.Inode) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := fs.nodes[id]
	if n == nil || n.ino == nil {
		return
	}
	ino := proto.Clone(n.ino).(*pb.Inode)
	now := changed.GetCtimeNs()
	if now == 0 {
		now = time.Now().UnixNano()
	}
	ino.MtimeNs, ino.CtimeNs = now, now
	if nlinkDelta != 0 && int(ino.Nlink)+nlinkDelta >= 2 {
		ino.Nlink = uint32(int(ino.Nlink) + nlinkDelta)
	}
	n.ino = ino
}

// forgetFIDAttrs drops the cached attributes of f's node.
func (fs *FS) forgetFIDAttrs(f fid.FID) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n := fs.byFID[f]; n != nil {
		n.ino = nil
	}
}

// forgetAttrs drops a node's cached attributes.
func (fs *FS) forgetAttrs(id uint64) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if n := fs.nodes[id]; n != nil {
		n.ino = nil
	}
}

// fillNamed is fillEntry for an entry the kernel caches as parent/name.
func (fs *FS) fillNamed(ino *pb.Inode, out *fuse.EntryOut, parent fid.FID, name string) *node {
	n := fs.fillEntry(ino, out)
	locked := fs.entryLocked(parent, name)
	if locked {
		out.SetEntryTimeout(lockedEntryTimeout)
	}
	fs.named(n, parent, name, locked)
	return n
}

// named notes that the kernel knows n as parent/name as of now, and
// forgets the names it will have looked up again before using them.
func (fs *FS) named(n *node, parent fid.FID, name string, locked bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	now := time.Now()
	keep := n.vias[:0]
	for _, v := range n.vias {
		if now.Sub(v.at) < v.timeout(fs.o) && (v.parent != parent || v.name != name) {
			keep = append(keep, v)
		}
	}
	if len(keep) >= maxVias {
		keep = append(keep[:0], keep[1:]...)
	}
	n.vias = append(keep, via{parent: parent, name: name, at: now, locked: locked})
}

// unnamed forgets parent/name as a name of n (moved away by this mount).
func (fs *FS) unnamed(n *node, parent fid.FID, name string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n.vias = slices.DeleteFunc(n.vias, func(v via) bool { return v.parent == parent && v.name == name })
}

func (fs *FS) fillEntry(ino *pb.Inode, out *fuse.EntryOut) *node {
	n := fs.register(ino)
	out.NodeId = n.id
	out.Generation = 0
	if fs.noNameCache {
		// Not even the shortest timeout: the kernel rounds it up to a
		// clock tick, time enough for another user's walk.
		out.SetEntryTimeout(0)
	} else {
		out.SetEntryTimeout(fs.o.EntryTimeout)
	}
	out.SetAttrTimeout(fs.o.AttrTimeout)
	fs.fillAttr(n, ino, &out.Attr)
	return n
}

// mountTime dates the virtual directories.
var mountTime = time.Now()

// virtAttr fills the attributes of a virtual directory.
func virtAttr(id uint64, a *fuse.Attr) {
	a.Mode = syscall.S_IFDIR | 0o555
	a.Atime, a.Atimensec = splitNs(mountTime.UnixNano())
	a.Mtime, a.Mtimensec, a.Ctime, a.Ctimensec = a.Atime, a.Atimensec, a.Atime, a.Atimensec
	a.Nlink = 2
	a.Size = 4096
	a.Blksize = 4096
	if id == nacreID {
		a.Ino = nacreIno
		// It holds fid and, once the checker made it, lost+found: a
		// count that does not say how many subdirectories there are (1,
		// as btrfs gives) keeps find(1) from stopping after the first.
		a.Nlink = 1
	} else {
		a.Ino = fidDirIno
	}
}

// attr fetches a FID's attributes with an exact size.
func (fs *FS) attr(ctx context.Context, f fid.FID) (*pb.Inode, error) {
	fs.fenceOwnWrites(f)
	ino, err := fs.c.Getattr(ctx, f)
	if err != nil {
		return nil, err
	}
	if err := fs.c.Glimpse(ctx, ino); err != nil {
		return nil, err
	}
	fs.ownSize(ino)
	return ino, nil
}

// fenceOwnWrites lets this mount's writes to f that are still in flight
// (write-behind acknowledged them to the kernel already) reach the OSTs,
// so that the size the MDT and OSTs report next includes them. Without
// it, a second process opening the file here would be told an older size,
// and the kernel, believing it, would place that process's O_APPEND
// writes over the first one's.
func (fs *FS) fenceOwnWrites(f fid.FID) {
	fs.mu.Lock()
	of := fs.files[f]
	fs.mu.Unlock()
	if of != nil {
		of.wb.fence()
	}
}

// ownSize raises ino's size to the end of this mount's own writes to the
// file not yet recorded by a close.
func (fs *FS) ownSize(ino *pb.Inode) {
	fs.mu.Lock()
	of := fs.files[fid.FromPB(ino.Fid)]
	fs.mu.Unlock()
	if of == nil {
		return
	}
	if size, wrote := of.f.OwnSize(); wrote && size > ino.Size {
		ino.Size = size
	}
}

// Invalidate drops what the kernel caches of files another client
// changed (the session's callback).
func (fs *FS) Invalidate(fids []fid.FID) {
	if fs.srv == nil {
		return
	}
	for _, f := range fids {
		fs.mu.Lock()
		if of := fs.files[f]; of != nil {
			of.f.Changed()
			of.endStale()
		}
		n := fs.byFID[f]
		var id uint64
		if n != nil {
			id = n.id
			n.kValid = false
			n.ino = nil
			n.noCapsUntil = time.Time{}
			n.noSetIDUntil = time.Time{}
		}
		fs.mu.Unlock()
		if id != 0 {
			fs.srv.InodeNotify(id, 0, 0)
		}
	}
}

// OnUnmount is called after the last request.
func (fs *FS) OnUnmount() {}

// Close flushes what open files still hold (after an unmount, with the
// kernel gone) and releases their orphans.
func (fs *FS) Close() {
	fs.mu.Lock()
	var files []*openFile
	for _, of := range fs.files {
		files = append(files, of)
	}
	fs.files = map[fid.FID]*openFile{}
	fs.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var orphans []fid.FID
	for _, of := range files {
		of.wb.fence()
		of.wb.mu.Lock()
		if err := of.wb.err; err != nil {
			fs.log.Warn("a write failed before the unmount", "fid", of.fid, "err", err)
		}
		of.wb.mu.Unlock()
		of.rw.Lock()
		if of.f != nil && of.f.Wrote() {
			if err := of.f.Close(ctx); err != nil {
				fs.log.Warn("record size at unmount", "fid", of.fid, "err", err)
			}
		}
		of.rw.Unlock()
		orphans = append(orphans, of.fid)
	}
	if fs.sess != nil && len(orphans) > 0 {
		fs.sess.ReleaseOrphans(ctx, orphans)
	}
}
