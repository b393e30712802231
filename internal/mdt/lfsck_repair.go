package mdt

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"sort"
	"strings"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// The checker's commands (internal/lfsck): repairs, reports, its own state
// and injected faults. A repair is decided by the checker from a snapshot
// and carries the digests of every key it was decided from; apply re-reads
// those keys and does nothing if one changed, so a repair never acts on a
// state it was not decided from (an unlink or rename in flight is never
// "repaired"). Counters of found and repaired inconsistencies are counted
// here, in the same batch as the repair, so they are exact across crashes.
//
// Checker keys (prefix 'K', written only by these commands):
//
//	"Ks"                         LfsckState: parameters, status, checkpoints
//	"Kc" comp(1) kind(1)         counters of the current run: found(8) repaired(8)
//	"Kx" comp(1) key             a report already counted in this run
//	"Kt" comp(1) ...             trace of uncertain items for phase 2
//	"Km"                         restore marker: the OI must be rebuilt

// Checker key helpers.
var (
	// KeyLfsckState holds the checker's LfsckState.
	KeyLfsckState = []byte("Ks")
	// KeyRestored marks a store restored from a file-level backup (its OI
	// is stale until an OI scrub completes).
	KeyRestored = []byte("Km")
)

// LfsckCounterPrefix is the prefix of one component's counters.
func LfsckCounterPrefix(comp uint32) []byte { return []byte{PfxChecker, 'c', byte(comp)} }

// LfsckCounterKey is the key of one counter.
func LfsckCounterKey(comp, kind uint32) []byte {
	return []byte{PfxChecker, 'c', byte(comp), byte(kind)}
}

// LfsckReportPrefix is the prefix of one component's counted reports.
func LfsckReportPrefix(comp uint32) []byte { return []byte{PfxChecker, 'x', byte(comp)} }

// LfsckTracePrefix is the prefix of one component's trace.
func LfsckTracePrefix(comp uint32) []byte { return []byte{PfxChecker, 't', byte(comp)} }

// LfsckKindFailed counts repairs that apply could not carry out.
const LfsckKindFailed = 0xff

// DecodeCounter reads a counter value: found, repaired.
func DecodeCounter(v []byte) (found, repaired uint64) {
	if len(v) < 16 {
		return 0, 0
	}
	return binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// Digest is the digest repairs compare values with (CRC-64, ECMA).
func Digest(v []byte) uint64 { return crc64.Checksum(v, crcTable) }

// MarshalInode encodes an object record exactly as apply stores it.
func MarshalInode(ino *pb.Inode) []byte { return mustMarshal(ino) }

// XattrPrefix is the key prefix of an object's extended attributes.
func XattrPrefix(local uint64) []byte { return xattrPrefix(local) }

// DestroyKey is the key of an OST object queued for destruction.
func DestroyKey(ost uint32, seq, oid uint64) []byte { return unlinkKey(ost, seq, oid) }

// PoolKey is the key of an OST's precreate pool record.
func PoolKey(ost uint32) []byte { return poolKey(ost) }

// DecodePool reads a pool record.
func DecodePool(v []byte) (PoolState, bool) {
	if len(v) != 24 {
		return PoolState{}, false
	}
	return PoolState{Seq: binary.BigEndian.Uint64(v), Next: binary.BigEndian.Uint64(v[8:]), End: binary.BigEndian.Uint64(v[16:])}, true
}

// RootLocal is the root directory's local key.
const RootLocal = rootLocal

// ObjLocal decodes an object key's local key.
func ObjLocal(k []byte) (uint64, bool) {
	if len(k) != 9 || k[0] != pfxObj {
		return 0, false
	}
	return binary.BigEndian.Uint64(k[1:]), true
}

// Key ranges of the schema, for scans.
var (
	ObjLower    = []byte{pfxObj}
	OILower     = []byte{pfxOI}
	DirentLower = []byte{pfxDirent}
	DestroyLow  = []byte{pfxUnlink}
)

// errStale: a condition of a repair no longer holds.
var errStale = errors.New("the state changed since the check")

func (x *txn) lfsckRepair(op *pb.LfsckRepairOp) (*pb.Reply, error) {
	var done, stale, failed int
	var last, firstFailure error
	var failedComps []uint32
	for _, r := range op.Repairs {
		switch err := x.lfsckApply(r, true); {
		case err == nil:
			done++
		case errors.Is(err, errStale):
			stale++
			last = err
		default:
			failed++
			last = err
			failedComps = append(failedComps, r.Component)
			if firstFailure == nil {
				firstFailure = err
			}
		}
	}
	rep := &pb.Reply{Message: fmt.Sprintf("applied %d, stale %d, failed %d", done, stale, failed), LfsckFailed: failedComps}
	if firstFailure != nil {
		rep.Message += ": " + firstFailure.Error()
	}
	if len(op.Repairs) == 1 && last != nil {
		rep.Errno = int32(syscall.ESTALE)
		if !errors.Is(last, errStale) {
			rep.Errno = int32(ErrnoOf(last))
		}
		rep.Message = last.Error()
	}
	return rep, nil
}

func (x *txn) lfsckFault(op *pb.FaultOp) (*pb.Reply, error) {
	if op.Change == nil {
		return nil, errf(syscall.EINVAL, "fault %q without a change", op.Kind)
	}
	if err := x.lfsckApply(op.Change, false); err != nil {
		if errors.Is(err, errStale) {
			return nil, errf(syscall.ESTALE, "fault %q: %v", op.Kind, err)
		}
		return nil, err
	}
	return &pb.Reply{Message: "injected " + op.Kind}, nil
}

func (x *txn) lfsckState(op *pb.LfsckStateOp) (*pb.Reply, error) {
	for _, p := range op.DeletePrefix {
		if len(p) == 0 || p[0] != PfxChecker {
			return nil, errf(syscall.EINVAL, "checker state: prefix %q outside the checker's keys", p)
		}
	}
	for _, kv := range op.Set {
		if len(kv.Key) == 0 || kv.Key[0] != PfxChecker {
			return nil, errf(syscall.EINVAL, "checker state: key %q outside the checker's keys", kv.Key)
		}
	}
	for _, p := range op.DeletePrefix {
		x.b.DeleteRange(p, kv.PrefixEnd(p))
	}
	for _, e := range op.Set {
		if len(e.Value) == 0 {
			x.b.Delete(e.Key)
		} else {
			x.b.Set(e.Key, e.Value)
		}
	}
	return &pb.Reply{}, nil
}

// checkConds reports whether every condition holds in r.
func checkConds(r kv.Reader, conds []*pb.LfsckCond) (bool, error) {
	for _, c := range conds {
		v, err := r.Get(c.Key)
		switch {
		case errors.Is(err, kv.ErrNotFound):
			if !c.Absent {
				return false, nil
			}
		case err != nil:
			return false, err
		default:
			if c.Absent || Digest(v) != c.Digest {
				return false, nil
			}
		}
	}
	return true, nil
}

// CheckConds evaluates a repair's conditions against r (a dry run's
// stand-in for apply).
func CheckConds(r kv.Reader, conds []*pb.LfsckCond) (bool, error) { return checkConds(r, conds) }

// lfsckApply applies one repair (or fault) atomically: all of its changes
// or none.
func (x *txn) lfsckApply(r *pb.LfsckRepair, count bool) error {
	ok, err := checkConds(x.b, r.Conds)
	if err != nil {
		return errf(syscall.EIO, "check conditions: %v", err)
	}
	if !ok {
		return errStale
	}
	if count && len(r.ReportKey) > 0 {
		k := append(LfsckReportPrefix(r.Component), r.ReportKey...)
		if _, err := x.b.Get(k); err == nil {
			return nil // counted earlier in this run
		}
		x.b.Set(k, []byte{1})
	}
	st := &stage{x: x, vals: map[string][]byte{}}
	saved := x.saveCounters()
	var merr error
	for i, m := range r.Muts {
		if merr = st.apply(m, i > 0); merr != nil {
			break
		}
	}
	if merr != nil {
		x.restoreCounters(saved)
		if count {
			// Found, not repaired: as a dry run would count it.
			for _, k := range r.Kinds {
				x.bumpCounter(r.Component, k, 1, 0)
			}
			x.bumpCounter(r.Component, LfsckKindFailed, 1, 0)
		}
		return merr
	}
	st.commit()
	if d := r.InodesDelta; d != 0 {
		if d < 0 && x.t.inodes < uint64(-d) {
			x.t.inodes = 0
		} else {
			x.t.inodes = uint64(int64(x.t.inodes) + int64(d))
		}
	}
	if count {
		rep := uint64(0)
		if len(r.Muts) > 0 || r.RepairedElsewhere {
			rep = 1
		}
		for _, k := range r.Kinds {
			x.bumpCounter(r.Component, k, 1, rep)
		}
	}
	return nil
}

func (x *txn) bumpCounter(comp, kind uint32, found, repaired uint64) {
	k := LfsckCounterKey(comp, kind)
	v, _ := x.b.Get(k)
	f, rp := DecodeCounter(v)
	out := binary.BigEndian.AppendUint64(nil, f+found)
	out = binary.BigEndian.AppendUint64(out, rp+repaired)
	x.b.Set(k, out)
}

type savedCounters struct {
	nextLocal uint64
	inodes    uint64
	seq       seqState
	pools     map[uint32]PoolState
}

func (x *txn) saveCounters() savedCounters {
	s := savedCounters{nextLocal: x.t.nextLocal, inodes: x.t.inodes, seq: x.t.seq, pools: map[uint32]PoolState{}}
	s.seq.Ranges = append([][2]uint64(nil), x.t.seq.Ranges...)
	for k, p := range x.t.pools {
		s.pools[k] = *p
	}
	return s
}

func (x *txn) restoreCounters(s savedCounters) {
	x.t.nextLocal, x.t.inodes, x.t.seq = s.nextLocal, s.inodes, s.seq
	for k, p := range s.pools {
		*x.t.pools[k] = p
	}
}

// stage collects one repair's writes so that a failure leaves nothing.
type stage struct {
	x    *txn
	vals map[string][]byte // nil value: deleted
}

func (s *stage) Get(k []byte) ([]byte, error) {
	if v, ok := s.vals[string(k)]; ok {
		if v == nil {
			return nil, kv.ErrNotFound
		}
		return v, nil
	}
	return s.x.b.Get(k)
}

func (s *stage) set(k, v []byte) {
	s.vals[string(k)] = append(make([]byte, 0, len(v)), v...) // never nil: nil means deleted
	if len(k) > 0 && k[0] == pfxUnlink {
		s.x.st.noteQueued(append([]byte(nil), k...))
	}
}

func (s *stage) del(k []byte) { s.vals[string(k)] = nil }

func (s *stage) commit() {
	keys := make([]string, 0, len(s.vals))
	for k := range s.vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	rootKey := string(ObjKey(rootLocal))
	// The inode cache (cache.go) maps FIDs to objects: drop every FID
	// whose OI entry or object changes here.
	var stale []fid.FID
	lma := func(v []byte) {
		ino := &pb.Inode{}
		if proto.Unmarshal(v, ino) == nil && ino.Fid != nil {
			stale = append(stale, fid.FromPB(ino.Fid))
		}
	}
	for _, k := range keys {
		switch {
		case len(k) == 1+fid.Size && k[0] == pfxOI:
			f, _ := fid.FromBytes([]byte(k[1:]))
			stale = append(stale, f)
		case len(k) == 9 && k[0] == pfxObj:
			if old, err := s.x.b.Get([]byte(k)); err == nil {
				lma(old)
			}
			if v := s.vals[k]; v != nil {
				lma(v)
			}
		}
	}
	for _, f := range stale {
		s.x.t.uncacheInode(f)
	}
	for _, k := range keys {
		v := s.vals[k]
		if v == nil {
			s.x.b.Delete([]byte(k))
		} else {
			s.x.b.Set([]byte(k), v)
		}
		if k == rootKey && v != nil {
			ino := &pb.Inode{}
			if proto.Unmarshal(v, ino) == nil {
				s.x.t.rootLayout = ino.Layout
			}
		}
	}
}

func (s *stage) getInode(f fid.FID) (uint64, *pb.Inode, error) { return getInode(s, f) }

// NewIter is not offered by a stage: typed changes read single keys only.
func (s *stage) NewIter(lower, upper []byte) (*kv.Iter, error) {
	return nil, errors.New("stage: no iteration")
}

func (s *stage) putInode(local uint64, ino *pb.Inode) { s.set(ObjKey(local), mustMarshal(ino)) }

// apply stages one change; followUp: an earlier change of the same repair
// was staged.
func (s *stage) apply(m *pb.LfsckMut, followUp bool) error {
	switch v := m.M.(type) {
	case *pb.LfsckMut_Set:
		if v.Set == nil || len(v.Set.Key) == 0 {
			return errf(syscall.EINVAL, "repair: empty key")
		}
		s.set(v.Set.Key, v.Set.Value)
	case *pb.LfsckMut_Del:
		if len(v.Del) == 0 {
			return errf(syscall.EINVAL, "repair: empty key")
		}
		s.del(v.Del)
	case *pb.LfsckMut_Create:
		return s.create(v.Create)
	case *pb.LfsckMut_LinkLpf:
		return s.linkLPF(v.LinkLpf)
	case *pb.LfsckMut_InsertDirent:
		return s.insertDirent(v.InsertDirent)
	case *pb.LfsckMut_DirNlink:
		return s.dirNlink(fid.FromPB(v.DirNlink), followUp)
	case *pb.LfsckMut_NewStripe:
		return s.newStripe(v.NewStripe)
	default:
		return errf(syscall.EINVAL, "repair: unknown change %T", m.M)
	}
	return nil
}

// allocatedBefore reports whether f was handed out by this MDT's allocator
// already, so that re-creating it cannot collide with a future create.
func (x *txn) allocatedBefore(f fid.FID) bool {
	s := &x.t.seq
	if f.Seq < fid.SeqNormal || f.Ver != 0 || f.Oid == 0 || f.Oid >= fid.Width {
		return false
	}
	for _, r := range s.Ranges {
		if f.Seq >= r[0] && f.Seq < r[1] {
			return false // granted, not started
		}
	}
	if f.Seq == s.Cur {
		return f.Oid < s.Next
	}
	return f.Seq < s.Cur
}

func (s *stage) create(c *pb.LfsckCreate) error {
	x := s.x
	if c.Inode == nil {
		return errf(syscall.EINVAL, "create: no inode")
	}
	ino := cloneInode(c.Inode)
	var f fid.FID
	if c.AllocFid {
		nf, err := x.allocFID()
		if err != nil {
			return err
		}
		f = nf
	} else {
		f = fid.FromPB(ino.Fid)
		if !x.allocatedBefore(f) {
			return errf(syscall.EINVAL, "create %s: not a FID this MDT handed out before; refusing to re-create it", f)
		}
		if _, err := s.Get(OIKey(f)); err == nil {
			return errf(syscall.EEXIST, "create %s: the FID is in use", f)
		}
	}
	ino.Fid = f.PB()
	ino.Nlink = 1
	if isDir(ino) {
		ino.Nlink = 2
		if ino.Size == 0 {
			ino.Size, ino.Blocks = 4096, 8
		}
	}
	ino.AtimeNs, ino.MtimeNs, ino.CtimeNs, ino.BtimeNs = x.now, x.now, x.now, x.now
	ino.Links = nil
	typ := DirentType(ino.Mode)
	local := x.allocLocal()
	switch {
	case c.ExistingEntry:
		pf := fid.FromPB(c.Parent)
		plocal, _, err := s.getDirInode(pf)
		if err != nil {
			return err
		}
		cf, _, found, err := lookupName(s, plocal, string(c.Name))
		if err != nil {
			return err
		}
		if !found || cf != f {
			return errf(syscall.ESTALE, "create %s: entry %q no longer names it", f, c.Name)
		}
		ino.Links = []*pb.LinkEntry{{Parent: pf.PB(), Name: c.Name}}
	case len(c.LpfBase) > 0:
		name, err := s.linkIntoLPF(strings.ReplaceAll(string(c.LpfBase), "%F", f.String()), f, typ)
		if err != nil {
			return err
		}
		ino.Links = []*pb.LinkEntry{{Parent: fid.LostFound.PB(), Name: []byte(name)}}
	default:
		pf := fid.FromPB(c.Parent)
		if err := s.insertDirent(&pb.LfsckInsertDirent{Parent: c.Parent, Name: c.Name, Child: f.PB(), Type: uint32(typ)}); err != nil {
			return err
		}
		ino.Links = []*pb.LinkEntry{{Parent: pf.PB(), Name: c.Name}}
	}
	s.set(OIKey(f), putU64(local))
	s.putInode(local, ino)
	x.t.inodes++
	return nil
}

func (s *stage) getDirInode(f fid.FID) (uint64, *pb.Inode, error) {
	local, ino, err := s.getInode(f)
	if err != nil {
		return 0, nil, err
	}
	if !isDir(ino) {
		return 0, nil, errf(syscall.ENOTDIR, "%s is not a directory", f)
	}
	return local, ino, nil
}

// ensureLPF returns lost+found's local key, creating .nacre and
// .nacre/lost+found the first time.
func (s *stage) ensureLPF() (uint64, error) {
	x := s.x
	if local, ino, err := s.getInode(fid.LostFound); err == nil {
		if !isDir(ino) {
			return 0, errf(syscall.ENOTDIR, "lost+found %s is not a directory", fid.LostFound)
		}
		return local, nil
	} else if ErrnoOf(err) != syscall.ENOENT {
		return 0, err
	}
	mkdir := func(f fid.FID, parent fid.FID, name string, mode uint32) (uint64, error) {
		plocal, p, err := s.getDirInode(parent)
		if err != nil {
			return 0, err
		}
		if _, _, found, err := lookupName(s, plocal, name); err != nil {
			return 0, err
		} else if found {
			if path := map[fid.FID]string{fid.DotNacre: "/.nacre", fid.LostFound: "/.nacre/lost+found"}[f]; path != "" {
				return 0, errf(syscall.EEXIST, "cannot make lost+found: %s is taken by an object the file system did not make; rename it (nacre mv %s NEWNAME) and run the checker again", path, path)
			}
			return 0, errf(syscall.EEXIST, "cannot create %s: the name %q in %s is taken", f, name, parent)
		}
		local := x.allocLocal()
		d := &pb.Inode{Fid: f.PB(), Mode: syscall.S_IFDIR | mode, Nlink: 2, Size: 4096, Blocks: 8,
			AtimeNs: x.now, MtimeNs: x.now, CtimeNs: x.now, BtimeNs: x.now,
			Links: []*pb.LinkEntry{{Parent: parent.PB(), Name: []byte(name)}}}
		s.set(OIKey(f), putU64(local))
		s.putInode(local, d)
		s.set(DirentKey(plocal, name), encodeDirent(f, DirentType(d.Mode)))
		p.Nlink++
		p.MtimeNs, p.CtimeNs = x.now, x.now
		s.putInode(plocal, p)
		x.t.inodes++
		return local, nil
	}
	if _, _, err := s.getInode(fid.DotNacre); err != nil {
		if ErrnoOf(err) != syscall.ENOENT {
			return 0, err
		}
		if _, err := mkdir(fid.DotNacre, fid.Root, ".nacre", 0o755); err != nil {
			return 0, err
		}
	}
	return mkdir(fid.LostFound, fid.DotNacre, "lost+found", 0o700)
}

// linkIntoLPF inserts an entry for f in lost+found named base-N with the
// first free N, and returns the name.
func (s *stage) linkIntoLPF(base string, f fid.FID, typ uint8) (string, error) {
	lpf, err := s.ensureLPF()
	if err != nil {
		return "", err
	}
	for n := 0; n < 10000; n++ {
		name := fmt.Sprintf("%s-%d", base, n)
		if checkName(name) != nil {
			return "", errf(syscall.EINVAL, "lost+found name %q", name)
		}
		_, _, found, err := lookupName(s, lpf, name)
		if err != nil {
			return "", err
		}
		if found {
			continue
		}
		s.set(DirentKey(lpf, name), encodeDirent(f, typ))
		if typ == DirentType(syscall.S_IFDIR) {
			_, d, err := s.getInode(fid.LostFound)
			if err != nil {
				return "", err
			}
			d.Nlink++
			d.MtimeNs, d.CtimeNs = s.x.now, s.x.now
			s.putInode(lpf, d)
		}
		return name, nil
	}
	return "", errf(syscall.EEXIST, "no free name %s-N in lost+found", base)
}

func (s *stage) linkLPF(l *pb.LfsckLinkLPF) error {
	f := fid.FromPB(l.Fid)
	local, ino, err := s.getInode(f)
	if err != nil {
		return err
	}
	name, err := s.linkIntoLPF(strings.ReplaceAll(string(l.Base), "%F", f.String()), f, DirentType(ino.Mode))
	if err != nil {
		return err
	}
	// Re-read: linking a directory may have changed lost+found, not the object.
	_, ino, err = s.getInode(f)
	if err != nil {
		return err
	}
	ino.Links = append(ino.Links, &pb.LinkEntry{Parent: fid.LostFound.PB(), Name: []byte(name)})
	if !isDir(ino) && ino.Nlink < uint32(len(ino.Links)) {
		ino.Nlink = uint32(len(ino.Links))
	}
	if isDir(ino) && ino.Nlink < 2 {
		ino.Nlink = 2
	}
	ino.CtimeNs = s.x.now
	s.putInode(local, ino)
	return nil
}

func (s *stage) insertDirent(d *pb.LfsckInsertDirent) error {
	pf := fid.FromPB(d.Parent)
	plocal, p, err := s.getDirInode(pf)
	if err != nil {
		return err
	}
	name := string(d.Name)
	if err := checkName(name); err != nil {
		return err
	}
	if _, _, found, err := lookupName(s, plocal, name); err != nil {
		return err
	} else if found {
		return errf(syscall.EEXIST, "insert %q in %s: the name is taken", name, pf)
	}
	s.set(DirentKey(plocal, name), encodeDirent(fid.FromPB(d.Child), uint8(d.Type)))
	if uint8(d.Type) == DirentType(syscall.S_IFDIR) {
		p.Nlink++
	}
	p.MtimeNs, p.CtimeNs = s.x.now, s.x.now
	s.putInode(plocal, p)
	return nil
}

// dirNlink sets a directory's nlink to 2 + its subdirectory entries,
// counted now.
// dirNlink sets a directory's nlink to 2 + its subdirectory entries,
// counting the entries this repair staged. As the whole repair it is stale
// when the count is right already; as a follow-up (after a change to the
// directory's entries) it only settles the count.
func (s *stage) dirNlink(f fid.FID, followUp bool) error {
	local, d, err := s.getDirInode(f)
	if err != nil {
		return err
	}
	p := DirentPrefix(local)
	isSub := func(v []byte) bool {
		_, typ, ok := decodeDirent(v)
		return ok && typ == DirentType(syscall.S_IFDIR)
	}
	it, err := s.x.b.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return errf(syscall.EIO, "count subdirectories of %s: %v", f, err)
	}
	n := uint32(2)
	seen := map[string]bool{}
	for it.First(); it.Valid(); it.Next() {
		v := it.Value()
		if sv, staged := s.vals[string(it.Key())]; staged {
			seen[string(it.Key())] = true
			v = sv // nil: deleted by this repair
		}
		if v != nil && isSub(v) {
			n++
		}
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return errf(syscall.EIO, "count subdirectories of %s: %v", f, err)
	}
	for k, v := range s.vals {
		if !seen[k] && v != nil && strings.HasPrefix(k, string(p)) && isSub(v) {
			n++ // added by this repair
		}
	}
	if !followUp && d.Nlink == 0 && PendingOrphan(s, f) {
		return errStale // removed meanwhile, kept while a client has it open
	}
	if d.Nlink == n {
		if followUp {
			return nil
		}
		return errStale
	}
	d.Nlink = n
	s.putInode(local, d)
	return nil
}

func (s *stage) newStripe(n *pb.LfsckNewStripe) error {
	x := s.x
	f := fid.FromPB(n.Fid)
	local, ino, err := s.getInode(f)
	if err != nil {
		return err
	}
	l := ino.Layout
	if l == nil || int(n.Index) >= len(l.Objects) {
		return errf(syscall.EINVAL, "new stripe %d of %s: no such slot", n.Index, f)
	}
	p := x.t.pools[n.Ost]
	if p == nil || p.Next >= p.End {
		return errf(syscall.ENOSPC, "new stripe for %s: no precreated object on OST%04x", f, n.Ost)
	}
	l.Objects[n.Index] = &pb.StripeObject{Ost: n.Ost, Seq: p.Seq, Oid: p.Next}
	p.Next++
	x.st.dirtyPools[n.Ost] = true
	ino.CtimeNs = x.now
	s.putInode(local, ino)
	return nil
}

// LfsckCounters reads one component's counters from r: kind -> found,
// repaired.
func LfsckCounters(r kv.Reader, comp uint32) (map[uint32][2]uint64, error) {
	p := LfsckCounterPrefix(comp)
	it, err := r.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	out := map[uint32][2]uint64{}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != len(p)+1 || !bytes.HasPrefix(k, p) {
			continue
		}
		f, r := DecodeCounter(it.Value())
		out[uint32(k[len(p)])] = [2]uint64{f, r}
	}
	return out, it.Error()
}

// AllocatedBefore reports whether f was handed out by this MDT's FID
// allocator already (re-creating it cannot collide with a future create).
func (t *Target) AllocatedBefore(f fid.FID) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	x := &txn{t: t}
	return x.allocatedBefore(f)
}

// ValidName checks a name as create does.
func ValidName(name string) error { return checkName(name) }
