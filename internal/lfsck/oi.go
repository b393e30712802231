package lfsck

import (
	"encoding/binary"
	"errors"
	"sync"
	"sync/atomic"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/mdt"
)

// oiFixes are the OI corrections the OI scrub decided in this run (FID to
// local key) and the objects that lost a conflict over their FID. Every
// lookup of the run goes through them first, so that the other
// components see the OI as repaired: in a dry run, which changes
// nothing, and in a real run before the repairs apply.
type oiFixes struct {
	some   atomic.Bool // any correction at all: the scan's lookups skip the lock until then
	mu     sync.Mutex
	byFID  map[fid.FID]uint64
	losers map[uint64]bool
}

func newOIFixes() *oiFixes {
	return &oiFixes{byFID: map[fid.FID]uint64{}, losers: map[uint64]bool{}}
}

func (x *oiFixes) set(f fid.FID, local uint64) {
	x.mu.Lock()
	x.byFID[f] = local
	x.some.Store(true)
	x.mu.Unlock()
}

func (x *oiFixes) local(f fid.FID) (uint64, bool) {
	if !x.some.Load() {
		return 0, false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	l, ok := x.byFID[f]
	return l, ok
}

func (x *oiFixes) lose(local uint64) {
	x.mu.Lock()
	x.losers[local] = true
	x.some.Store(true)
	x.mu.Unlock()
}

// isLoser reports whether the object at local lost a conflict over its FID.
func (x *oiFixes) isLoser(local uint64) bool {
	if !x.some.Load() {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.losers[local]
}

// lost reports whether the object at local, of FID f, is not the one the
// OI keeps for f: it lost a conflict, or f was decided for another object.
func (x *oiFixes) lost(local uint64, f fid.FID) bool {
	if !x.some.Load() {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.losers[local] {
		return true
	}
	m, ok := x.byFID[f]
	return ok && m != local
}

type getter interface {
	Get([]byte) ([]byte, error)
}

// lookup finds an object by FID in rd (through the OI corrections first):
// its local key and record.
func (r *run) lookup(rd getter, f fid.FID) (uint64, *pb.Inode, error) {
	local, ok := r.scrub.oi.local(f)
	if !ok {
		lv, err := rd.Get(mdt.OIKey(f))
		if err != nil {
			return 0, nil, errNoObject
		}
		if len(lv) != 8 {
			return 0, nil, errBadOI
		}
		local = binary.BigEndian.Uint64(lv)
	}
	v, err := rd.Get(mdt.ObjKey(local))
	if err != nil {
		return 0, nil, errNoObject
	}
	ino, err := decodeInode(v)
	if err != nil {
		return 0, nil, err
	}
	if fid.FromPB(ino.Fid) != f {
		return 0, nil, errBadOI
	}
	return local, ino, nil
}

// isLoser reports whether the object at local lost a conflict over its FID.
func (r *run) isLoser(local uint64) bool { return r.scrub.oi.isLoser(local) }

var (
	errNoObject = errors.New("no such object")
	errBadOI    = errors.New("the OI entry is wrong (run the OI scrub)")
)

func decodeInode(v []byte) (*pb.Inode, error) {
	ino := &pb.Inode{}
	if err := proto.Unmarshal(v, ino); err != nil {
		return nil, syscall.EIO
	}
	return ino, nil
}
