package lfsck

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
)

// Phase 2 of the namespace check: every uncertain item of phase 1 is
// re-verified on fresh state, object by object (the trace is ordered by
// the FID of the object concerned), and repaired by the rules of
// docs/lfsck.md (Lustre's trust rules, lessons §9.5).

// Trace item kinds and flags.
const (
	itemEntry  = 1 // a directory entry names child (its linkEA did not match)
	itemClaim  = 2 // child's linkEA names parent/name (no entry matched)
	itemObject = 3 // child needs a look: flags say why

	flagGarbage = 1 // the entry does not decode or names no sane FID
	flagNames   = 2 // a directory with no or several names
	flagNoNames = 4 // an object with no name
	flagNlink   = 8 // nlink below the number of names
	// an object whose linkEA is marked overflowed since before the run:
	// if every name is recorded by now, the mark goes
	flagOverflow = 16
	// a linkEA marked overflowed without room for some of the names left
	// out: their entries were not traced
	flagFull = 32
)

type nameKey struct {
	parent fid.FID
	name   string
}

// traceKey orders items by child, then kind, parent and name.
func traceKey(it *pb.LfsckTraceItem) []byte {
	k := mdt.LfsckTracePrefix(Namespace)
	var b [fid.Size]byte
	fid.FromPB(it.Child).Put(b[:])
	k = append(k, b[:]...)
	k = append(k, byte(it.Kind))
	fid.FromPB(it.Parent).Put(b[:])
	k = append(k, b[:]...)
	return append(k, it.Name...)
}

// resolveNames turns the pairs left unmatched into trace items, reading
// the names again from fresh state (a pair whose name is gone was a change
// in flight and is dropped).
func (r *run) resolveNames() ([]*pb.LfsckTraceItem, error) {
	items := r.items
	r.items = nil
	full := map[fid.FID]uint64{} // objects whose names left out were not traced -> local key
	if r.names.pending() > 0 {
		type want struct{ entries, claims map[uint64]bool }
		bySrc := map[uint64]*want{}
		r.names.each(func(h uint64, p pend) {
			w := bySrc[p.src]
			if w == nil {
				w = &want{map[uint64]bool{}, map[uint64]bool{}}
				bySrc[p.src] = w
			}
			if p.n > 0 {
				w.entries[h] = true
			} else {
				w.claims[h] = true
			}
		})
		srcs := make([]uint64, 0, len(bySrc))
		for s := range bySrc {
			srcs = append(srcs, s)
		}
		sort.Slice(srcs, func(i, j int) bool { return srcs[i] < srcs[j] })
		snap := r.env.Target.DB().NewSnapshot()
		defer snap.Close()
		var o object
		for _, src := range srcs {
			if r.stopping() {
				return nil, errHalted
			}
			w := bySrc[src]
			v, err := snap.Get(mdt.ObjKey(src))
			if err != nil || o.decode(v) != nil {
				continue
			}
			typ := mdt.DirentType(o.mode)
			for _, l := range o.links {
				if w.claims[r.names.hash(l.parent, l.name, o.fid, typ)] {
					items = append(items, &pb.LfsckTraceItem{Kind: itemClaim, Child: o.fid.PB(), Parent: l.parent.PB(),
						Name: append([]byte(nil), l.name...), Type: uint32(typ), Local: src})
				}
			}
			if len(w.entries) == 0 {
				continue
			}
			p := mdt.DirentPrefix(src)
			it, err := snap.NewIter(p, kv.PrefixEnd(p))
			if err != nil {
				return nil, err
			}
			for it.First(); it.Valid(); it.Next() {
				name := it.Key()[17:]
				cf, ctyp, ok := mdt.DecodeDirent(it.Value())
				if ok && w.entries[r.names.hash(o.fid, name, cf, ctyp)] {
					if ov, marked := r.overflowed[cf]; marked && mdt.LinkBytes(name) > ov.room {
						full[cf] = ov.local // left out, and no room to record it
						continue
					}
					items = append(items, &pb.LfsckTraceItem{Kind: itemEntry, Child: cf.PB(), Parent: o.fid.PB(),
						Name: append([]byte(nil), name...), Type: uint32(ctyp), Local: src})
				}
			}
			err = it.Error()
			it.Close()
			if err != nil {
				return nil, err
			}
		}
	}
	for f, local := range full {
		// Merged below with the object's own item, if it has one.
		items = append(items, &pb.LfsckTraceItem{Kind: itemObject, Child: f.PB(), Local: local, Flags: flagFull})
	}
	r.names = newNameMatch()
	sort.Slice(items, func(i, j int) bool { return bytes.Compare(traceKey(items[i]), traceKey(items[j])) < 0 })
	out := items[:0]
	for i, it := range items {
		if i > 0 && bytes.Equal(traceKey(it), traceKey(out[len(out)-1])) {
			out[len(out)-1].Flags |= it.Flags
			continue
		}
		out = append(out, it)
	}
	return out, nil
}

// writeTrace records the trace in the store (a real run), in batches.
func (r *run) writeTrace(items []*pb.LfsckTraceItem) error {
	for len(items) > 0 {
		n := min(len(items), 512)
		op := &pb.LfsckStateOp{}
		for _, it := range items[:n] {
			op.Set = append(op.Set, &pb.LfsckKV{Key: traceKey(it), Value: mustMarshal(it)})
		}
		if err := r.c.proposeState(r.ctx, op); err != nil {
			return fmt.Errorf("record the trace: %w", err)
		}
		items = items[n:]
	}
	return nil
}

// loadTrace reads the trace (a real run's from the store).
func (r *run) loadTrace() ([]*pb.LfsckTraceItem, error) {
	if r.dry {
		return r.items, nil
	}
	p := mdt.LfsckTracePrefix(Namespace)
	it, err := r.env.Target.DB().NewIter(p, kv.PrefixEnd(p))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*pb.LfsckTraceItem
	for it.First(); it.Valid(); it.Next() {
		t := &pb.LfsckTraceItem{}
		if proto.Unmarshal(it.Value(), t) != nil {
			continue // a damaged trace item is dropped (LU-9764)
		}
		out = append(out, t)
	}
	return out, it.Error()
}

func (r *run) phase2() error {
	if r.on(Namespace) && r.st.Phase2Step == 0 {
		if err := r.nsPhase2(); err != nil {
			return err
		}
		r.mu.Lock()
		r.st.Phase2Step = 1
		r.st.Phase2Position = nil
		r.mu.Unlock()
		if err := r.checkpoint(); err != nil {
			return err
		}
	}
	if r.on(Layout) && r.st.Params.Orphan {
		r.mu.Lock()
		none := len(r.lost) == 0
		r.mu.Unlock()
		if none && !r.dry {
			// Resumed in phase 2: the dangling slots phase 1 left.
			if err := r.loadLost(); err != nil {
				return fmt.Errorf("read the dangling slots: %w", err)
			}
		}
		if err := r.orphans(); err != nil {
			return err
		}
		if err := r.settleLost(); err != nil {
			return err
		}
	}
	if err := r.rep.flush(); err != nil {
		return err
	}
	return r.settleDangling()
}

// settleDangling looks again at the objects phase 2 found missing that
// exist now: made by this run (-C from a directory entry, or from the OST
// objects that point back to it, in lost+found) they have one name in
// their linkEA and nlink 1, while other entries may name them too (a file
// with hard links). Reconciled now, they get every name and the right
// nlink in this run; before, removing one name (the lost+found one an
// admin cleans up) destroyed the data the others still named, until a
// second run. A dry run makes nothing: nothing is found here.
func (r *run) settleDangling() error {
	if !r.on(Namespace) {
		return nil
	}
	r.mu.Lock()
	dangling, claims := r.dangling, r.claims
	r.dangling = nil
	r.mu.Unlock()
	if len(dangling) == 0 {
		return nil
	}
	children := make([]fid.FID, 0, len(dangling))
	for c := range dangling {
		children = append(children, c)
	}
	sort.Slice(children, func(i, j int) bool { return bytes.Compare(children[i].Bytes(), children[j].Bytes()) < 0 })
	planned := map[nameKey]fid.FID{}
	for _, c := range children {
		snap := r.env.Target.DB().NewSnapshot()
		local, _, err := r.lookup(snap, c)
		snap.Close()
		if err != nil || r.isLoser(local) {
			continue // still missing: reported in phase 2
		}
		if err := r.reconcile(c, dangling[c], claims, planned); err != nil {
			if err := r.failed(Namespace, 2, err); err != nil {
				return err
			}
		}
	}
	return r.rep.flush()
}

func (r *run) nsPhase2() error {
	items, err := r.loadTrace()
	if err != nil {
		return err
	}
	claims := map[nameKey][]fid.FID{}
	for _, it := range items {
		if it.Kind == itemClaim {
			nk := nameKey{fid.FromPB(it.Parent), string(it.Name)}
			claims[nk] = append(claims[nk], fid.FromPB(it.Child))
		}
	}
	r.mu.Lock()
	r.claims = claims
	r.mu.Unlock()
	planned := map[nameKey]fid.FID{}
	start := r.st.Phase2Position
	for i := 0; i < len(items); {
		j := i + 1
		for j < len(items) && fid.FromPB(items[j].Child) == fid.FromPB(items[i].Child) {
			j++
		}
		group := items[i:j]
		i = j
		if start != nil && bytes.Compare(traceKey(group[0]), start) < 0 {
			continue
		}
		if r.stopping() {
			return errHalted
		}
		if err := r.lim.wait(r.ctx, uint64(len(group))); err != nil {
			return err
		}
		if err := r.pac.pace(r.ctx); err != nil {
			return err
		}
		if err := fault.Hit("lfsck.phase2.item"); err != nil {
			if err := r.failed(Namespace, 2, err); err != nil {
				return err
			}
			continue
		}
		if err := r.reconcile(fid.FromPB(group[0].Child), group, claims, planned); err != nil {
			if err := r.failed(Namespace, 2, err); err != nil {
				return err
			}
		}
		if err := r.rep.flush(); err != nil {
			return err
		}
		r.mu.Lock()
		r.t2[Namespace][tChecked] += uint64(len(group))
		if i < len(items) {
			r.st.Phase2Position = traceKey(items[i])
		} else {
			r.st.Phase2Position = []byte{0xff}
		}
		r.mu.Unlock()
		if err := r.maybeCheckpoint(); err != nil {
			return err
		}
	}
	return nil
}

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

func (r *run) emit(f *fix) {
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

type getter interface {
	Get([]byte) ([]byte, error)
}

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
func (r *run) reconcile(child fid.FID, group []*pb.LfsckTraceItem, claims map[nameKey][]fid.FID, planned map[nameKey]fid.FID) error {
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
		r.mu.Lock()
		if r.dangling == nil {
			r.dangling = map[fid.FID][]*pb.LfsckTraceItem{}
		}
		r.dangling[child] = group
		r.mu.Unlock()
		return r.missingChild(snap, child, entries, claims, planned)
	}
	if err != nil {
		return err
	}
	if child == fid.Root || child == fid.DotNacre {
		return r.dropLoopEntries(snap, child, entries)
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
		plocal, dv, dtyp, ok := r.entryStill(snap, e, nk, child)
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
	unseen := overflow != 0 && (full || !r.everyNameSeen(overflow))
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
	r.emit(f)
	return nil
}

// everyNameSeen says whether this run saw every name of an object whose
// linkEA was last marked overflowed by the command at log index mark: the
// command was applied before the scan began (so each name left out was in
// the store when the scan read its directory), and the scan read the
// entries of every directory (a name in a directory it failed to read, or
// one whose record does not decode, would go unseen).
func (r *run) everyNameSeen(mark uint64) bool {
	r.mu.Lock()
	failed := r.t1[Namespace][tFailed]
	r.mu.Unlock()
	return r.st.RunStartIndex != 0 && mark < r.st.RunStartIndex && failed == 0 && !r.direntsUnread.Load()
}

// entryStill reports whether the traced entry e (nk) is still in its
// parent and still names child, with the parent's local key, the entry's
// value and its type.
func (r *run) entryStill(snap *kv.Snapshot, e *pb.LfsckTraceItem, nk nameKey, child fid.FID) (plocal uint64, dv []byte, dtyp uint8, ok bool) {
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
func (r *run) dropLoopEntries(snap *kv.Snapshot, child fid.FID, entries []*pb.LfsckTraceItem) error {
	f := newFix()
	f.reportKey = child.Bytes()
	for _, e := range entries {
		nk := nameKey{fid.FromPB(e.Parent), string(e.Name)}
		if !loopEntry(nk.parent, nk.name, child) {
			continue
		}
		plocal, dv, dtyp, ok := r.entryStill(snap, e, nk, child)
		if !ok {
			continue // changed meanwhile
		}
		dk := mdt.DirentKey(plocal, nk.name)
		f.cond(dk, dv)
		removeEntry(f, dk, nk.parent, dtyp)
	}
	r.emit(f)
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

func (r *run) isLoser(local uint64) bool {
	r.omu.Lock()
	defer r.omu.Unlock()
	return r.losers[local]
}

// missingChild settles entries that name an object that does not exist:
// a linkEA elsewhere claiming the name means the entry's FID is wrong;
// otherwise the entry dangles (-C re-creates the object).
func (r *run) missingChild(snap *kv.Snapshot, child fid.FID, entries []*pb.LfsckTraceItem, claims map[nameKey][]fid.FID, planned map[nameKey]fid.FID) error {
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
		r.emit(f)
	}
	return nil
}
