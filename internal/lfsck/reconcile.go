package lfsck

import (
	"errors"
	"sort"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
)

// fix collects one object's repair.
type fix struct {
	conds       []*pb.LfsckCond
	condKeys    map[string]bool
	muts        []*pb.LfsckMut
	late        []*pb.LfsckMut // typed changes, after the raw ones
	kinds       map[uint32]bool
	reports     map[uint32]bool
	delta       int32
	reportKey   []byte
	added       bool
	dropped     bool
	droppedOwn  bool // a claim dropped because another object owns the name
	droppedLive bool // a claim dropped whose directory exists
}

func newFix() *fix {
	return &fix{condKeys: map[string]bool{}, kinds: map[uint32]bool{}, reports: map[uint32]bool{}}
}

func (f *fix) cond(k, v []byte) {
	if f.condKeys[string(k)] {
		return
	}
	f.condKeys[string(k)] = true
	if v == nil {
		f.conds = append(f.conds, condAbsent(k))
	} else {
		f.conds = append(f.conds, condVal(k, v))
	}
}

func (ns *nsCheck) emit(f *fix) {
	r := ns.r
	if len(f.kinds) == 0 && len(f.reports) == 0 {
		return
	}
	r.found(Namespace)
	if f.added && (f.droppedOwn || f.droppedLive) && !f.kinds[KNsLostDirent] {
		delete(f.kinds, KNsLinkEA)
		delete(f.kinds, KNsMultiRef)
		f.kinds[KNsUnmatched] = true
	}
	if len(f.kinds) > 0 {
		rep := &pb.LfsckRepair{Component: Namespace, Conds: f.conds, Muts: append(f.muts, f.late...), InodesDelta: f.delta}
		rep.Kinds = sortedKinds(f.kinds)
		if len(rep.Muts) == 0 {
			rep.ReportKey = append([]byte{'r'}, f.reportKey...)
		}
		r.rep.add(Namespace, nil, rep)
	}
	if len(f.reports) > 0 {
		r.rep.add(Namespace, nil, &pb.LfsckRepair{Component: Namespace, Kinds: sortedKinds(f.reports),
			ReportKey: append([]byte{'R'}, f.reportKey...)})
	}
}

func sortedKinds(m map[uint32]bool) []uint32 {
	var out []uint32
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func isDirMode(m uint32) bool { return m&syscall.S_IFMT == syscall.S_IFDIR }

// direntAt reads an entry: its value, whether it exists, and what it names.
func direntAt(g getter, plocal uint64, name string) ([]byte, bool, fid.FID, uint8, bool) {
	v, err := g.Get(mdt.DirentKey(plocal, name))
	if err != nil {
		return nil, false, fid.FID{}, 0, false
	}
	cf, typ, ok := mdt.DecodeDirent(v)
	return v, true, cf, typ, ok && !cf.IsZero()
}

// reconcile settles one object from its trace items.
func (ns *nsCheck) reconcile(child fid.FID, group []*pb.LfsckTraceItem, claims map[nameKey][]fid.FID, planned map[nameKey]fid.FID) error {
	r := ns.r
	snap := r.env.Target.DB().NewSnapshot()
	defer snap.Close()
	var entries []*pb.LfsckTraceItem
	full := false // names left out were not traced (flagFull)
	for _, it := range group {
		if it.Kind == itemEntry {
			entries = append(entries, it)
		}
		if it.Kind == itemObject && it.Flags&flagFull != 0 {
			full = true
		}
	}
	local, ino, err := r.lookup(snap, child)
	if errors.Is(err, errNoObject) || (err == nil && r.isLoser(local)) {
		if ns.dangling == nil {
			ns.dangling = map[fid.FID][]*pb.LfsckTraceItem{}
		}
		ns.dangling[child] = group
		return ns.missingChild(snap, child, entries, claims, planned)
	}
	if err != nil {
		return err
	}
	if child == fid.Root || child == fid.DotNacre {
		return ns.dropLoopEntries(snap, child, entries)
	}
	if child == fid.LostFound && len(ino.Links) == 1 && len(entries) == 0 {
		return nil
	}
	v, err := snap.Get(mdt.ObjKey(local))
	if err != nil {
		return err
	}
	f := newFix()
	f.reportKey = child.Bytes()
	f.cond(mdt.ObjKey(local), v)
	isDir := isDirMode(ino.Mode)
	typ := mdt.DirentType(ino.Mode)
	var keep []*pb.LinkEntry
	changed := false
	seen := map[nameKey]bool{}
	type staleName struct {
		l      *pb.LinkEntry
		dead   bool   // the parent does not exist
		plocal uint64 // the parent's local key (not dead)
		other  fid.FID
		dv     []byte
	}
	var stales []staleName
	for _, l := range ino.Links {
		nk := nameKey{fid.FromPB(l.Parent), string(l.Name)}
		if seen[nk] {
			changed, f.dropped = true, true
			f.kinds[KNsLinkEA] = true
			continue
		}
		seen[nk] = true
		plocal, pino, perr := r.lookup(snap, nk.parent)
		if perr != nil || !isDirMode(pino.Mode) || mdt.ValidName(nk.name) != nil {
			stales = append(stales, staleName{l: l, dead: true})
			continue
		}
		if ov, err := snap.Get(mdt.OIKey(nk.parent)); err == nil {
			f.cond(mdt.OIKey(nk.parent), ov)
		}
		if to, ok := planned[nk]; ok {
			if to == child {
				keep = append(keep, l)
			} else {
				stales = append(stales, staleName{l: l, plocal: plocal, other: to})
			}
			continue
		}
		dv, exists, cf, dtyp, ok := direntAt(snap, plocal, nk.name)
		switch {
		case !exists:
			stales = append(stales, staleName{l: l, plocal: plocal})
		case ok && cf == child:
			keep = append(keep, l)
			if dtyp != typ {
				// The linkEA recognises the entry: the entry's type is wrong.
				f.cond(mdt.DirentKey(plocal, nk.name), dv)
				f.muts = append(f.muts, setMut(mdt.DirentKey(plocal, nk.name), mdt.EncodeDirent(child, typ)))
				f.kinds[KNsBadType] = true
			}
		default:
			stales = append(stales, staleName{l: l, plocal: plocal, other: cf, dv: dv})
		}
	}
	// Entries that name the object but are not in its linkEA. An entry
	// whose name create would refuse is removed even when the linkEA
	// holds the name too (the loop above drops it there): it cannot be
	// looked up, and a name added to the linkEA here was dropped again by
	// the next run, so every run "repaired" it anew. A name that does not
	// fit in the linkEA's bound is counted (unrecorded) and left out, as
	// the MDT leaves it out: space is what the recorded list leaves.
	space := mdt.LinksMaxBytes - mdt.LinksBytes(ino)
	unrecorded := uint32(0)
	for _, e := range entries {
		nk := nameKey{fid.FromPB(e.Parent), string(e.Name)}
		invalid := mdt.ValidName(nk.name) != nil
		if seen[nk] && !invalid {
			continue
		}
		plocal, dv, dtyp, ok := ns.entryStill(snap, e, nk, child)
		if !ok {
			continue // changed meanwhile
		}
		seen[nk] = true
		dk := mdt.DirentKey(plocal, nk.name)
		f.cond(dk, dv)
		if invalid || dtyp != typ || (isDir && len(keep) > 0) {
			// An invalid name, or the linkEA does not recognise it and
			// the type differs (a corrupt entry), or a directory named
			// twice: remove the entry; the object keeps its other names
			// (with none left it is an orphan, below).
			removeEntry(f, dk, nk.parent, dtyp)
			continue
		}
		if !isDir {
			if mdt.LinkBytes(e.Name) > space {
				unrecorded++
				continue
			}
			space -= mdt.LinkBytes(e.Name)
		}
		keep = append(keep, &pb.LinkEntry{Parent: nk.parent.PB(), Name: []byte(nk.name)})
		changed, f.added = true, true
		f.kinds[KNsLinkEA] = true
	}
	nlink := ino.Nlink
	var lastParent fid.FID
	for _, s := range stales {
		nk := nameKey{fid.FromPB(s.l.Parent), string(s.l.Name)}
		lastParent = nk.parent
		room := isDir || nlink > uint32(len(keep))+unrecorded
		switch {
		case !s.other.IsZero():
			xlocal, xino, xerr := r.lookup(snap, s.other)
			dk := mdt.DirentKey(s.plocal, nk.name)
			switch {
			case errors.Is(xerr, errNoObject) && len(keep) == 0 || errors.Is(xerr, errNoObject) && room:
				// The entry names nothing and the linkEA recognises it: the
				// entry's FID is wrong (trust the LMA).
				f.cond(dk, s.dv)
				f.muts = append(f.muts, setMut(dk, mdt.EncodeDirent(child, typ)))
				f.kinds[KNsDirent] = true
				planned[nk] = child
				keep = append(keep, s.l)
			case xerr == nil && hasLink(xino, nk):
				changed, f.dropped, f.droppedOwn = true, true, true
				f.kinds[KNsMultiRef] = true
			case xerr == nil && xino.Flags&uint32(pb.InodeFlag_INODE_FLAG_LFSCK_CREATED) != 0 && emptyCreated(xino) && room:
				// The entry names an object the checker created for a
				// dangling entry, never used since: the real one is back.
				xv, _ := snap.Get(mdt.ObjKey(xlocal))
				f.cond(dk, s.dv)
				f.cond(mdt.ObjKey(xlocal), xv)
				f.muts = append(f.muts, setMut(dk, mdt.EncodeDirent(child, typ)), delMut(mdt.ObjKey(xlocal)), delMut(mdt.OIKey(s.other)))
				f.delta--
				f.kinds[KNsMultiRef] = true
				planned[nk] = child
				keep = append(keep, s.l)
			default:
				changed, f.dropped, f.droppedOwn = true, true, true
				f.kinds[KNsMultiRef] = true
			}
		case len(keep) > 0 && (!room || isDir):
			// Names enough already: a stale or invalid linkEA entry.
			changed, f.dropped = true, true
			f.droppedLive = f.droppedLive || !s.dead
			f.kinds[KNsLinkEA] = true
		case !s.dead:
			// The name's entry is gone, the parent is there: put it back.
			f.cond(mdt.DirentKey(s.plocal, nk.name), nil)
			f.late = append(f.late, &pb.LfsckMut{M: &pb.LfsckMut_InsertDirent{InsertDirent: &pb.LfsckInsertDirent{
				Parent: s.l.Parent, Name: s.l.Name, Child: child.PB(), Type: uint32(typ)}}})
			f.kinds[KNsLostDirent] = true
			keep = append(keep, s.l)
		case len(keep) == 0 && r.env.Target.AllocatedBefore(nk.parent) && mdt.ValidName(nk.name) == nil:
			// The last name's directory is gone: re-create it in
			// lost+found (<FID>-P-n) and put the name back (-o).
			if !r.st.Params.Orphan {
				f.reports[KNsLostDirent] = true
				keep = append(keep, s.l)
				continue
			}
			f.cond(mdt.OIKey(nk.parent), nil)
			f.late = append(f.late,
				&pb.LfsckMut{M: &pb.LfsckMut_Create{Create: &pb.LfsckCreate{
					Inode: &pb.Inode{Fid: nk.parent.PB(), Mode: syscall.S_IFDIR | 0o700, Flags: uint32(pb.InodeFlag_INODE_FLAG_LFSCK_CREATED)}, LpfBase: []byte("%F-P")}}},
				&pb.LfsckMut{M: &pb.LfsckMut_InsertDirent{InsertDirent: &pb.LfsckInsertDirent{
					Parent: s.l.Parent, Name: s.l.Name, Child: child.PB(), Type: uint32(typ)}}})
			f.delta++
			f.kinds[KNsLostDirent] = true
			keep = append(keep, s.l)
		default:
			changed, f.dropped = true, true
			f.kinds[KNsLinkEA] = true
		}
	}
	if !isDir {
		// A list past the bound (kept from before there was one) loses
		// its last names: they are left out, as the MDT leaves them out.
		for n := mdt.LinksBytes(&pb.Inode{Links: keep}); n > mdt.LinksMaxBytes; {
			n -= mdt.LinkBytes(keep[len(keep)-1].Name)
			keep = keep[:len(keep)-1]
			unrecorded++
			changed, f.dropped = true, true
			f.kinds[KNsLinkEA] = true
		}
	}
	overflow := ino.LinksOverflowIndex
	// A list marked overflowed names fewer than the object has: with none
	// seen, the object is an orphan only if this run saw every name.
	unseen := overflow != 0 && (full || !ns.everyNameSeen(overflow))
	if len(keep) == 0 && unrecorded == 0 && nlink > 0 && !unseen && child != fid.LostFound && !mdt.PendingOrphan(snap, child) {
		// Nothing names it: an orphan, for lost+found (-o).
		base := "%F-O"
		if isDir {
			base = "%F-D"
			if !lastParent.IsZero() {
				base = "%F-" + lastParent.String() + "-D"
			}
		}
		if f.droppedOwn {
			f.kinds[KNsMultiRef] = true
		}
		if r.st.Params.Orphan {
			f.late = append(f.late, &pb.LfsckMut{M: &pb.LfsckMut_LinkLpf{LinkLpf: &pb.LfsckLinkLPF{Fid: child.PB(), Base: []byte(base)}}})
			if !f.droppedOwn {
				f.kinds[KNsOrphan] = true
			}
		} else if !f.droppedOwn {
			f.reports[KNsOrphan] = true
		}
	}
	newNlink := nlink
	if names := uint32(len(keep)) + unrecorded; !isDir && nlink < names {
		// Never lowered, only raised to the number of names (§9.5).
		newNlink = names
		f.kinds[KNsNlinks] = true
	}
	switch {
	case unrecorded > 0 && overflow == 0:
		// Names left out of a list that says it holds them all; left out
		// by this run, so the next run sees every one of them.
		overflow = max(r.st.RunStartIndex, 1)
		changed = true
		f.kinds[KNsLinkEA] = true
	case unrecorded == 0 && overflow != 0 && !unseen:
		// Every name is recorded again (unlinks made room, and this run
		// added the ones left out): fid2path and the checks of later runs
		// may take the list for every name again.
		overflow = 0
		changed = true
		f.kinds[KNsLinkEAOverflow] = true
	}
	if changed || newNlink != nlink {
		n := proto.Clone(ino).(*pb.Inode)
		n.Links = keep
		n.Nlink = newNlink
		n.LinksOverflowIndex = overflow
		f.muts = append([]*pb.LfsckMut{setMut(mdt.ObjKey(local), mdt.MarshalInode(n))}, f.muts...)
	}
	ns.emit(f)
	return nil
}

// everyNameSeen says whether this run saw every name of an object whose
// linkEA was last marked overflowed by the command at log index mark: the
// command was applied before the scan began (so each name left out was in
// the store when the scan read its directory), and the scan read the
// entries of every directory (a name in a directory it failed to read, or
// one whose record does not decode, would go unseen).
func (ns *nsCheck) everyNameSeen(mark uint64) bool {
	r := ns.r
	failed := r.led.get(1, Namespace, tFailed)
	return r.st.RunStartIndex != 0 && mark < r.st.RunStartIndex && failed == 0 && !ns.unread.Load()
}

// entryStill reports whether the traced entry e (nk) is still in its
// parent and still names child, with the parent's local key, the entry's
// value and its type.
func (ns *nsCheck) entryStill(snap *kv.Snapshot, e *pb.LfsckTraceItem, nk nameKey, child fid.FID) (plocal uint64, dv []byte, dtyp uint8, ok bool) {
	r := ns.r
	plocal, _, err := r.lookup(snap, nk.parent)
	if err != nil || plocal != e.Local {
		return 0, nil, 0, false
	}
	dv, exists, cf, dtyp, valid := direntAt(snap, plocal, nk.name)
	return plocal, dv, dtyp, exists && valid && cf == child
}

// dotNacreName is the one name of .nacre, in the root.
const dotNacreName = ".nacre"

// dropLoopEntries removes the entries that name the root, or .nacre
// anywhere but as the root's .nacre: each makes a loop in the tree (a
// directory inside itself), and the phase 1 scan already left them out
// of their parents' subdirectory counts. The root and .nacre themselves
// are never reconciled (no linkEA for the root; .nacre is the checker's).
func (ns *nsCheck) dropLoopEntries(snap *kv.Snapshot, child fid.FID, entries []*pb.LfsckTraceItem) error {
	f := newFix()
	f.reportKey = child.Bytes()
	for _, e := range entries {
		nk := nameKey{fid.FromPB(e.Parent), string(e.Name)}
		if !loopEntry(nk.parent, nk.name, child) {
			continue
		}
		plocal, dv, dtyp, ok := ns.entryStill(snap, e, nk, child)
		if !ok {
			continue // changed meanwhile
		}
		dk := mdt.DirentKey(plocal, nk.name)
		f.cond(dk, dv)
		removeEntry(f, dk, nk.parent, dtyp)
	}
	ns.emit(f)
	return nil
}

// loopEntry says whether an entry parent/name naming child makes a loop:
// it names the root, or .nacre other than as /.nacre.
func loopEntry(parent fid.FID, name string, child fid.FID) bool {
	return child == fid.Root || child == fid.DotNacre && (parent != fid.Root || name != dotNacreName)
}

// removeEntry adds the removal of an entry (conditioned already) to f.
func removeEntry(f *fix, dk []byte, parent fid.FID, dtyp uint8) {
	f.muts = append(f.muts, delMut(dk))
	if dtyp == dtDir {
		// The parent counts the entry as a subdirectory: its nlink is
		// counted again once the entry is gone.
		f.muts = append(f.muts, &pb.LfsckMut{M: &pb.LfsckMut_DirNlink{DirNlink: parent.PB()}})
	}
	f.kinds[KNsDirent] = true
}

func hasLink(ino *pb.Inode, nk nameKey) bool {
	for _, l := range ino.Links {
		if string(l.Name) == nk.name && fid.FromPB(l.Parent) == nk.parent {
			return true
		}
	}
	return false
}

// emptyCreated: an object the checker created that holds nothing yet.
func emptyCreated(ino *pb.Inode) bool {
	return ino.Size == 0 && (ino.Layout == nil || len(ino.Layout.Objects) == 0)
}

// missingChild settles entries that name an object that does not exist:
// a linkEA elsewhere claiming the name means the entry's FID is wrong;
// otherwise the entry dangles (-C re-creates the object).
func (ns *nsCheck) missingChild(snap *kv.Snapshot, child fid.FID, entries []*pb.LfsckTraceItem, claims map[nameKey][]fid.FID, planned map[nameKey]fid.FID) error {
	r := ns.r
	for _, e := range entries {
		nk := nameKey{fid.FromPB(e.Parent), string(e.Name)}
		plocal, _, perr := r.lookup(snap, nk.parent)
		if perr != nil || plocal != e.Local {
			continue
		}
		if to, ok := planned[nk]; ok && to != child {
			continue
		}
		dv, exists, cf, dtyp, ok := direntAt(snap, plocal, nk.name)
		garbage := e.Flags&flagGarbage != 0
		if !exists || (!garbage && (!ok || cf != child)) || (garbage && ok && cf != child) {
			continue // changed meanwhile
		}
		dk := mdt.DirentKey(plocal, nk.name)
		f := newFix()
		f.reportKey = append(child.Bytes(), dk...)
		f.cond(dk, dv)
		var owner fid.FID
		var oino *pb.Inode
		var olocal uint64
		for _, c := range claims[nk] {
			if c == child || mdt.ValidName(nk.name) != nil {
				// An invalid name is removed, never given to its claimant.
				continue
			}
			if l, xi, err := r.lookup(snap, c); err == nil && hasLink(xi, nk) && !r.isLoser(l) {
				owner, oino, olocal = c, xi, l
				break
			}
		}
		switch {
		case !owner.IsZero():
			ov, _ := snap.Get(mdt.ObjKey(olocal))
			f.cond(mdt.ObjKey(olocal), ov)
			f.muts = append(f.muts, setMut(dk, mdt.EncodeDirent(owner, mdt.DirentType(oino.Mode))))
			f.kinds[KNsDirent] = true
			planned[nk] = owner
		case garbage || !ok:
			f.muts = append(f.muts, delMut(dk))
			f.kinds[KNsDirent] = true
		default:
			mode := uint32(0)
			switch dtyp {
			case uint8(syscall.S_IFREG >> 12):
				mode = syscall.S_IFREG | 0o600
			case dtDir:
				mode = syscall.S_IFDIR | 0o700
			}
			if r.st.Params.CreateMdtobj && mode != 0 && r.env.Target.AllocatedBefore(child) {
				f.cond(mdt.OIKey(child), nil)
				f.muts = append(f.muts, &pb.LfsckMut{M: &pb.LfsckMut_Create{Create: &pb.LfsckCreate{
					Inode:  &pb.Inode{Fid: child.PB(), Mode: mode, Flags: uint32(pb.InodeFlag_INODE_FLAG_LFSCK_CREATED)},
					Parent: nk.parent.PB(), Name: []byte(nk.name), ExistingEntry: true}}})
				f.delta++
				f.kinds[KNsDangling] = true
				planned[nk] = child
			} else {
				f.cond(mdt.OIKey(child), nil)
				f.kinds[KNsDangling] = true
			}
		}
		_ = dtyp
		ns.emit(f)
	}
	return nil
}
