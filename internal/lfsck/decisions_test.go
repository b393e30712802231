package lfsck

import (
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/layout"
	"nacre/internal/mdt"
	"nacre/internal/objrec"
)

// The decisions of phase 1 and of the OI scrub and the layout check, table
// by table, without a store.

func links(n, nameLen int) []link {
	out := make([]link, n)
	for i := range out {
		out[i] = link{parent: dirA, name: []byte(longName(i, nameLen))}
	}
	return out
}

// Phase 1 sends to phase 2 the objects whose names it cannot settle
// alone.
func TestTraceFlags(t *testing.T) {
	fits := mdt.LinksMaxBytes / mdt.LinkBytes([]byte(longName(0, 100)))
	cases := []struct {
		name          string
		isDir         bool
		nlink         uint32
		links         []link
		mark, started uint64
		want          uint32
	}{
		{"a directory with one name", true, 2, links(1, 4), 0, 10, 0},
		{"a directory with no name", true, 2, nil, 0, 10, flagNames},
		{"a directory with two names", true, 2, links(2, 4), 0, 10, flagNames},
		{"a directory being removed", true, 0, nil, 0, 10, 0},
		{"a file with its names", false, 2, links(2, 4), 0, 10, 0},
		{"a file with no name", false, 1, nil, 0, 10, flagNoNames},
		{"a file removed while open", false, 0, nil, 0, 10, 0},
		{"nlink below the names", false, 1, links(2, 4), 0, 10, flagNlink},
		{"nlink above the names", false, 3, links(2, 4), 0, 10, 0},
		{"marked overflowed before the run", false, 3, links(2, 4), 9, 10, flagOverflow},
		{"marked overflowed during the run", false, 3, links(2, 4), 10, 10, 0},
		{"a linkEA at the bound", false, uint32(fits), links(fits, 100), 0, 10, 0},
		{"a linkEA past the bound", false, uint32(fits + 1), links(fits+1, 100), 0, 10, flagOverflow},
	}
	for _, c := range cases {
		if got := traceFlags(c.isDir, c.nlink, c.links, c.mark, c.started); got != c.want {
			t.Errorf("%s: flags %d, want %d", c.name, got, c.want)
		}
	}
}

// An entry phase 2 must rewrite or remove.
func TestCorruptEntry(t *testing.T) {
	cases := []struct {
		name   string
		parent fid.FID
		entry  string
		names  fid.FID
		ok     bool
		want   bool
	}{
		{"a file", dirA, "f", child, true, false},
		{"does not decode", dirA, "f", child, false, true},
		{"names no FID", dirA, "f", fid.FID{}, true, true},
		{"a FID with a version", dirA, "f", fid.FID{Seq: child.Seq, Oid: child.Oid, Ver: 1}, true, true},
		{"a name with a slash", dirA, "a/b", child, true, true},
		{"a name too long", dirA, strings.Repeat("n", mdt.MaxNameLen+1), child, true, true},
		{"dot", dirA, ".", child, true, true},
		{"the root inside a directory", dirA, "r", fid.Root, true, true},
		{"/.nacre", fid.Root, dotNacreName, fid.DotNacre, true, false},
		{".nacre elsewhere", dirA, dotNacreName, fid.DotNacre, true, true},
		{".nacre under another name", fid.Root, "n", fid.DotNacre, true, true},
	}
	for _, c := range cases {
		if got := corruptEntry(c.parent, []byte(c.entry), c.names, c.ok); got != c.want {
			t.Errorf("%s: corrupt %v, want %v", c.name, got, c.want)
		}
	}
	if !dirCountWrong(3, 0, func() bool { return false }) || dirCountWrong(2, 0, nil) || dirCountWrong(0, 5, func() bool { return true }) ||
		!dirCountWrong(0, 0, func() bool { return false }) {
		t.Error("dirCountWrong: want nlink 2 plus subdirectories, a directory removed while open left alone")
	}
}

func TestDecideOI(t *testing.T) {
	const self, other = 10, 20
	facts := func(change func(*oiFacts)) *oiFacts {
		x := &oiFacts{local: self, mtime: 100, links: 1, found: true, cur: be64(self), other: self}
		change(x)
		return x
	}
	conflict := func(change func(*oiFacts)) *oiFacts {
		return facts(func(x *oiFacts) {
			x.cur, x.other, x.claims, x.otherMtime, x.otherLinks = be64(other), other, true, 100, 1
			change(x)
		})
	}
	cases := []struct {
		name string
		x    *oiFacts
		want oiDecision
	}{
		{"the OI names the object", facts(func(*oiFacts) {}), oiDecision{}},
		{"no OI entry", facts(func(x *oiFacts) { x.found = false }), oiDecision{kind: KOIMissing}},
		{"an entry naming another key", facts(func(x *oiFacts) { x.cur, x.other = be64(other), other }), oiDecision{kind: KOIStale}},
		{"an entry that does not decode", facts(func(x *oiFacts) { x.cur = []byte{1, 2} }), oiDecision{kind: KOIStale}},
		{"another object claims the FID, modified later", conflict(func(x *oiFacts) { x.otherMtime = 200 }),
			oiDecision{kind: KOIConflict, win: other, lose: self}},
		{"another object claims the FID, modified before", conflict(func(x *oiFacts) { x.otherMtime = 50 }),
			oiDecision{kind: KOIConflict, win: self, lose: other}},
		{"the same time, the object has more names", conflict(func(x *oiFacts) { x.links = 2 }),
			oiDecision{kind: KOIConflict, win: self, lose: other}},
		{"the same time and names: the OI's choice", conflict(func(*oiFacts) {}),
			oiDecision{kind: KOIConflict, win: other, lose: self}},
		{"a stale copy is removed", conflict(func(x *oiFacts) { x.same, x.mtime = true, 300 }),
			oiDecision{kind: KOIConflict, win: self, lose: other, removeLoser: true}},
	}
	for _, c := range cases {
		if got := decideOI(c.x); got != c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

func TestMismatchKind(t *testing.T) {
	want := objrec.Rec{Seq: 7, Oid: 9, Parent: child, StripeIndex: 1, StripeSize: 1 << 20, StripeCount: 2, Gen: 1, UID: 10, GID: 20, ProjID: 30}
	got := func(change func(*objrec.Rec)) objrec.Rec {
		r := want
		change(&r)
		return r
	}
	cases := []struct {
		name       string
		got        objrec.Rec
		otherNames bool
		want       uint32
	}{
		{"another stripe index", got(func(r *objrec.Rec) { r.StripeIndex = 0 }), false, KLyStripeIdx},
		{"another stripe index and owner", got(func(r *objrec.Rec) { r.StripeIndex, r.UID = 0, 1 }), false, KLyStripeIdx},
		{"another owner", got(func(r *objrec.Rec) { r.UID = 1 }), false, KLyOwner},
		{"another group", got(func(r *objrec.Rec) { r.GID = 1 }), false, KLyOwner},
		{"another project", got(func(r *objrec.Rec) { r.ProjID = 1 }), false, KLyOwner},
		{"another stripe size", got(func(r *objrec.Rec) { r.StripeSize = 1 << 16 }), false, KLyOthers},
		{"another layout generation", got(func(r *objrec.Rec) { r.Gen = 2 }), false, KLyOthers},
		{"a PFID naming another file", got(func(r *objrec.Rec) { r.Parent = another }), false, KLyUnmatched},
		{"a PFID naming another file whose layout names it", got(func(r *objrec.Rec) { r.Parent = another }), true, KLyMultiRef},
	}
	for _, c := range cases {
		if k := mismatchKind(c.got, want, c.otherNames); k != c.want {
			t.Errorf("%s: %s, want %s", c.name, KindNames[Layout][k], KindNames[Layout][c.want])
		}
	}
}

func TestOrphanSlot(t *testing.T) {
	const ost = 1
	orphan := func(idx, count uint32) orphanObj {
		return orphanObj{ost: ost, attr: &pb.ObjectAttr{Seq: 7, Oid: 9, StripeIndex: idx, StripeCount: count}}
	}
	objs := []*pb.StripeObject{{Ost: 0, Seq: 7, Oid: 3}, {}, {Ost: ost, Seq: 7, Oid: 9}}
	cases := []struct {
		name string
		m    orphanObj
		want slotCase
	}{
		{"a hole", orphan(1, 3), slotHole},
		{"its own slot", orphan(2, 3), slotSame},
		{"another object's slot", orphan(0, 3), slotTaken},
		{"past the layout, within its count", orphan(4, 5), slotBeyond},
		{"past the layout and its count", orphan(5, 5), slotNone},
		{"a count past the most stripes", orphan(4, layout.MaxStripeCount+1), slotNone},
	}
	for _, c := range cases {
		if got := orphanSlot(objs, c.m); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
