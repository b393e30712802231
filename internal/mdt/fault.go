package mdt

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// Fault injection (`nacre fault inject`, catalogue in internal/fault):
// BuildFault reads the current state and returns the MDT change, as a
// FaultOp for the log (so every replica is damaged the same way, only if
// nothing changed since it was built), and the OST half, which the MDS
// applies through the OSSs first. Each kind has its builder in
// faultBuilders: a small function over a faultBuild, which holds the
// object as read and the change so far.

// OSTFault is the OST half of a fault.
type OSTFault struct {
	OST  uint32
	Kind string // delete, set_record, clear_pfid (internal/ost.FaultObject)
	Obj  *pb.StripeObject
	Rec  *pb.ObjectAttr
}

// farLocal is a local key no allocation reaches (allocation counts up
// from 2): fault injection's stale and duplicate objects live there.
const farLocal = 1 << 62

// faultBuilder adds one kind of damage to b.
type faultBuilder func(b *faultBuild) error

// faultBuilders has a builder for every kind of fault.Kinds
// (TestEveryKindHasABuilder).
var faultBuilders = map[fault.Kind]faultBuilder{
	fault.OIMissing:         oiMissing,
	fault.OIStale:           oiStale,
	fault.OIConflict:        oiConflict,
	fault.OIDangling:        oiDangling,
	fault.DirentFID:         direntFID,
	fault.DirentGarbage:     direntGarbage,
	fault.DirentMissing:     direntMissing,
	fault.Dangling:          dangling,
	fault.DanglingDir:       dangling,
	fault.LinkEAMissing:     linkEAMissing,
	fault.LinkEABad:         linkEABad,
	fault.LinkEAExtra:       linkEAExtra,
	fault.LinkEARenamed:     linkEARenamed,
	fault.LinkEAOverflow:    linkEAOverflow,
	fault.LinkEAStale:       linkEAStale,
	fault.DirentAlien:       direntAlien,
	fault.DirSecondName:     dirSecondName,
	fault.LinkEAClaim:       linkEAClaim,
	fault.LinkEAUnmatched:   linkEAUnmatched,
	fault.NlinkLess:         nlinkLess,
	fault.DirNlink:          dirNlink,
	fault.BadType:           badType,
	fault.Orphan:            orphan,
	fault.OrphanDir:         orphan,
	fault.LostParent:        lostParent,
	fault.RemoteDangling:    remoteDangling,
	fault.RemoteLostName:    remoteLostName,
	fault.OSTObjectMissing:  ostObjectMissing,
	fault.PFIDMissingParent: ostRecord(pfidMissingParent),
	fault.PFIDOtherFile:     ostRecord(pfidOtherFile),
	fault.StripeIndex:       ostRecord(stripeIndex),
	fault.Owner:             ostRecord(owner),
	fault.MultipleReference: multipleReference,
	fault.SlotLost:          slotLost,
	fault.LostMDTObject:     lostMDTObject(false),
	fault.LostLayout:        lostLayout,
	fault.OrphanNoPFID:      lostMDTObject(true),
	fault.SlotConflict:      slotConflict,
}

// BuildFault builds the damage req describes.
func (t *Target) BuildFault(req *pb.FaultInjectRequest) (*pb.FaultOp, []OSTFault, error) {
	r := kv.Reader(t.db)
	f := fid.FromPB(req.Fid)
	if fault.OnParentMDT(fault.Kind(req.Kind)) {
		// The object is on another MDT: only its entry is here.
		b := &faultBuild{t: t, r: r, req: req, f: f, name: string(req.Name), ch: &pb.LfsckRepair{}, pf: fid.FromPB(req.Parent)}
		if err := faultBuilders[fault.Kind(req.Kind)](b); err != nil {
			return nil, nil, err
		}
		return &pb.FaultOp{Kind: req.Kind, Change: b.ch}, nil, nil
	}
	local, ino, err := getInode(r, f)
	if err != nil {
		return nil, nil, fmt.Errorf("fault %s: %w", req.Kind, err)
	}
	v, err := r.Get(ObjKey(local))
	if err != nil {
		return nil, nil, err
	}
	b := &faultBuild{t: t, r: r, req: req, f: f, name: string(req.Name), local: local, ino: ino, ch: &pb.LfsckRepair{}}
	b.cond(ObjKey(local), v)
	b.oi, _ = r.Get(OIKey(f))
	b.pf = fid.FromPB(req.Parent)
	build := faultBuilders[fault.Kind(req.Kind)]
	if build == nil {
		return nil, nil, fmt.Errorf("unknown fault kind %q (see nacre fault list)", req.Kind)
	}
	if err := build(b); err != nil {
		return nil, nil, err
	}
	if b.ostOnly {
		return nil, b.osts, nil
	}
	return &pb.FaultOp{Kind: req.Kind, Change: b.ch}, b.osts, nil
}

// faultBuild is one fault being built: the object as read, and the
// change so far.
type faultBuild struct {
	t     *Target
	r     kv.Reader
	req   *pb.FaultInjectRequest
	f     fid.FID
	name  string // the object's name in its directory
	local uint64
	ino   *pb.Inode
	oi    []byte // the object's OI entry
	ch    *pb.LfsckRepair
	osts  []OSTFault
	// ostOnly: the damage is all on the OSTs, the MDT is not changed.
	ostOnly bool

	// The entry naming the object: pf is its directory (from the
	// request); entry() reads the rest.
	pf     fid.FID
	plocal uint64
	pino   *pb.Inode
	dk, dv []byte

	// Layout kinds: stripe I and the record the OST should hold for it
	// (stripe()).
	slot *pb.StripeObject
	rec  *pb.ObjectAttr
}

// errorf is an error about this fault: "fault KIND: ...".
func (b *faultBuild) errorf(format string, args ...any) error {
	return fmt.Errorf("fault %s: "+format, append([]any{b.req.Kind}, args...)...)
}

// cond makes the change apply only if key k still holds v (nil: absent).
func (b *faultBuild) cond(k, v []byte) {
	if v == nil {
		b.ch.Conds = append(b.ch.Conds, &pb.LfsckCond{Key: k, Absent: true})
	} else {
		b.ch.Conds = append(b.ch.Conds, &pb.LfsckCond{Key: k, Digest: Digest(v)})
	}
}

func (b *faultBuild) set(k, v []byte) {
	b.ch.Muts = append(b.ch.Muts, &pb.LfsckMut{M: &pb.LfsckMut_Set{Set: &pb.LfsckKV{Key: k, Value: v}}})
}

func (b *faultBuild) del(k []byte) {
	b.ch.Muts = append(b.ch.Muts, &pb.LfsckMut{M: &pb.LfsckMut_Del{Del: k}})
}

// putIno writes the object back as changed.
func (b *faultBuild) putIno() { b.set(ObjKey(b.local), mustMarshal(b.ino)) }

// entry reads the directory entry naming the object (most kinds need it).
func (b *faultBuild) entry() error {
	if b.pf.IsZero() || b.name == "" {
		return fmt.Errorf("fault %s needs the object's directory and name", b.req.Kind)
	}
	var err error
	if b.plocal, b.pino, err = getInode(b.r, b.pf); err != nil {
		return err
	}
	b.dk = DirentKey(b.plocal, b.name)
	if b.dv, err = b.r.Get(b.dk); err != nil {
		return b.errorf("no entry %q in %s", b.name, b.pf)
	}
	if cf, _, ok := decodeDirent(b.dv); !ok || cf != b.f {
		return b.errorf("entry %q does not name %s", b.name, b.f)
	}
	b.cond(b.dk, b.dv)
	return nil
}

// extraEntry adds an entry naming the object, of type mode, beside its
// own (entry() first), where there is none.
func (b *faultBuild) extraEntry(suffix string, mode uint32) {
	k := DirentKey(b.plocal, b.name+suffix)
	b.cond(k, nil)
	b.set(k, encodeDirent(b.f, DirentType(mode)))
}

// dropXattrs deletes the extended attributes of local object l.
func (b *faultBuild) dropXattrs(l uint64) error {
	p := xattrPrefix(l)
	it, err := b.r.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		b.del(append([]byte(nil), it.Key()...))
	}
	return it.Error()
}

// removeObject deletes the object, its OI entry and its extended
// attributes; with queue, its OST objects go on the unlink queue.
func (b *faultBuild) removeObject(queue bool) error {
	b.del(OIKey(b.f))
	b.del(ObjKey(b.local))
	if err := b.dropXattrs(b.local); err != nil {
		return err
	}
	if queue && b.ino.Layout != nil {
		for _, o := range b.ino.Layout.Objects {
			if o.Seq != 0 || o.Oid != 0 {
				b.set(unlinkKey(o.Ost, o.Seq, o.Oid), nil)
			}
		}
	}
	b.ch.InodesDelta = -1
	return nil
}

// stripe reads stripe I (req.Stripe) of the file and the record its OST
// object should hold.
func (b *faultBuild) stripe() error {
	ino := b.ino
	if !isReg(ino) || ino.Layout == nil || int(b.req.Stripe) >= len(ino.Layout.Objects) {
		return b.errorf("%s has no stripe %d", b.f, b.req.Stripe)
	}
	l := ino.Layout
	b.slot = l.Objects[b.req.Stripe]
	b.rec = &pb.ObjectAttr{Seq: b.slot.Seq, Oid: b.slot.Oid, Parent: b.f.PB(), StripeIndex: b.req.Stripe, StripeSize: l.StripeSize,
		StripeCount: uint32(len(l.Objects)), LayoutGen: l.Generation, Uid: ino.Uid, Gid: ino.Gid, Projid: ino.Projid}
	return nil
}

// needFile refuses a directory.
func (b *faultBuild) needFile() error {
	if isDir(b.ino) {
		return b.errorf("use a file")
	}
	return nil
}

// needDir refuses anything but a directory.
func (b *faultBuild) needDir() error {
	if !isDir(b.ino) {
		return b.errorf("use a directory")
	}
	return nil
}

// needData refuses anything but a regular file with a layout.
func (b *faultBuild) needData() error {
	if !isReg(b.ino) || b.ino.Layout == nil {
		return b.errorf("use a regular file with data")
	}
	return nil
}

// freeName refuses a name directory dlocal has (what the damage
// invents must be new), and makes the change conditional on its staying
// free. where names the directory in the error.
func (b *faultBuild) freeName(dlocal uint64, name, where string) error {
	if _, _, found, _ := lookupName(b.r, dlocal, name); found {
		return b.errorf("%s has an entry %q", where, name)
	}
	b.cond(DirentKey(dlocal, name), nil)
	return nil
}

// namesAgree refuses an object whose linkEA does not hold one entry per
// link.
func (b *faultBuild) namesAgree() error {
	if uint32(len(b.ino.Links)) != b.ino.Nlink {
		return b.errorf("%s has %d linkEA entries for %d links; use a file whose names agree", b.f, len(b.ino.Links), b.ino.Nlink)
	}
	return nil
}

// addToNlink changes the nlink of the object's directory (entry() first)
// by d.
func (b *faultBuild) addToNlink(d int) {
	pv, _ := b.r.Get(ObjKey(b.plocal))
	b.cond(ObjKey(b.plocal), pv)
	b.pino.Nlink = uint32(int(b.pino.Nlink) + d)
	b.set(ObjKey(b.plocal), mustMarshal(b.pino))
}

// OI scrub kinds.

func oiMissing(b *faultBuild) error {
	b.cond(OIKey(b.f), b.oi)
	b.del(OIKey(b.f))
	return nil
}

func oiStale(b *faultBuild) error {
	b.cond(OIKey(b.f), b.oi)
	b.cond(ObjKey(farLocal|b.local), nil)
	b.set(OIKey(b.f), putU64(farLocal|b.local))
	return nil
}

func oiConflict(b *faultBuild) error {
	dup := cloneInode(b.ino)
	dup.MtimeNs -= int64(time.Second)
	dup.CtimeNs -= int64(time.Second)
	b.cond(OIKey(b.f), b.oi)
	b.cond(ObjKey(farLocal|b.local), nil)
	b.set(ObjKey(farLocal|b.local), mustMarshal(dup))
	b.set(OIKey(b.f), putU64(farLocal|b.local))
	b.ch.InodesDelta = 1
	return nil
}

func oiDangling(b *faultBuild) error {
	g := fid.FID{Seq: b.f.Seq, Oid: b.f.Oid, Ver: 1}
	b.cond(OIKey(g), nil)
	b.set(OIKey(g), putU64(b.local))
	return nil
}

// Namespace kinds: directory entries.

func direntFID(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	bogus := fid.FID{Seq: b.f.Seq, Oid: fid.Width - 1}
	b.cond(OIKey(bogus), nil)
	b.set(b.dk, encodeDirent(bogus, DirentType(b.ino.Mode)))
	return nil
}

func direntGarbage(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	b.set(b.dk, []byte{0xde, 0xad, 0x01})
	return nil
}

func direntMissing(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	if err := b.needFile(); err != nil {
		return err
	}
	b.del(b.dk)
	return nil
}

func direntAlien(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	if isDir(b.ino) || b.ino.Mode&syscall.S_IFMT == syscall.S_IFLNK {
		return b.errorf("use a regular file")
	}
	b.extraEntry(".alien", syscall.S_IFLNK)
	return nil
}

func dirSecondName(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	if err := b.needDir(); err != nil {
		return err
	}
	b.extraEntry(".second", syscall.S_IFDIR)
	// The parent counts the new entry as a subdirectory, as a link made
	// by the file system would: only the name is wrong.
	b.addToNlink(+1)
	return nil
}

func badType(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	b.set(b.dk, encodeDirent(b.f, DirentType(syscall.S_IFLNK)))
	return nil
}

// dangling removes the object (an empty directory's too) and keeps its
// entry.
func dangling(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	if isDir(b.ino) {
		if empty, err := dirEmpty(b.r, b.local); err != nil || !empty {
			return b.errorf("the directory must be empty")
		}
	}
	return b.removeObject(true)
}

// remoteDangling removes a remote directory's object; its entry is on
// the parent's MDT, which this one is not.
func remoteDangling(b *faultBuild) error {
	if err := b.needDir(); err != nil {
		return err
	}
	if len(b.ino.Links) != 1 || !b.ino.Links[0].Remote {
		return b.errorf("%s is not a remote directory (make one with nacre mkdir -i)", b.f)
	}
	if empty, err := dirEmpty(b.r, b.local); err != nil || !empty {
		return b.errorf("the directory must be empty")
	}
	return b.removeObject(false)
}

// remoteLostName removes a remote directory's entry, here on its
// parent's MDT; the directory stays on its own.
func remoteLostName(b *faultBuild) error {
	if b.pf.IsZero() || b.name == "" {
		return b.errorf("needs the directory's parent and name")
	}
	var err error
	if b.plocal, b.pino, err = getInode(b.r, b.pf); err != nil {
		return b.errorf("the parent %s is not on %s: %v", b.pf, b.t.id.Label(), err)
	}
	b.dk = DirentKey(b.plocal, b.name)
	if b.dv, err = b.r.Get(b.dk); err != nil {
		return b.errorf("no entry %q in %s", b.name, b.pf)
	}
	if cf, _, ok := decodeDirent(b.dv); !ok || cf != b.f || !direntRemote(b.dv) {
		return b.errorf("entry %q is not the remote directory %s (make one with nacre mkdir -i)", b.name, b.f)
	}
	pv, err := b.r.Get(ObjKey(b.plocal))
	if err != nil {
		return err
	}
	b.cond(ObjKey(b.plocal), pv)
	b.cond(b.dk, b.dv)
	b.del(b.dk)
	if b.pino.Nlink > 2 {
		b.pino.Nlink--
	}
	b.set(ObjKey(b.plocal), mustMarshal(b.pino))
	return nil
}

// Namespace kinds: the linkEA.

func linkEAMissing(b *faultBuild) error {
	b.ino.Links = nil
	b.putIno()
	return nil
}

func linkEABad(b *faultBuild) error {
	if len(b.ino.Links) == 0 {
		return b.errorf("%s has no linkEA entry", b.f)
	}
	b.ino.Links[0].Parent.Ver = 0xffffffff
	b.putIno()
	return nil
}

func linkEAExtra(b *faultBuild) error {
	b.ino.Links = append(b.ino.Links, &pb.LinkEntry{Parent: fid.FID{Seq: b.f.Seq, Oid: fid.Width - 2}.PB(), Name: []byte("lost-parent")})
	b.putIno()
	return nil
}

func linkEARenamed(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	gone := b.name + ".renamed"
	if err := b.freeName(b.plocal, gone, "the directory"); err != nil {
		return err
	}
	renamed := false
	for _, l := range b.ino.Links {
		if fid.FromPB(l.Parent) == b.pf && string(l.Name) == b.name {
			l.Name, renamed = []byte(gone), true
		}
	}
	if !renamed {
		return b.errorf("the linkEA of %s has no entry %q", b.f, b.name)
	}
	b.putIno()
	return nil
}

func linkEAOverflow(b *faultBuild) error {
	if err := b.needFile(); err != nil {
		return err
	}
	if err := b.namesAgree(); err != nil || b.ino.LinksOverflowIndex != 0 {
		return b.errorf("%s has %d linkEA entries for %d links; use a file whose names agree", b.f, len(b.ino.Links), b.ino.Nlink)
	}
	// Long before any run: a run clears only a mark older than itself.
	b.ino.LinksOverflowIndex = 1
	b.putIno()
	return nil
}

func linkEAStale(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	if err := b.needFile(); err != nil {
		return err
	}
	gone := b.name + ".stale"
	if err := b.freeName(b.plocal, gone, "the directory"); err != nil {
		return err
	}
	if err := b.namesAgree(); err != nil {
		return err
	}
	b.ino.Links = append(b.ino.Links, &pb.LinkEntry{Parent: b.pf.PB(), Name: []byte(gone)})
	b.putIno()
	return nil
}

func linkEAClaim(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	other, err := b.t.otherEntry(b.r, b.plocal, b.f, false)
	if err != nil {
		return err
	}
	b.ino.Links = append(b.ino.Links, &pb.LinkEntry{Parent: b.pf.PB(), Name: []byte(other)})
	b.putIno()
	return nil
}

func linkEAUnmatched(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	if err := b.needDir(); err != nil {
		return err
	}
	name := b.name + ".unmatched"
	if err := b.freeName(rootLocal, name, "the root"); err != nil {
		return err
	}
	b.ino.Links = []*pb.LinkEntry{{Parent: fid.Root.PB(), Name: []byte(name)}}
	b.putIno()
	return nil
}

// Namespace kinds: link counts and lost names.

func nlinkLess(b *faultBuild) error {
	if b.ino.Nlink < 2 || isDir(b.ino) {
		return b.errorf("use a file with two or more names")
	}
	b.ino.Nlink--
	b.putIno()
	return nil
}

func dirNlink(b *faultBuild) error {
	if err := b.needDir(); err != nil {
		return err
	}
	b.ino.Nlink += 3
	b.putIno()
	return nil
}

// orphan removes the object's entry and linkEA (a directory's parent's
// nlink follows).
func orphan(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	b.del(b.dk)
	b.ino.Links = nil
	b.putIno()
	if isDir(b.ino) {
		b.addToNlink(-1)
	}
	return nil
}

func lostParent(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	if b.pf == fid.Root || len(b.pino.Links) != 1 {
		return b.errorf("the file's directory must be an ordinary directory")
	}
	if other, err := b.t.otherEntry(b.r, b.plocal, b.f, true); err == nil {
		return b.errorf("the directory holds %q too; use a directory holding only the file", other)
	}
	gp := fid.FromPB(b.pino.Links[0].Parent)
	glocal, gino, err := getInode(b.r, gp)
	if err != nil {
		return err
	}
	gdk := DirentKey(glocal, string(b.pino.Links[0].Name))
	gdv, err := b.r.Get(gdk)
	if err != nil {
		return err
	}
	gv, _ := b.r.Get(ObjKey(glocal))
	pv, _ := b.r.Get(ObjKey(b.plocal))
	b.cond(gdk, gdv)
	b.cond(ObjKey(glocal), gv)
	b.cond(ObjKey(b.plocal), pv)
	b.del(gdk)
	gino.Nlink--
	b.set(ObjKey(glocal), mustMarshal(gino))
	b.del(b.dk)
	b.del(OIKey(b.pf))
	b.del(ObjKey(b.plocal))
	if err := b.dropXattrs(b.plocal); err != nil {
		return err
	}
	b.ch.InodesDelta = -1
	return nil
}

// Layout kinds.

func ostObjectMissing(b *faultBuild) error {
	if err := b.stripe(); err != nil {
		return err
	}
	b.osts = append(b.osts, OSTFault{OST: b.slot.Ost, Kind: "delete", Obj: b.slot})
	b.ostOnly = true
	return nil
}

// ostRecord is a kind that stores a wrong record on stripe I's OST
// object (edit changes the right one) and leaves the MDT alone.
func ostRecord(edit func(b *faultBuild) error) faultBuilder {
	return func(b *faultBuild) error {
		if err := b.stripe(); err != nil {
			return err
		}
		if err := edit(b); err != nil {
			return err
		}
		b.osts = append(b.osts, OSTFault{OST: b.slot.Ost, Kind: "set_record", Obj: b.slot, Rec: b.rec})
		b.ostOnly = true
		return nil
	}
}

func pfidMissingParent(b *faultBuild) error {
	b.rec.Parent = fid.FID{Seq: b.f.Seq, Oid: fid.Width - 3}.PB()
	return nil
}

func pfidOtherFile(b *faultBuild) error {
	if b.pf.IsZero() {
		return fmt.Errorf("fault %s needs the file's directory", b.req.Kind)
	}
	b.rec.Parent = b.pf.PB()
	return nil
}

func stripeIndex(b *faultBuild) error {
	b.rec.StripeIndex = (b.req.Stripe + 1) % uint32(max(2, len(b.ino.Layout.Objects)))
	return nil
}

func owner(b *faultBuild) error {
	b.rec.Uid += 1000
	b.rec.Gid += 1000
	return nil
}

func slotLost(b *faultBuild) error {
	if err := b.stripe(); err != nil {
		return err
	}
	// An id far above any the OST has handed out: the slot dangles, and
	// the real object, still claiming it, is an orphan.
	lost := proto.Clone(b.slot).(*pb.StripeObject)
	lost.Oid |= 1 << 46
	b.ino.Layout.Objects[b.req.Stripe] = lost
	b.putIno()
	return nil
}

func multipleReference(b *faultBuild) error {
	if err := b.entry(); err != nil {
		return err
	}
	if err := b.stripe(); err != nil {
		return err
	}
	other, err := b.t.otherObjectOn(b.r, b.plocal, b.f, b.slot.Ost)
	if err != nil {
		return b.errorf("%w", err)
	}
	b.osts = append(b.osts, OSTFault{OST: b.slot.Ost, Kind: "delete", Obj: proto.Clone(b.slot).(*pb.StripeObject)})
	b.ino.Layout.Objects[b.req.Stripe] = other
	b.putIno()
	return nil
}

// lostMDTObject removes the file's object and name, keeping its OST
// objects (with clearPFIDs, without their PFIDs).
func lostMDTObject(clearPFIDs bool) faultBuilder {
	return func(b *faultBuild) error {
		if err := b.entry(); err != nil {
			return err
		}
		if err := b.needData(); err != nil {
			return err
		}
		b.del(b.dk)
		if err := b.removeObject(false); err != nil {
			return err
		}
		if clearPFIDs {
			for _, o := range b.ino.Layout.Objects {
				b.osts = append(b.osts, OSTFault{OST: o.Ost, Kind: "clear_pfid", Obj: o})
			}
		}
		return nil
	}
}

func lostLayout(b *faultBuild) error {
	if err := b.needData(); err != nil {
		return err
	}
	b.ino.Layout = nil
	b.putIno()
	return nil
}

func slotConflict(b *faultBuild) error {
	if err := b.stripe(); err != nil {
		return err
	}
	b.ch.Muts = append(b.ch.Muts, &pb.LfsckMut{M: &pb.LfsckMut_NewStripe{NewStripe: &pb.LfsckNewStripe{Fid: b.f.PB(), Index: b.req.Stripe, Ost: b.slot.Ost}}})
	return nil
}

// otherEntry returns the name of another entry of directory plocal (one
// whose object claims it, unless any is set).
func (t *Target) otherEntry(r kv.Reader, plocal uint64, not fid.FID, any bool) (string, error) {
	p := DirentPrefix(plocal)
	it, err := r.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return "", err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		cf, _, ok := decodeDirent(it.Value())
		if !ok || cf == not {
			continue
		}
		name := string(it.Key()[17:])
		if any {
			return name, nil
		}
		if _, ino, err := getInode(r, cf); err == nil && !isDir(ino) {
			return name, nil
		}
	}
	return "", errors.New("the directory holds no other file")
}

// otherObjectOn returns an OST object on ost of another regular file in
// directory plocal.
func (t *Target) otherObjectOn(r kv.Reader, plocal uint64, not fid.FID, ost uint32) (*pb.StripeObject, error) {
	p := DirentPrefix(plocal)
	it, err := r.NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		cf, _, ok := decodeDirent(it.Value())
		if !ok || cf == not {
			continue
		}
		if _, ino, err := getInode(r, cf); err == nil && isReg(ino) && ino.Layout != nil {
			for _, o := range ino.Layout.Objects {
				if o.Ost == ost && (o.Seq != 0 || o.Oid != 0) {
					return proto.Clone(o).(*pb.StripeObject), nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no other file in the directory has an object on OST%04x", ost)
}
