package lfsck

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/mdt"
)

// The namespace check's decisions, table by table, without a store: each
// row is the facts phase 2 gathers about one object and what must become
// of it.

var (
	child   = fid.FID{Seq: fid.SeqNormal, Oid: 100}
	dirA    = fid.FID{Seq: fid.SeqNormal, Oid: 1}
	dirB    = fid.FID{Seq: fid.SeqNormal, Oid: 2}
	dirC    = fid.FID{Seq: fid.SeqNormal, Oid: 3}
	another = fid.FID{Seq: fid.SeqNormal, Oid: 200}
)

const (
	tReg = uint8(syscall.S_IFREG >> 12)
	tDir = uint8(syscall.S_IFDIR >> 12)
)

// A linkEA entry (parent, name) of the object and how its entry reads.

func linkTo(parent fid.FID, name string) linkFacts {
	return linkFacts{l: &pb.LinkEntry{Parent: parent.PB(), Name: []byte(name)}, nk: nameKey{parent, name}, plocal: uint64(parent.Oid)}
}

// named: the entry names the object, with type typ.
func named(parent fid.FID, name string, typ uint8) linkFacts {
	lf := linkTo(parent, name)
	lf.entry = direntFacts{v: []byte("entry"), exists: true, names: child, typ: typ, valid: true}
	return lf
}

// namesOther: the entry names another object, as described.
func namesOther(parent fid.FID, name string, other otherFacts) linkFacts {
	lf := linkTo(parent, name)
	other.fid = another
	lf.entry = direntFacts{v: []byte("entry"), exists: true, names: another, typ: tReg, valid: true}
	lf.other = other
	return lf
}

// gone: no entry of the name; the parent is there.
func gone(parent fid.FID, name string) linkFacts { return linkTo(parent, name) }

// deadParent: the parent does not exist (allocated: its FID was).
func deadParent(parent fid.FID, name string, allocated bool) linkFacts {
	lf := linkTo(parent, name)
	lf.dead, lf.allocated, lf.plocal = true, allocated, 0
	return lf
}

func repeated(parent fid.FID, name string) linkFacts {
	lf := linkTo(parent, name)
	lf.repeat, lf.plocal = true, 0
	return lf
}

// traced is a traced entry naming the object that is still there, of
// type typ.
func traced(parent fid.FID, name string, typ uint8) entryFacts {
	return entryFacts{e: &pb.LfsckTraceItem{Kind: itemEntry, Child: child.PB(), Parent: parent.PB(), Name: []byte(name)},
		nk: nameKey{parent, name}, invalid: mdt.ValidName(name) != nil, read: true, still: true, plocal: uint64(parent.Oid), v: []byte("entry"), typ: typ}
}

func objectOf(mode, nlink uint32, links []linkFacts, entries ...entryFacts) *objectFacts {
	ino := &pb.Inode{Fid: child.PB(), Mode: mode, Nlink: nlink}
	for _, lf := range links {
		ino.Links = append(ino.Links, lf.l)
	}
	return &objectFacts{child: child, local: 100, v: []byte("record"), ino: ino, links: links, entries: entries, runStart: 50, everySeen: true}
}

func file(nlink uint32, links ...linkFacts) *objectFacts {
	return objectOf(syscall.S_IFREG|0o644, nlink, links)
}

func dir(links ...linkFacts) *objectFacts { return objectOf(syscall.S_IFDIR|0o755, 2, links) }

func kindNames(ks []uint32) string {
	var out []string
	for _, k := range ks {
		out = append(out, KindNames[Namespace][k])
	}
	return strings.Join(out, ",")
}

// longName is a name of n bytes.
func longName(i, n int) string {
	s := fmt.Sprintf("n%d-", i)
	return s + strings.Repeat("x", n-len(s))
}

func TestDecideObject(t *testing.T) {
	adopt := func(x *objectFacts) *objectFacts { x.adopt = true; return x }
	withEntries := func(x *objectFacts, es ...entryFacts) *objectFacts { x.entries = es; return x }
	overflowed := func(x *objectFacts, everySeen bool) *objectFacts {
		x.ino.LinksOverflowIndex, x.everySeen = 7, everySeen
		return x
	}
	// A file whose linkEA is as full as the bound lets it be.
	var fullLinks []linkFacts
	for i := 0; i < mdt.LinksMaxBytes/mdt.LinkBytes([]byte(longName(0, 100))); i++ {
		fullLinks = append(fullLinks, named(dirA, longName(i, 100), tReg))
	}
	full := uint32(len(fullLinks))
	// A list past the bound: two names more than fit.
	pastLinks := append(slices.Clone(fullLinks), named(dirB, longName(998, 100), tReg), named(dirB, longName(999, 100), tReg))
	notStill := traced(dirB, "moved", tReg)
	notStill.still = false

	cases := []struct {
		name    string
		x       *objectFacts
		kinds   string
		reports string
		links   []linkVerdict
		entries []entryVerdict
		nlink   uint32 // the object's nlink after
		rewrite bool
		orphan  orphanVerdict
		lpfBase string
	}{
		{name: "every name matches", x: file(2, named(dirA, "a", tReg), named(dirB, "b", tReg)),
			links: []linkVerdict{linkKeep, linkKeep}, nlink: 2},
		{name: "a name twice in the linkEA", x: file(1, named(dirA, "a", tReg), repeated(dirA, "a")),
			kinds: "linkea", links: []linkVerdict{linkKeep, linkRepeat}, nlink: 1, rewrite: true},
		{name: "the entry's type differs", x: file(1, named(dirA, "a", tDir)),
			kinds: "bad_file_type", links: []linkVerdict{linkRetype}, nlink: 1},
		{name: "a name missing from the linkEA", x: withEntries(file(1), traced(dirA, "a", tReg)),
			kinds: "linkea", entries: []entryVerdict{entryAdd}, nlink: 1, rewrite: true},
		{name: "a traced entry changed meanwhile", x: withEntries(file(1, named(dirA, "a", tReg)), notStill),
			links: []linkVerdict{linkKeep}, entries: []entryVerdict{entryChanged}, nlink: 1},
		{name: "a traced entry the linkEA holds", x: withEntries(file(1, named(dirA, "a", tReg)), traced(dirA, "a", tReg)),
			links: []linkVerdict{linkKeep}, entries: []entryVerdict{entryLinked}, nlink: 1},
		{name: "an entry with an invalid name", x: withEntries(file(1, named(dirA, "a", tReg)), traced(dirB, "x/y", tReg)),
			kinds: "dirent", links: []linkVerdict{linkKeep}, entries: []entryVerdict{entryRemove}, nlink: 1},
		{name: "an entry of another type the linkEA does not hold", x: withEntries(file(1, named(dirA, "a", tReg)), traced(dirB, "b", tDir)),
			kinds: "dirent", links: []linkVerdict{linkKeep}, entries: []entryVerdict{entryRemove}, nlink: 1},
		{name: "a directory's second name", x: withEntries(dir(named(dirA, "a", tDir)), traced(dirB, "b", tDir)),
			kinds: "dirent", links: []linkVerdict{linkKeep}, entries: []entryVerdict{entryRemove}, nlink: 2},
		{name: "the entry names an object that does not exist", x: file(1, namesOther(dirA, "a", otherFacts{missing: true})),
			kinds: "dirent", links: []linkVerdict{linkPoint}, nlink: 1},
		{name: "the entry names another object that holds the name",
			x:     file(2, named(dirB, "b", tReg), namesOther(dirA, "a", otherFacts{found: true, holds: true})),
			kinds: "multiple_referenced", links: []linkVerdict{linkKeep, linkOwned}, nlink: 2, rewrite: true},
		{name: "the entry names another object that does not hold the name",
			x:     file(2, named(dirB, "b", tReg), namesOther(dirA, "a", otherFacts{found: true})),
			kinds: "multiple_referenced", links: []linkVerdict{linkKeep, linkOwned}, nlink: 2, rewrite: true},
		{name: "the entry names an empty object the checker made", x: file(1, namesOther(dirA, "a", otherFacts{found: true, empty: true})),
			kinds: "multiple_referenced", links: []linkVerdict{linkTakeOver}, nlink: 1},
		{name: "the checker's empty object, with no room for the name",
			x:     file(1, named(dirB, "b", tReg), namesOther(dirA, "a", otherFacts{found: true, empty: true})),
			kinds: "multiple_referenced", links: []linkVerdict{linkKeep, linkOwned}, nlink: 1, rewrite: true},
		{name: "the name's entry is gone", x: file(1, gone(dirA, "a")),
			kinds: "lost_dirent", links: []linkVerdict{linkRestore}, nlink: 1},
		{name: "the last name's parent is gone, -o", x: adopt(file(1, deadParent(dirA, "a", true))),
			kinds: "lost_dirent", links: []linkVerdict{linkRemake}, nlink: 1},
		{name: "the last name's parent is gone", x: file(1, deadParent(dirA, "a", true)),
			reports: "lost_dirent", links: []linkVerdict{linkLost}, nlink: 1},
		{name: "a dead name beside a live one", x: file(1, named(dirB, "b", tReg), deadParent(dirA, "a", true)),
			kinds: "linkea", links: []linkVerdict{linkKeep, linkStale}, nlink: 1, rewrite: true},
		{name: "a stale name with names enough", x: file(1, named(dirB, "b", tReg), gone(dirA, "a")),
			kinds: "linkea", links: []linkVerdict{linkKeep, linkStale}, nlink: 1, rewrite: true},
		{name: "a renamed file: its new name added, the old one dropped", x: withEntries(file(1, gone(dirA, "old")), traced(dirB, "new", tReg)),
			kinds: "unmatched_pairs", links: []linkVerdict{linkStale}, entries: []entryVerdict{entryAdd}, nlink: 1, rewrite: true},
		{name: "a name taken from another object's entry",
			x:     withEntries(file(1, namesOther(dirA, "a", otherFacts{found: true, holds: true})), traced(dirB, "b", tReg)),
			kinds: "unmatched_pairs", links: []linkVerdict{linkOwned}, entries: []entryVerdict{entryAdd}, nlink: 1, rewrite: true},
		{name: "nothing names it", x: file(1),
			reports: "orphan", nlink: 1, orphan: orphanReport, lpfBase: "%F-O"},
		{name: "nothing names it, -o", x: adopt(file(1)),
			kinds: "orphan", nlink: 1, orphan: orphanAdopt, lpfBase: "%F-O"},
		{name: "its only name is dead and its parent was never made, -o", x: adopt(file(1, deadParent(dirA, "a", false))),
			kinds: "linkea,orphan", links: []linkVerdict{linkStale}, nlink: 1, rewrite: true, orphan: orphanAdopt, lpfBase: "%F-O"},
		{name: "a directory nothing names, -o", x: adopt(dir()),
			kinds: "orphan", nlink: 2, orphan: orphanAdopt, lpfBase: "%F-D"},
		{name: "a directory nothing names, its old parent known, -o", x: adopt(dir(deadParent(dirA, "x/y", true))),
			kinds: "linkea,orphan", links: []linkVerdict{linkStale}, nlink: 2, rewrite: true, orphan: orphanAdopt, lpfBase: "%F-" + dirA.String() + "-D"},
		{name: "its only name is another object's, -o", x: adopt(file(1, namesOther(dirA, "a", otherFacts{found: true, holds: true}))),
			kinds: "multiple_referenced", links: []linkVerdict{linkOwned}, nlink: 1, rewrite: true, orphan: orphanAdopt, lpfBase: "%F-O"},
		{name: "its only name is another object's", x: file(1, namesOther(dirA, "a", otherFacts{found: true, holds: true})),
			kinds: "multiple_referenced", links: []linkVerdict{linkOwned}, nlink: 1, rewrite: true, lpfBase: "%F-O"},
		{name: "removed while open", x: func() *objectFacts { x := file(1); x.pendingOrphan = true; return x }(), nlink: 1},
		{name: "nlink below the names", x: file(1, named(dirA, "a", tReg), named(dirB, "b", tReg)),
			kinds: "nlinks", links: []linkVerdict{linkKeep, linkKeep}, nlink: 2, rewrite: true},
		{name: "nlink above the names is kept", x: file(3, named(dirA, "a", tReg)),
			links: []linkVerdict{linkKeep}, nlink: 3},
		{name: "a name that does not fit the linkEA", x: withEntries(file(full+1, fullLinks...), traced(dirB, longName(500, 100), tReg)),
			kinds: "linkea", links: make([]linkVerdict, full), entries: []entryVerdict{entryUnrecorded}, nlink: full + 1, rewrite: true},
		{name: "a list past the bound loses its last names", x: file(full+2, pastLinks...),
			kinds: "linkea", links: make([]linkVerdict, full+2), nlink: full + 2, rewrite: true},
		{name: "every name recorded again", x: overflowed(file(1, named(dirA, "a", tReg)), true),
			kinds: "linkea_overflow", links: []linkVerdict{linkKeep}, nlink: 1, rewrite: true},
		{name: "an overflowed list, names unseen by this run", x: overflowed(file(1, named(dirA, "a", tReg)), false),
			links: []linkVerdict{linkKeep}, nlink: 1},
		{name: "an overflowed list with no name is no orphan until every name is seen", x: overflowed(file(2), false), nlink: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.links == nil {
				c.links = []linkVerdict{}
			}
			d := decideObject(c.x)
			if got := kindNames(d.kinds); got != c.kinds {
				t.Errorf("kinds %q, want %q", got, c.kinds)
			}
			if got := kindNames(d.reports); got != c.reports {
				t.Errorf("reports %q, want %q", got, c.reports)
			}
			if !slices.Equal(d.links, c.links) {
				t.Errorf("names %v, want %v", d.links, c.links)
			}
			if len(c.entries) > 0 || len(d.entries) > 0 {
				if !slices.Equal(d.entries, c.entries) {
					t.Errorf("entries %v, want %v", d.entries, c.entries)
				}
			}
			if d.nlink != c.nlink || d.rewrite != c.rewrite {
				t.Errorf("nlink %d, rewrite %v; want %d, %v", d.nlink, d.rewrite, c.nlink, c.rewrite)
			}
			if d.orphan != c.orphan || (c.lpfBase != "" && d.lpfBase != c.lpfBase) {
				t.Errorf("orphan %v as %q, want %v as %q", d.orphan, d.lpfBase, c.orphan, c.lpfBase)
			}
		})
	}
}

// What is kept of the linkEA, and the overflow mark.
func TestDecideObjectKeepsTheNamesAndTheMark(t *testing.T) {
	// A name that does not fit: left out, and the list marked overflowed
	// by this run (its first log index).
	var links []linkFacts
	for i := 0; i < mdt.LinksMaxBytes/mdt.LinkBytes([]byte(longName(0, 100))); i++ {
		links = append(links, named(dirA, longName(i, 100), tReg))
	}
	x := file(uint32(len(links))+1, links...)
	x.entries = []entryFacts{traced(dirB, longName(500, 100), tReg)}
	d := decideObject(x)
	if len(d.keep) != len(links) || d.overflow != x.runStart {
		t.Errorf("a name that does not fit: %d names kept, mark %d; want %d, %d", len(d.keep), d.overflow, len(links), x.runStart)
	}
	// A list past the bound keeps what fits, in order.
	x = file(uint32(len(links))+1, append(slices.Clone(links), named(dirB, longName(999, 100), tReg))...)
	d = decideObject(x)
	if len(d.keep) != len(links) || string(d.keep[len(d.keep)-1].Name) != longName(len(links)-1, 100) || d.overflow != x.runStart {
		t.Errorf("a list past the bound: %d names kept, mark %d", len(d.keep), d.overflow)
	}
	// A run that started at index 0 (none known) still marks the list.
	x.runStart = 0
	if d = decideObject(x); d.overflow != 1 {
		t.Errorf("a list past the bound, run start unknown: mark %d, want 1", d.overflow)
	}
	// A name added, a name restored, a dead name dropped: the linkEA
	// after, in the order the rules keep them.
	x = file(3, gone(dirA, "a"), named(dirB, "b", tReg), deadParent(dirC, "c", true))
	x.entries = []entryFacts{traced(dirC, "new", tReg)}
	d = decideObject(x)
	var got []string
	for _, l := range d.keep {
		got = append(got, fid.FromPB(l.Parent).String()+"/"+string(l.Name))
	}
	want := []string{dirB.String() + "/b", dirC.String() + "/new", dirA.String() + "/a"}
	if !slices.Equal(got, want) || kindNames(d.kinds) != "linkea,lost_dirent" {
		t.Errorf("kept %v (%s), want %v (linkea,lost_dirent)", got, kindNames(d.kinds), want)
	}
}

func TestDecideDangling(t *testing.T) {
	entry := func(typ uint8) direntFacts {
		return direntFacts{v: []byte("entry"), exists: true, names: child, typ: typ, valid: true}
	}
	still := func(e direntFacts) *danglingFacts {
		return &danglingFacts{nk: nameKey{dirA, "a"}, still: true, plocal: 1, entry: e, allocated: true}
	}
	with := func(df *danglingFacts, change func(*danglingFacts)) *danglingFacts { change(df); return df }
	cases := []struct {
		name string
		df   *danglingFacts
		want danglingVerdict
		mode uint32
	}{
		{"the parent changed", with(still(entry(tReg)), func(df *danglingFacts) { df.still = false }), danglingChanged, 0},
		{"the entry is gone", still(direntFacts{}), danglingChanged, 0},
		{"the entry names another object now", still(direntFacts{exists: true, names: another, typ: tReg, valid: true}), danglingChanged, 0},
		{"a garbage entry now names another object",
			with(still(direntFacts{exists: true, names: another, valid: true}), func(df *danglingFacts) { df.garbage = true }), danglingChanged, 0},
		{"another object's linkEA claims the name", with(still(entry(tReg)), func(df *danglingFacts) { df.owner = another }), danglingOwner, 0},
		{"a garbage entry", with(still(direntFacts{v: []byte{1}, exists: true}), func(df *danglingFacts) { df.garbage = true }), danglingRemove, 0},
		{"an entry that no longer decodes (a change in flight)", still(direntFacts{v: []byte{1}, exists: true}), danglingChanged, 0},
		{"a file's entry, -C", with(still(entry(tReg)), func(df *danglingFacts) { df.create = true }), danglingCreate, syscall.S_IFREG | 0o600},
		{"a directory's entry, -C", with(still(entry(tDir)), func(df *danglingFacts) { df.create = true }), danglingCreate, syscall.S_IFDIR | 0o700},
		{"a symlink's entry, -C", with(still(entry(uint8(syscall.S_IFLNK>>12))), func(df *danglingFacts) { df.create = true }), danglingReport, 0},
		{"a FID never allocated, -C", with(still(entry(tReg)), func(df *danglingFacts) { df.create, df.allocated = true, false }), danglingReport, 0},
		{"a file's entry", still(entry(tReg)), danglingReport, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v, mode := decideDangling(child, c.df); v != c.want || mode != c.mode {
				t.Errorf("verdict %v mode %o, want %v mode %o", v, mode, c.want, c.mode)
			}
		})
	}
}
