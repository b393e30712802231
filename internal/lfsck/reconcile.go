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

// Phase 2 of the namespace check settles one object of the trace at a
// time, in three steps: gather reads what the decision needs from a fresh
// snapshot into plain facts (gatherObject, gatherDangling); a pure
// function decides what is wrong and what to repair (decideObject,
// decideDangling: reconcile_test.go has their tables); emit builds the
// repair, conditioned on what the facts were read from. The rules are
// docs/lfsck.md's (Lustre's trust rules, lessons §9.5): the object's own
// FID (its LMA) is trusted over an entry, a linkEA name is put back when
// its parent is there, nlink is never lowered, and a name that fits
// nowhere goes to lost+found.

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
	x, err := ns.gatherObject(snap, child, local, ino, entries, full, planned)
	if err != nil {
		return err
	}
	ns.emitObject(x, decideObject(x), planned)
	return nil
}

// objectFacts are what phase 2 reads of an object that exists and of the
// names around it.
type objectFacts struct {
	child   fid.FID
	local   uint64
	v       []byte // its record, as read
	ino     *pb.Inode
	links   []linkFacts  // one per linkEA entry, in order
	entries []entryFacts // one per traced entry naming it, in order
	full    bool         // names left out of its linkEA were not traced (flagFull)
	// everySeen: this run saw every name of the object (everyNameSeen);
	// read only when its linkEA is marked overflowed.
	everySeen bool
	// pendingOrphan: removed while a client has it open, it is kept with
	// no name until closed (mdt.PendingOrphan).
	pendingOrphan bool
	runStart      uint64 // the run's first log index (LfsckState.run_start_index)
	adopt         bool   // -o: orphans and lost parents go to lost+found, else they are reported
}

// linkFacts are what phase 2 reads of one linkEA entry, a name of the
// object.
type linkFacts struct {
	l      *pb.LinkEntry
	nk     nameKey
	repeat bool // an earlier linkEA entry holds the same name
	// dead: the parent does not exist, is no directory, or the name is
	// one create refuses; allocated: the parent's FID was allocated (a
	// parent that is gone can be made again).
	dead, allocated bool
	plocal          uint64 // the parent's local key (not dead)
	parentOI        []byte // the parent's OI entry (nil: none)
	// planned: this phase already gave the name to an object (isPlanned);
	// then its entry is not read.
	planned   fid.FID
	isPlanned bool
	entry     direntFacts // the name's entry in its parent
	other     otherFacts  // the object the entry, or the plan, names instead
}

// direntFacts are a directory entry as read.
type direntFacts struct {
	v      []byte // its value (nil: none)
	exists bool
	names  fid.FID // the object it names
	typ    uint8
	valid  bool // it decodes and names a FID
}

// otherFacts are the object an entry names instead of the object being
// settled.
type otherFacts struct {
	fid     fid.FID // zero: none
	missing bool    // it does not exist
	found   bool    // it exists and decodes
	holds   bool    // found, and its linkEA holds the name
	// empty: found, made by the checker for a dangling entry and never
	// used since (its record and local key below, for the conditions).
	empty bool
	local uint64
	v     []byte
}

// entryFacts are what phase 2 reads of one traced entry naming the
// object.
type entryFacts struct {
	e       *pb.LfsckTraceItem
	nk      nameKey
	invalid bool // create refuses the name
	// read: the entry was looked up (the linkEA does not hold its name,
	// or the name is invalid); still: it is in its parent as traced and
	// names the object.
	read, still bool
	plocal      uint64
	v           []byte
	typ         uint8
}

// gatherObject reads the facts of an object that exists.
func (ns *nsCheck) gatherObject(snap *kv.Snapshot, child fid.FID, local uint64, ino *pb.Inode, entries []*pb.LfsckTraceItem,
	full bool, planned map[nameKey]fid.FID) (*objectFacts, error) {
	r := ns.r
	v, err := snap.Get(mdt.ObjKey(local))
	if err != nil {
		return nil, err
	}
	x := &objectFacts{child: child, local: local, v: v, ino: ino, full: full, runStart: r.st.RunStartIndex,
		adopt: r.st.Params.Orphan, pendingOrphan: mdt.PendingOrphan(snap, child)}
	if ino.LinksOverflowIndex != 0 {
		x.everySeen = ns.everyNameSeen(ino.LinksOverflowIndex)
	}
	linked := map[nameKey]bool{}
	for _, l := range ino.Links {
		lf := linkFacts{l: l, nk: nameKey{fid.FromPB(l.Parent), string(l.Name)}}
		if linked[lf.nk] {
			lf.repeat = true
			x.links = append(x.links, lf)
			continue
		}
		linked[lf.nk] = true
		plocal, pino, perr := r.lookup(snap, lf.nk.parent)
		if perr != nil || !isDirMode(pino.Mode) || mdt.ValidName(lf.nk.name) != nil {
			lf.dead, lf.allocated = true, r.env.Target.AllocatedBefore(lf.nk.parent)
			x.links = append(x.links, lf)
			continue
		}
		lf.plocal = plocal
		if ov, err := snap.Get(mdt.OIKey(lf.nk.parent)); err == nil {
			lf.parentOI = ov
		}
		other := fid.FID{}
		if to, ok := planned[lf.nk]; ok {
			lf.planned, lf.isPlanned = to, true
			if to != child {
				other = to
			}
		} else {
			lf.entry = readDirent(snap, plocal, lf.nk.name)
			if lf.entry.exists && !(lf.entry.valid && lf.entry.names == child) {
				other = lf.entry.names
			}
		}
		if !other.IsZero() {
			lf.other = ns.gatherOther(snap, other, lf.nk)
		}
		x.links = append(x.links, lf)
	}
	for _, e := range entries {
		ef := entryFacts{e: e, nk: nameKey{fid.FromPB(e.Parent), string(e.Name)}}
		ef.invalid = mdt.ValidName(ef.nk.name) != nil
		if !linked[ef.nk] || ef.invalid {
			ef.read = true
			ef.plocal, ef.v, ef.typ, ef.still = ns.entryStill(snap, e, ef.nk, child)
		}
		x.entries = append(x.entries, ef)
	}
	return x, nil
}

// gatherOther reads the object f that the entry of name nk names.
func (ns *nsCheck) gatherOther(snap *kv.Snapshot, f fid.FID, nk nameKey) otherFacts {
	of := otherFacts{fid: f}
	local, ino, err := ns.r.lookup(snap, f)
	switch {
	case errors.Is(err, errNoObject):
		of.missing = true
	case err == nil:
		of.found = true
		of.holds = hasLink(ino, nk)
		if ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_LFSCK_CREATED) != 0 && emptyCreated(ino) {
			of.empty, of.local = true, local
			of.v, _ = snap.Get(mdt.ObjKey(local))
		}
	}
	return of
}

// readDirent reads the entry name of the directory at plocal.
func readDirent(g getter, plocal uint64, name string) direntFacts {
	v, exists, cf, typ, valid := direntAt(g, plocal, name)
	return direntFacts{v: v, exists: exists, names: cf, typ: typ, valid: valid}
}

// linkVerdict is what becomes of one linkEA entry.
type linkVerdict uint8

const (
	linkKeep   linkVerdict = iota // its entry names the object
	linkRetype                    // kept; its entry names the object with another type: the entry is retyped
	linkRepeat                    // dropped: an earlier entry holds the same name
	// kept; the entry names an object that does not exist: it is pointed
	// at the object (the object's FID is trusted)
	linkPoint
	// kept; the entry names an empty object the checker made for it: it
	// is pointed at the object, and that one removed
	linkTakeOver
	linkOwned   // dropped: the entry names another object, which holds the name (multiply referenced)
	linkStale   // dropped: a stale or dead name, with names enough already
	linkRestore // kept; the entry is gone, the parent is there: it is put back
	// kept; the last name's parent is gone: it is made again in
	// lost+found (<FID>-P-n) and the name put back (-o)
	linkRemake
	linkLost // kept; the last name's parent is gone: reported (no -o)
)

// entryVerdict is what becomes of one traced entry naming the object.
type entryVerdict uint8

const (
	entryLinked     entryVerdict = iota // the linkEA holds its name: nothing to do
	entryChanged                        // no longer as traced (a change in flight): nothing to do
	entryRemove                         // removed: an invalid name, another type, or a directory's second name
	entryAdd                            // its name is added to the linkEA
	entryUnrecorded                     // its name does not fit in the linkEA: left out, counted
)

// orphanVerdict is what becomes of an object nothing names.
type orphanVerdict uint8

const (
	notOrphan orphanVerdict = iota
	orphanAdopt
	orphanReport
)

// objectDecision is what decideObject decides for one object.
type objectDecision struct {
	links   []linkVerdict  // by facts.links
	entries []entryVerdict // by facts.entries
	keep    []*pb.LinkEntry
	// rewrite: the object's record changes, to keep as its linkEA, nlink
	// and overflow mark.
	rewrite  bool
	nlink    uint32
	overflow uint64
	orphan   orphanVerdict
	lpfBase  string // orphanAdopt: its name in lost+found
	// The kinds repaired (or reported as such, without changes) and
	// found but not repaired.
	kinds, reports []uint32
}

// decideObject decides what is wrong with an object that exists, and what
// repairs it, from its facts alone.
func decideObject(x *objectFacts) *objectDecision {
	d := &objectDecision{links: make([]linkVerdict, len(x.links)), entries: make([]entryVerdict, len(x.entries))}
	kinds, reports := map[uint32]bool{}, map[uint32]bool{}
	// added: a name added from an entry; droppedOwn: a name dropped
	// because another object holds it; droppedLive: a stale name dropped
	// whose directory exists.
	var added, droppedOwn, droppedLive, changed bool
	ino := x.ino
	isDir := isDirMode(ino.Mode)
	typ := mdt.DirentType(ino.Mode)
	var keep []*pb.LinkEntry
	seen := map[nameKey]bool{}
	var stales []int // the names of the linkEA whose entry does not name the object
	for i, lf := range x.links {
		if lf.repeat {
			d.links[i] = linkRepeat
			changed = true
			kinds[KNsLinkEA] = true
			continue
		}
		seen[lf.nk] = true
		switch {
		case lf.dead:
			stales = append(stales, i)
		case lf.isPlanned && lf.planned == x.child:
			keep = append(keep, lf.l)
		case lf.isPlanned:
			stales = append(stales, i)
		case !lf.entry.exists:
			stales = append(stales, i)
		case lf.entry.valid && lf.entry.names == x.child:
			keep = append(keep, lf.l)
			if lf.entry.typ != typ {
				// The linkEA recognises the entry: the entry's type is wrong.
				d.links[i] = linkRetype
				kinds[KNsBadType] = true
			}
		default:
			stales = append(stales, i)
		}
	}
	// Entries that name the object but are not in its linkEA. An entry
	// whose name create would refuse is removed even when the linkEA
	// holds the name too (the names of the linkEA drop it there): it
	// cannot be looked up, and a name added to the linkEA here was
	// dropped again by the next run, so every run "repaired" it anew. A
	// name that does not fit in the linkEA's bound is counted
	// (unrecorded) and left out, as the MDT leaves it out: space is what
	// the recorded list leaves.
	space := mdt.LinksMaxBytes - mdt.LinksBytes(ino)
	unrecorded := uint32(0)
	for i, ef := range x.entries {
		if seen[ef.nk] && !ef.invalid {
			d.entries[i] = entryLinked
			continue
		}
		if !ef.still {
			d.entries[i] = entryChanged
			continue
		}
		seen[ef.nk] = true
		if ef.invalid || ef.typ != typ || (isDir && len(keep) > 0) {
			// An invalid name, or the linkEA does not recognise it and
			// the type differs (a corrupt entry), or a directory named
			// twice: remove the entry; the object keeps its other names
			// (with none left it is an orphan, below).
			d.entries[i] = entryRemove
			kinds[KNsDirent] = true
			continue
		}
		if !isDir {
			if mdt.LinkBytes(ef.e.Name) > space {
				d.entries[i] = entryUnrecorded
				unrecorded++
				continue
			}
			space -= mdt.LinkBytes(ef.e.Name)
		}
		d.entries[i] = entryAdd
		keep = append(keep, &pb.LinkEntry{Parent: ef.nk.parent.PB(), Name: []byte(ef.nk.name)})
		changed, added = true, true
		kinds[KNsLinkEA] = true
	}
	nlink := ino.Nlink
	var lastParent fid.FID
	for _, i := range stales {
		lf := &x.links[i]
		lastParent = lf.nk.parent
		room := isDir || nlink > uint32(len(keep))+unrecorded
		other := lf.other
		switch {
		case !other.fid.IsZero():
			switch {
			case other.missing && (len(keep) == 0 || room):
				// The entry names nothing and the linkEA recognises it:
				// the entry's FID is wrong (trust the LMA).
				d.links[i] = linkPoint
				kinds[KNsDirent] = true
				keep = append(keep, lf.l)
			case other.holds:
				d.links[i] = linkOwned
				changed, droppedOwn = true, true
				kinds[KNsMultiRef] = true
			case other.empty && room:
				// The entry names an object the checker created for a
				// dangling entry, never used since: the real one is back.
				d.links[i] = linkTakeOver
				kinds[KNsMultiRef] = true
				keep = append(keep, lf.l)
			default:
				d.links[i] = linkOwned
				changed, droppedOwn = true, true
				kinds[KNsMultiRef] = true
			}
		case len(keep) > 0 && (!room || isDir):
			// Names enough already: a stale or invalid linkEA entry.
			d.links[i] = linkStale
			changed = true
			droppedLive = droppedLive || !lf.dead
			kinds[KNsLinkEA] = true
		case !lf.dead:
			// The name's entry is gone, the parent is there: put it back.
			d.links[i] = linkRestore
			kinds[KNsLostDirent] = true
			keep = append(keep, lf.l)
		case len(keep) == 0 && lf.allocated && mdt.ValidName(lf.nk.name) == nil:
			// The last name's directory is gone: make it again in
			// lost+found and put the name back (-o), else report it.
			keep = append(keep, lf.l)
			if !x.adopt {
				d.links[i] = linkLost
				reports[KNsLostDirent] = true
				continue
			}
			d.links[i] = linkRemake
			kinds[KNsLostDirent] = true
		default:
			d.links[i] = linkStale
			changed = true
			kinds[KNsLinkEA] = true
		}
	}
	if !isDir {
		// A list past the bound (kept from before there was one) loses
		// its last names: they are left out, as the MDT leaves them out.
		for n := mdt.LinksBytes(&pb.Inode{Links: keep}); n > mdt.LinksMaxBytes; {
			n -= mdt.LinkBytes(keep[len(keep)-1].Name)
			keep = keep[:len(keep)-1]
			unrecorded++
			changed = true
			kinds[KNsLinkEA] = true
		}
	}
	overflow := ino.LinksOverflowIndex
	// A list marked overflowed names fewer than the object has: with none
	// seen, the object is an orphan only if this run saw every name.
	unseen := overflow != 0 && (x.full || !x.everySeen)
	if len(keep) == 0 && unrecorded == 0 && nlink > 0 && !unseen && x.child != fid.LostFound && !x.pendingOrphan {
		// Nothing names it: an orphan, for lost+found (-o).
		d.lpfBase = "%F-O"
		if isDir {
			d.lpfBase = "%F-D"
			if !lastParent.IsZero() {
				d.lpfBase = "%F-" + lastParent.String() + "-D"
			}
		}
		if droppedOwn {
			kinds[KNsMultiRef] = true
		}
		switch {
		case x.adopt:
			d.orphan = orphanAdopt
			if !droppedOwn {
				kinds[KNsOrphan] = true
			}
		case !droppedOwn:
			d.orphan = orphanReport
			reports[KNsOrphan] = true
		}
	}
	d.nlink = nlink
	if names := uint32(len(keep)) + unrecorded; !isDir && nlink < names {
		// Never lowered, only raised to the number of names (§9.5).
		d.nlink = names
		kinds[KNsNlinks] = true
	}
	switch {
	case unrecorded > 0 && overflow == 0:
		// Names left out of a list that says it holds them all; left out
		// by this run, so the next run sees every one of them.
		overflow = max(x.runStart, 1)
		changed = true
		kinds[KNsLinkEA] = true
	case unrecorded == 0 && overflow != 0 && !unseen:
		// Every name is recorded again (unlinks made room, and this run
		// added the ones left out): fid2path and the checks of later runs
		// may take the list for every name again.
		overflow = 0
		changed = true
		kinds[KNsLinkEAOverflow] = true
	}
	d.keep, d.overflow = keep, overflow
	d.rewrite = changed || d.nlink != nlink
	if added && (droppedOwn || droppedLive) && !kinds[KNsLostDirent] {
		// A name taken from an entry in place of one the linkEA held: the
		// pair did not match.
		delete(kinds, KNsLinkEA)
		delete(kinds, KNsMultiRef)
		kinds[KNsUnmatched] = true
	}
	d.kinds, d.reports = sortedKinds(kinds), sortedKinds(reports)
	return d
}

// emitObject builds the repair decideObject decided, conditioned on the
// facts it was decided from, and records the names it gives out.
func (ns *nsCheck) emitObject(x *objectFacts, d *objectDecision, planned map[nameKey]fid.FID) {
	child := x.child
	typ := mdt.DirentType(x.ino.Mode)
	f := newFix()
	f.reportKey = child.Bytes()
	f.cond(mdt.ObjKey(x.local), x.v)
	for i, lf := range x.links {
		if lf.repeat || lf.dead {
			continue
		}
		if lf.parentOI != nil {
			f.cond(mdt.OIKey(lf.nk.parent), lf.parentOI)
		}
		if d.links[i] == linkRetype {
			dk := mdt.DirentKey(lf.plocal, lf.nk.name)
			f.cond(dk, lf.entry.v)
			f.muts = append(f.muts, setMut(dk, mdt.EncodeDirent(child, typ)))
		}
	}
	for i, ef := range x.entries {
		if d.entries[i] == entryLinked || d.entries[i] == entryChanged {
			continue
		}
		dk := mdt.DirentKey(ef.plocal, ef.nk.name)
		f.cond(dk, ef.v)
		if d.entries[i] == entryRemove {
			removeEntry(f, dk, ef.nk.parent, ef.typ)
		}
	}
	for i, lf := range x.links {
		dk := mdt.DirentKey(lf.plocal, lf.nk.name)
		dv := lf.entry.v // the entry as read; none for a name already planned
		switch d.links[i] {
		case linkPoint:
			f.cond(dk, dv)
			f.muts = append(f.muts, setMut(dk, mdt.EncodeDirent(child, typ)))
			planned[lf.nk] = child
		case linkTakeOver:
			f.cond(dk, dv)
			f.cond(mdt.ObjKey(lf.other.local), lf.other.v)
			f.muts = append(f.muts, setMut(dk, mdt.EncodeDirent(child, typ)), delMut(mdt.ObjKey(lf.other.local)), delMut(mdt.OIKey(lf.other.fid)))
			f.delta--
			planned[lf.nk] = child
		case linkRestore:
			f.cond(dk, nil)
			f.late = append(f.late, &pb.LfsckMut{M: &pb.LfsckMut_InsertDirent{InsertDirent: &pb.LfsckInsertDirent{
				Parent: lf.l.Parent, Name: lf.l.Name, Child: child.PB(), Type: uint32(typ)}}})
		case linkRemake:
			f.cond(mdt.OIKey(lf.nk.parent), nil)
			f.late = append(f.late,
				&pb.LfsckMut{M: &pb.LfsckMut_Create{Create: &pb.LfsckCreate{
					Inode: &pb.Inode{Fid: lf.nk.parent.PB(), Mode: syscall.S_IFDIR | 0o700, Flags: uint32(pb.InodeFlag_INODE_FLAG_LFSCK_CREATED)}, LpfBase: []byte("%F-P")}}},
				&pb.LfsckMut{M: &pb.LfsckMut_InsertDirent{InsertDirent: &pb.LfsckInsertDirent{
					Parent: lf.l.Parent, Name: lf.l.Name, Child: child.PB(), Type: uint32(typ)}}})
			f.delta++
		}
	}
	if d.orphan == orphanAdopt {
		f.late = append(f.late, &pb.LfsckMut{M: &pb.LfsckMut_LinkLpf{LinkLpf: &pb.LfsckLinkLPF{Fid: child.PB(), Base: []byte(d.lpfBase)}}})
	}
	if d.rewrite {
		n := proto.Clone(x.ino).(*pb.Inode)
		n.Links = d.keep
		n.Nlink = d.nlink
		n.LinksOverflowIndex = d.overflow
		f.muts = append([]*pb.LfsckMut{setMut(mdt.ObjKey(x.local), mdt.MarshalInode(n))}, f.muts...)
	}
	f.kinds, f.reports = d.kinds, d.reports
	ns.emit(f)
}

// fix collects one repair of the namespace.
type fix struct {
	conds     []*pb.LfsckCond
	condKeys  map[string]bool
	muts      []*pb.LfsckMut
	late      []*pb.LfsckMut // typed changes, after the raw ones
	kinds     []uint32       // repaired (or reported as such, without changes)
	reports   []uint32       // found, not repaired
	delta     int32
	reportKey []byte
}

func newFix() *fix {
	return &fix{condKeys: map[string]bool{}}
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

// emit queues f's repair and its report.
func (ns *nsCheck) emit(f *fix) {
	r := ns.r
	if len(f.kinds) == 0 && len(f.reports) == 0 {
		return
	}
	r.found(Namespace)
	if len(f.kinds) > 0 {
		rep := &pb.LfsckRepair{Component: Namespace, Kinds: f.kinds, Conds: f.conds, Muts: append(f.muts, f.late...), InodesDelta: f.delta}
		if len(rep.Muts) == 0 {
			rep.ReportKey = append([]byte{'r'}, f.reportKey...)
		}
		r.rep.add(Namespace, nil, rep)
	}
	if len(f.reports) > 0 {
		r.rep.add(Namespace, nil, &pb.LfsckRepair{Component: Namespace, Kinds: f.reports,
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
	plocal, _, err := ns.r.lookup(snap, nk.parent)
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
		f.kinds = []uint32{KNsDirent}
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

// danglingFacts are what phase 2 reads of one traced entry naming an
// object that does not exist.
type danglingFacts struct {
	nk      nameKey
	garbage bool // the entry did not decode or named no sane FID in phase 1
	// still: the entry is in its parent as traced (the parent's local
	// key, no other object given the name in this phase); the entry as
	// read.
	still  bool
	plocal uint64
	entry  direntFacts
	// owner: the first other object whose linkEA claims the name (zero:
	// none), with its type, local key and record.
	owner      fid.FID
	ownerMode  uint32
	ownerLocal uint64
	ownerV     []byte
	allocated  bool // the child's FID was allocated: it can be made
	create     bool // -C: make missing objects of entries
}

// danglingVerdict is what becomes of an entry naming an object that does
// not exist.
type danglingVerdict uint8

const (
	danglingChanged danglingVerdict = iota // no longer as traced: nothing to do
	danglingOwner                          // pointed at the object whose linkEA claims the name
	danglingRemove                         // removed: it does not decode
	danglingCreate                         // the object is made again, empty (-C)
	danglingReport                         // reported (no -C, or it cannot be made)
)

// decideDangling decides what becomes of an entry naming an object that
// does not exist: a linkEA elsewhere claiming the name means the entry's
// FID is wrong; otherwise the entry dangles (-C makes the object again).
// mode is the mode of the object to make (danglingCreate).
func decideDangling(child fid.FID, df *danglingFacts) (v danglingVerdict, mode uint32) {
	e := &df.entry
	if !df.still || !e.exists || (!df.garbage && (!e.valid || e.names != child)) || (df.garbage && e.valid && e.names != child) {
		return danglingChanged, 0
	}
	switch {
	case !df.owner.IsZero():
		return danglingOwner, 0
	case df.garbage || !e.valid:
		return danglingRemove, 0
	}
	switch e.typ {
	case uint8(syscall.S_IFREG >> 12):
		mode = syscall.S_IFREG | 0o600
	case dtDir:
		mode = syscall.S_IFDIR | 0o700
	}
	if df.create && mode != 0 && df.allocated {
		return danglingCreate, mode
	}
	return danglingReport, 0
}

// missingChild settles the traced entries that name an object that does
// not exist, each on its own.
func (ns *nsCheck) missingChild(snap *kv.Snapshot, child fid.FID, entries []*pb.LfsckTraceItem, claims map[nameKey][]fid.FID, planned map[nameKey]fid.FID) error {
	for _, e := range entries {
		df := ns.gatherDangling(snap, child, e, claims, planned)
		v, mode := decideDangling(child, df)
		ns.emitDangling(child, df, v, mode, planned)
	}
	return nil
}

// gatherDangling reads the facts of one traced entry e naming child, which
// does not exist.
func (ns *nsCheck) gatherDangling(snap *kv.Snapshot, child fid.FID, e *pb.LfsckTraceItem, claims map[nameKey][]fid.FID,
	planned map[nameKey]fid.FID) *danglingFacts {
	r := ns.r
	df := &danglingFacts{nk: nameKey{fid.FromPB(e.Parent), string(e.Name)}, garbage: e.Flags&flagGarbage != 0,
		create: r.st.Params.CreateMdtobj}
	plocal, _, perr := r.lookup(snap, df.nk.parent)
	if perr != nil || plocal != e.Local {
		return df
	}
	if to, ok := planned[df.nk]; ok && to != child {
		return df
	}
	df.still, df.plocal = true, plocal
	df.entry = readDirent(snap, plocal, df.nk.name)
	for _, c := range claims[df.nk] {
		if c == child || mdt.ValidName(df.nk.name) != nil {
			// An invalid name is removed, never given to its claimant.
			continue
		}
		if l, xi, err := r.lookup(snap, c); err == nil && hasLink(xi, df.nk) && !r.isLoser(l) {
			df.owner, df.ownerMode, df.ownerLocal = c, xi.Mode, l
			df.ownerV, _ = snap.Get(mdt.ObjKey(l))
			break
		}
	}
	df.allocated = r.env.Target.AllocatedBefore(child)
	return df
}

// emitDangling builds the repair (or report) decideDangling decided.
func (ns *nsCheck) emitDangling(child fid.FID, df *danglingFacts, v danglingVerdict, mode uint32, planned map[nameKey]fid.FID) {
	if v == danglingChanged {
		return
	}
	dk := mdt.DirentKey(df.plocal, df.nk.name)
	f := newFix()
	f.reportKey = append(child.Bytes(), dk...)
	f.cond(dk, df.entry.v)
	switch v {
	case danglingOwner:
		f.cond(mdt.ObjKey(df.ownerLocal), df.ownerV)
		f.muts = append(f.muts, setMut(dk, mdt.EncodeDirent(df.owner, mdt.DirentType(df.ownerMode))))
		f.kinds = []uint32{KNsDirent}
		planned[df.nk] = df.owner
	case danglingRemove:
		f.muts = append(f.muts, delMut(dk))
		f.kinds = []uint32{KNsDirent}
	case danglingCreate:
		f.cond(mdt.OIKey(child), nil)
		f.muts = append(f.muts, &pb.LfsckMut{M: &pb.LfsckMut_Create{Create: &pb.LfsckCreate{
			Inode:  &pb.Inode{Fid: child.PB(), Mode: mode, Flags: uint32(pb.InodeFlag_INODE_FLAG_LFSCK_CREATED)},
			Parent: df.nk.parent.PB(), Name: []byte(df.nk.name), ExistingEntry: true}}})
		f.delta++
		f.kinds = []uint32{KNsDangling}
		planned[df.nk] = child
	case danglingReport:
		f.cond(mdt.OIKey(child), nil)
		f.kinds = []uint32{KNsDangling}
	}
	ns.emit(f)
}
