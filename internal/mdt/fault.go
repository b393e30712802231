package mdt

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

// Fault injection (`nacre fault inject`, catalogue in internal/fault):
// BuildFault reads the current state and returns the MDT change, as a
// FaultOp for the log (so every replica is damaged the same way, only if
// nothing changed since it was built), and the OST half, which the MDS
// applies through the OSSs first.

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

// BuildFault builds the damage req describes.
func (t *Target) BuildFault(req *pb.FaultInjectRequest) (*pb.FaultOp, []OSTFault, error) {
	r := kv.Reader(t.db)
	f := fid.FromPB(req.Fid)
	reqName := string(req.Name)
	local, ino, err := getInode(r, f)
	if err != nil {
		return nil, nil, fmt.Errorf("fault %s: %w", req.Kind, err)
	}
	v, err := r.Get(ObjKey(local))
	if err != nil {
		return nil, nil, err
	}
	ch := &pb.LfsckRepair{}
	cond := func(k, v []byte) {
		if v == nil {
			ch.Conds = append(ch.Conds, &pb.LfsckCond{Key: k, Absent: true})
		} else {
			ch.Conds = append(ch.Conds, &pb.LfsckCond{Key: k, Digest: Digest(v)})
		}
	}
	set := func(k, v []byte) {
		ch.Muts = append(ch.Muts, &pb.LfsckMut{M: &pb.LfsckMut_Set{Set: &pb.LfsckKV{Key: k, Value: v}}})
	}
	del := func(k []byte) { ch.Muts = append(ch.Muts, &pb.LfsckMut{M: &pb.LfsckMut_Del{Del: k}}) }
	cond(ObjKey(local), v)
	putIno := func() { set(ObjKey(local), mustMarshal(ino)) }
	ov, _ := r.Get(OIKey(f))
	// The entry naming the object (most kinds).
	pf := fid.FromPB(req.Parent)
	var plocal uint64
	var pino *pb.Inode
	var dk, dv []byte
	entry := func() error {
		if pf.IsZero() || reqName == "" {
			return fmt.Errorf("fault %s needs the object's directory and name", req.Kind)
		}
		var err error
		if plocal, pino, err = getInode(r, pf); err != nil {
			return err
		}
		dk = DirentKey(plocal, reqName)
		if dv, err = r.Get(dk); err != nil {
			return fmt.Errorf("fault %s: no entry %q in %s", req.Kind, reqName, pf)
		}
		if cf, _, ok := decodeDirent(dv); !ok || cf != f {
			return fmt.Errorf("fault %s: entry %q does not name %s", req.Kind, reqName, f)
		}
		cond(dk, dv)
		return nil
	}
	// extraEntry adds an entry naming the object, of type mode, beside
	// its own (entry() first), where there is none.
	extraEntry := func(suffix string, mode uint32) {
		k := DirentKey(plocal, reqName+suffix)
		cond(k, nil)
		set(k, encodeDirent(f, DirentType(mode)))
	}
	dropXattrs := func(l uint64) error {
		p := xattrPrefix(l)
		it, err := r.NewIter(p, kv.PrefixEnd(p))
		if err != nil {
			return err
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			del(append([]byte(nil), it.Key()...))
		}
		return it.Error()
	}
	removeObject := func(queue bool) error {
		del(OIKey(f))
		del(ObjKey(local))
		if err := dropXattrs(local); err != nil {
			return err
		}
		if queue && ino.Layout != nil {
			for _, o := range ino.Layout.Objects {
				if o.Seq != 0 || o.Oid != 0 {
					set(unlinkKey(o.Ost, o.Seq, o.Oid), nil)
				}
			}
		}
		ch.InodesDelta = -1
		return nil
	}
	var osts []OSTFault
	// Layout kinds: stripe I and the record the OST should hold for it.
	var slot *pb.StripeObject
	var rec *pb.ObjectAttr
	stripeOf := func() error {
		if !isReg(ino) || ino.Layout == nil || int(req.Stripe) >= len(ino.Layout.Objects) {
			return fmt.Errorf("fault %s: %s has no stripe %d", req.Kind, f, req.Stripe)
		}
		l := ino.Layout
		slot = l.Objects[req.Stripe]
		rec = &pb.ObjectAttr{Seq: slot.Seq, Oid: slot.Oid, Parent: f.PB(), StripeIndex: req.Stripe, StripeSize: l.StripeSize,
			StripeCount: uint32(len(l.Objects)), LayoutGen: l.Generation, Uid: ino.Uid, Gid: ino.Gid, Projid: ino.Projid}
		return nil
	}
	switch req.Kind {
	case "oi_missing":
		cond(OIKey(f), ov)
		del(OIKey(f))
	case "oi_stale":
		cond(OIKey(f), ov)
		cond(ObjKey(farLocal|local), nil)
		set(OIKey(f), putU64(farLocal|local))
	case "oi_conflict":
		dup := cloneInode(ino)
		dup.MtimeNs -= int64(time.Second)
		dup.CtimeNs -= int64(time.Second)
		cond(OIKey(f), ov)
		cond(ObjKey(farLocal|local), nil)
		set(ObjKey(farLocal|local), mustMarshal(dup))
		set(OIKey(f), putU64(farLocal|local))
		ch.InodesDelta = 1
	case "oi_dangling":
		g := fid.FID{Seq: f.Seq, Oid: f.Oid, Ver: 1}
		cond(OIKey(g), nil)
		set(OIKey(g), putU64(local))
	case "dirent_fid":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		bogus := fid.FID{Seq: f.Seq, Oid: fid.Width - 1}
		cond(OIKey(bogus), nil)
		set(dk, encodeDirent(bogus, DirentType(ino.Mode)))
	case "dirent_garbage":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		set(dk, []byte{0xde, 0xad, 0x01})
	case "dirent_missing":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		if isDir(ino) {
			return nil, nil, fmt.Errorf("fault %s: use a file", req.Kind)
		}
		del(dk)
	case "dangling", "dangling_dir":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		if isDir(ino) {
			if empty, err := dirEmpty(r, local); err != nil || !empty {
				return nil, nil, fmt.Errorf("fault %s: the directory must be empty", req.Kind)
			}
		}
		if err := removeObject(true); err != nil {
			return nil, nil, err
		}
	case "linkea_missing":
		ino.Links = nil
		putIno()
	case "linkea_bad":
		if len(ino.Links) == 0 {
			return nil, nil, fmt.Errorf("fault %s: %s has no linkEA entry", req.Kind, f)
		}
		ino.Links[0].Parent.Ver = 0xffffffff
		putIno()
	case "linkea_extra":
		ino.Links = append(ino.Links, &pb.LinkEntry{Parent: fid.FID{Seq: f.Seq, Oid: fid.Width - 2}.PB(), Name: []byte("lost-parent")})
		putIno()
	case "linkea_renamed":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		gone := reqName + ".renamed"
		if _, _, found, _ := lookupName(r, plocal, gone); found {
			return nil, nil, fmt.Errorf("fault %s: the directory has an entry %q", req.Kind, gone)
		}
		cond(DirentKey(plocal, gone), nil)
		renamed := false
		for _, l := range ino.Links {
			if fid.FromPB(l.Parent) == pf && string(l.Name) == reqName {
				l.Name, renamed = []byte(gone), true
			}
		}
		if !renamed {
			return nil, nil, fmt.Errorf("fault %s: the linkEA of %s has no entry %q", req.Kind, f, reqName)
		}
		putIno()
	case "linkea_overflow":
		if isDir(ino) {
			return nil, nil, fmt.Errorf("fault %s: use a file", req.Kind)
		}
		if uint32(len(ino.Links)) != ino.Nlink || ino.LinksOverflowIndex != 0 {
			return nil, nil, fmt.Errorf("fault %s: %s has %d linkEA entries for %d links; use a file whose names agree", req.Kind, f, len(ino.Links), ino.Nlink)
		}
		// Long before any run: a run clears only a mark older than itself.
		ino.LinksOverflowIndex = 1
		putIno()
	case "linkea_stale":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		if isDir(ino) {
			return nil, nil, fmt.Errorf("fault %s: use a file", req.Kind)
		}
		gone := reqName + ".stale"
		if _, _, found, _ := lookupName(r, plocal, gone); found {
			return nil, nil, fmt.Errorf("fault %s: the directory has an entry %q", req.Kind, gone)
		}
		if uint32(len(ino.Links)) != ino.Nlink {
			return nil, nil, fmt.Errorf("fault %s: %s has %d linkEA entries for %d links; use a file whose names agree", req.Kind, f, len(ino.Links), ino.Nlink)
		}
		cond(DirentKey(plocal, gone), nil)
		ino.Links = append(ino.Links, &pb.LinkEntry{Parent: pf.PB(), Name: []byte(gone)})
		putIno()
	case "dirent_alien":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		if isDir(ino) || ino.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			return nil, nil, fmt.Errorf("fault %s: use a regular file", req.Kind)
		}
		extraEntry(".alien", syscall.S_IFLNK)
	case "dir_second_name":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		if !isDir(ino) {
			return nil, nil, fmt.Errorf("fault %s: use a directory", req.Kind)
		}
		extraEntry(".second", syscall.S_IFDIR)
		// The parent counts the new entry as a subdirectory, as a link
		// made by the file system would: only the name is wrong.
		pv, _ := r.Get(ObjKey(plocal))
		cond(ObjKey(plocal), pv)
		pino.Nlink++
		set(ObjKey(plocal), mustMarshal(pino))
	case "linkea_claim":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		other, err := t.otherEntry(r, plocal, f, false)
		if err != nil {
			return nil, nil, err
		}
		ino.Links = append(ino.Links, &pb.LinkEntry{Parent: pf.PB(), Name: []byte(other)})
		putIno()
	case "linkea_unmatched":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		if !isDir(ino) {
			return nil, nil, fmt.Errorf("fault %s: use a directory", req.Kind)
		}
		name := reqName + ".unmatched"
		if _, _, found, _ := lookupName(r, rootLocal, name); found {
			return nil, nil, fmt.Errorf("fault %s: the root has an entry %q", req.Kind, name)
		}
		cond(DirentKey(rootLocal, name), nil)
		ino.Links = []*pb.LinkEntry{{Parent: fid.Root.PB(), Name: []byte(name)}}
		putIno()
	case "nlink_less":
		if ino.Nlink < 2 || isDir(ino) {
			return nil, nil, fmt.Errorf("fault %s: use a file with two or more names", req.Kind)
		}
		ino.Nlink--
		putIno()
	case "dir_nlink":
		if !isDir(ino) {
			return nil, nil, fmt.Errorf("fault %s: use a directory", req.Kind)
		}
		ino.Nlink += 3
		putIno()
	case "bad_type":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		set(dk, encodeDirent(f, DirentType(syscall.S_IFLNK)))
	case "orphan", "orphan_dir":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		del(dk)
		ino.Links = nil
		putIno()
		if isDir(ino) {
			pv, _ := r.Get(ObjKey(plocal))
			cond(ObjKey(plocal), pv)
			pino.Nlink--
			set(ObjKey(plocal), mustMarshal(pino))
		}
	case "lost_parent":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		if pf == fid.Root || len(pino.Links) != 1 {
			return nil, nil, fmt.Errorf("fault %s: the file's directory must be an ordinary directory", req.Kind)
		}
		if other, err := t.otherEntry(r, plocal, f, true); err == nil {
			return nil, nil, fmt.Errorf("fault %s: the directory holds %q too; use a directory holding only the file", req.Kind, other)
		}
		gp := fid.FromPB(pino.Links[0].Parent)
		glocal, gino, err := getInode(r, gp)
		if err != nil {
			return nil, nil, err
		}
		gdk := DirentKey(glocal, string(pino.Links[0].Name))
		gdv, err := r.Get(gdk)
		if err != nil {
			return nil, nil, err
		}
		gv, _ := r.Get(ObjKey(glocal))
		pv, _ := r.Get(ObjKey(plocal))
		cond(gdk, gdv)
		cond(ObjKey(glocal), gv)
		cond(ObjKey(plocal), pv)
		del(gdk)
		gino.Nlink--
		set(ObjKey(glocal), mustMarshal(gino))
		del(dk)
		del(OIKey(pf))
		del(ObjKey(plocal))
		if err := dropXattrs(plocal); err != nil {
			return nil, nil, err
		}
		ch.InodesDelta = -1
	case "ost_object_missing", "pfid_missing_parent", "pfid_other_file", "stripe_index", "owner":
		if err := stripeOf(); err != nil {
			return nil, nil, err
		}
		switch req.Kind {
		case "ost_object_missing":
			osts = append(osts, OSTFault{OST: slot.Ost, Kind: "delete", Obj: slot})
		case "pfid_missing_parent":
			rec.Parent = fid.FID{Seq: f.Seq, Oid: fid.Width - 3}.PB()
		case "pfid_other_file":
			if pf.IsZero() {
				return nil, nil, fmt.Errorf("fault %s needs the file's directory", req.Kind)
			}
			rec.Parent = pf.PB()
		case "stripe_index":
			rec.StripeIndex = (req.Stripe + 1) % uint32(max(2, len(ino.Layout.Objects)))
		case "owner":
			rec.Uid += 1000
			rec.Gid += 1000
		}
		if req.Kind != "ost_object_missing" {
			osts = append(osts, OSTFault{OST: slot.Ost, Kind: "set_record", Obj: slot, Rec: rec})
		}
		return nil, osts, nil
	case "slot_lost":
		if err := stripeOf(); err != nil {
			return nil, nil, err
		}
		// An id far above any the OST has handed out: the slot dangles,
		// and the real object, still claiming it, is an orphan.
		lost := proto.Clone(slot).(*pb.StripeObject)
		lost.Oid |= 1 << 46
		ino.Layout.Objects[req.Stripe] = lost
		putIno()
	case "multiple_reference":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		if err := stripeOf(); err != nil {
			return nil, nil, err
		}
		other, err := t.otherObjectOn(r, plocal, f, slot.Ost)
		if err != nil {
			return nil, nil, fmt.Errorf("fault %s: %w", req.Kind, err)
		}
		osts = append(osts, OSTFault{OST: slot.Ost, Kind: "delete", Obj: proto.Clone(slot).(*pb.StripeObject)})
		ino.Layout.Objects[req.Stripe] = other
		putIno()
	case "lost_mdt_object", "orphan_nopfid":
		if err := entry(); err != nil {
			return nil, nil, err
		}
		if !isReg(ino) || ino.Layout == nil {
			return nil, nil, fmt.Errorf("fault %s: use a regular file with data", req.Kind)
		}
		del(dk)
		if err := removeObject(false); err != nil {
			return nil, nil, err
		}
		if req.Kind == "orphan_nopfid" {
			for _, o := range ino.Layout.Objects {
				osts = append(osts, OSTFault{OST: o.Ost, Kind: "clear_pfid", Obj: o})
			}
		}
	case "lost_layout":
		if !isReg(ino) || ino.Layout == nil {
			return nil, nil, fmt.Errorf("fault %s: use a regular file with data", req.Kind)
		}
		ino.Layout = nil
		putIno()
	case "slot_conflict":
		if err := stripeOf(); err != nil {
			return nil, nil, err
		}
		ch.Muts = append(ch.Muts, &pb.LfsckMut{M: &pb.LfsckMut_NewStripe{NewStripe: &pb.LfsckNewStripe{Fid: f.PB(), Index: req.Stripe, Ost: slot.Ost}}})
	default:
		return nil, nil, fmt.Errorf("unknown fault kind %q (see nacre fault list)", req.Kind)
	}
	return &pb.FaultOp{Kind: req.Kind, Change: ch}, osts, nil
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
