package lfsck

import (
	"fmt"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/mdt"
)

// TestLinkEAOverflow: a file with more hard links than its linkEA's 4 KiB
// bound keeps the first names and a mark that names were left out; the
// checker then finds nothing wrong (the names past the bound are not
// "missing from the linkEA", nlink is not "above the number of names"). A
// file whose linkEA was lost gets back what fits, and the mark. Once
// unlinks make room, a run records the names that were left out and clears
// the mark; fid2path then gives every path.
func TestLinkEAOverflow(t *testing.T) {
	h := newHarness(t, 2)
	f := h.create(fid.Root, "many", 1, []byte("data"))
	d := h.mkdir(fid.Root, "d")
	const links = 200
	name := func(i int) string { return fmt.Sprintf("name-%03d-padding", i) } // 40 bytes a name: about 100 fit
	for i := range links {
		if r := h.do(&pb.LinkOp{Fid: f.PB(), Parent: d.PB(), Name: []byte(name(i))}); r.Errno != 0 {
			t.Fatalf("link %d: %s", i, r.Message)
		}
	}
	getattr := func() *pb.Inode {
		t.Helper()
		ino, err := h.tg.Getattr(f, true)
		if err != nil {
			t.Fatal(err)
		}
		return ino
	}
	ino := getattr()
	recorded := len(ino.Links)
	if ino.Nlink != links+1 || ino.LinksOverflowIndex == 0 || mdt.LinksBytes(ino) > mdt.LinksMaxBytes || recorded < 95 || recorded > 105 {
		t.Fatalf("after %d links: nlink %d, %d names recorded (%d bytes), overflow mark %d; want nlink %d, at most %d bytes, a mark",
			links, ino.Nlink, recorded, mdt.LinksBytes(ino), ino.LinksOverflowIndex, links+1, mdt.LinksMaxBytes)
	}
	c := New(h.env())
	all := func() *pb.LfsckStartRequest {
		return &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true, CreateOstobj: true, CreateMdtobj: true}
	}
	rep := h.run(c, all())
	if n, _ := totals(rep); n != 0 {
		t.Fatalf("a file past its linkEA bound was found inconsistent: %s", describe(rep))
	}
	// Its names past the bound are not traced: phase 2 looks at the
	// object once, not at each of its 100 names left out.
	if n := rep.Components["namespace"].CheckedPhase2; n > 10 {
		t.Fatalf("phase 2 checked %d items for one file with a full linkEA", n)
	}
	if got := getattr(); len(got.Links) != recorded || got.Nlink != links+1 || got.LinksOverflowIndex == 0 {
		t.Fatalf("the run changed the file: %d names recorded, nlink %d, mark %d", len(got.Links), got.Nlink, got.LinksOverflowIndex)
	}

	// A lost linkEA comes back as far as it fits, with the mark, and the
	// file is not taken for an orphan.
	h.setRaw(&pb.LfsckKV{Key: mdt.ObjKey(h.localOf(f)), Value: func() []byte {
		ino := getattr()
		ino.Links, ino.LinksOverflowIndex = nil, 0
		return mdt.MarshalInode(ino)
	}()})
	rep = h.run(c, all())
	if got, want := nsCounts(rep), "linkea 1/1"; got != want {
		t.Fatalf("lost linkEA: %q, want %q: %s", got, want, describe(rep))
	}
	if got := getattr(); got.LinksOverflowIndex == 0 || mdt.LinksBytes(got) > mdt.LinksMaxBytes || len(got.Links) < 90 || got.Nlink != links+1 {
		t.Fatalf("lost linkEA repaired to %d names (%d bytes), mark %d, nlink %d", len(got.Links), mdt.LinksBytes(got), got.LinksOverflowIndex, got.Nlink)
	}
	if lpf := h.lpf(); len(lpf) != 0 {
		t.Fatalf("lost+found has %v", lpf)
	}

	// Unlinks make room: 150 names go, among them every recorded one but
	// "many" and some left out.
	for i := range 150 {
		if r := h.do(&pb.UnlinkOp{Parent: d.PB(), Name: []byte(name(i))}); r.Errno != 0 {
			t.Fatalf("unlink %d: %s", i, r.Message)
		}
	}
	if got := getattr(); got.LinksOverflowIndex == 0 {
		t.Fatal("unlinks cleared the mark: the names left out are still left out")
	}
	rep = h.run(c, all())
	if got, want := nsCounts(rep), "linkea 1/1"; got != want {
		t.Fatalf("after the unlinks: %q, want %q: %s", got, want, describe(rep))
	}
	if n := rep.Components["namespace"].Counters["linkea_overflow"]; n.Inconsistent != 1 || n.Repaired != 1 {
		t.Fatalf("linkea_overflow %d/%d, want 1/1: %s", n.Inconsistent, n.Repaired, describe(rep))
	}
	got := getattr()
	if got.LinksOverflowIndex != 0 || len(got.Links) != links+1-150 || got.Nlink != links+1-150 {
		t.Fatalf("after the run: %d names recorded, mark %d, nlink %d; want %d names, no mark", len(got.Links), got.LinksOverflowIndex, got.Nlink, links+1-150)
	}
	if rep := h.run(c, all()); func() bool { n, _ := totals(rep); return n != 0 }() {
		t.Fatalf("second run found something: %s", describe(rep))
	}
	paths, _, err := h.tg.Fid2Path(f)
	if err != nil || len(paths) != links+1-150 || !strings.Contains(strings.Join(paths, " "), "/d/"+name(links-1)) {
		t.Fatalf("fid2path: %d paths, %v", len(paths), err)
	}
	if data, err := h.read(f); err != nil || string(data) != "data" {
		t.Fatalf("read back %q, %v", data, err)
	}
}

// TestRenameRecordsALeftOutNameWhenItFits: renaming a name the linkEA
// left out records the new name once there is room, and renaming a
// recorded name keeps it recorded.
func TestRenameRecordsALeftOutNameWhenItFits(t *testing.T) {
	h := newHarness(t, 2)
	f := h.create(fid.Root, "r", 1, nil)
	name := func(i int) string { return fmt.Sprintf("n%03d-%s", i, strings.Repeat("x", 60)) } // 89 bytes a name: 45 fit
	for i := range 60 {
		if r := h.do(&pb.LinkOp{Fid: f.PB(), Parent: fid.Root.PB(), Name: []byte(name(i))}); r.Errno != 0 {
			t.Fatalf("link %d: %s", i, r.Message)
		}
	}
	has := func(n string) bool {
		ino, err := h.tg.Getattr(f, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ino.Links {
			if string(l.Name) == n {
				return true
			}
		}
		return false
	}
	if has(name(59)) || !has(name(0)) {
		t.Fatalf("want the first name recorded and the last left out")
	}
	rename := func(from, to string) {
		t.Helper()
		if r := h.do(&pb.RenameOp{SrcParent: fid.Root.PB(), SrcName: []byte(from), DstParent: fid.Root.PB(), DstName: []byte(to)}); r.Errno != 0 {
			t.Fatalf("rename %s: %s", from, r.Message)
		}
	}
	first := "f" + name(0)[1:] // as long: the list stays as full
	rename(name(0), first)
	if !has(first) || has(name(0)) {
		t.Fatal("a recorded name renamed is not recorded under its new name")
	}
	long := "last" + strings.Repeat("y", 61) // 89 bytes, more than the room left
	rename(name(59), long)
	if has(long) {
		t.Fatal("a left-out name renamed was recorded past the bound")
	}
	for i := 1; i < 10; i++ {
		if r := h.do(&pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte(name(i))}); r.Errno != 0 {
			t.Fatalf("unlink: %s", r.Message)
		}
	}
	rename(long, "last")
	if !has("last") {
		t.Fatal("a left-out name renamed with room in the linkEA was not recorded")
	}
}

// TestLinkEAPastTheBoundIsTrimmed: a linkEA longer than the bound (kept
// from a store of before the bound) is cut to it by a run, the names cut
// are left out with the mark, and the next run finds nothing: every later
// operation on the file then reads and writes 4 KiB of names, not all.
func TestLinkEAPastTheBoundIsTrimmed(t *testing.T) {
	h := newHarness(t, 2)
	f := h.create(fid.Root, "old", 1, []byte("data"))
	ino, err := h.tg.Getattr(f, true)
	if err != nil {
		t.Fatal(err)
	}
	const links = 300
	for i := range links {
		name := fmt.Sprintf("old-link-%04d", i)
		if r := h.do(&pb.LinkOp{Fid: f.PB(), Parent: fid.Root.PB(), Name: []byte(name)}); r.Errno != 0 {
			t.Fatalf("link: %s", r.Message)
		}
		ino.Links = append(ino.Links, &pb.LinkEntry{Parent: fid.Root.PB(), Name: []byte(name)})
	}
	ino.Nlink, ino.LinksOverflowIndex = links+1, 0
	h.setRaw(&pb.LfsckKV{Key: mdt.ObjKey(h.localOf(f)), Value: mdt.MarshalInode(ino)})
	c := New(h.env())
	all := &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true}
	rep := h.run(c, all)
	if got, want := nsCounts(rep), "linkea 1/1"; got != want {
		t.Fatalf("%q, want %q: %s", got, want, describe(rep))
	}
	got, err := h.tg.Getattr(f, true)
	if err != nil {
		t.Fatal(err)
	}
	if mdt.LinksBytes(got) > mdt.LinksMaxBytes || got.LinksOverflowIndex == 0 || got.Nlink != links+1 {
		t.Fatalf("after the run: %d bytes of names, mark %d, nlink %d", mdt.LinksBytes(got), got.LinksOverflowIndex, got.Nlink)
	}
	if rep := h.run(c, all); func() bool { n, _ := totals(rep); return n != 0 }() {
		t.Fatalf("second run found something: %s", describe(rep))
	}
}
