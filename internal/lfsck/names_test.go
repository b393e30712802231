package lfsck

import (
	"sort"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// TestNamesThatAreNotUTF8AreNotDamage: POSIX names are bytes. A tree
// named with bytes that are not UTF-8 is consistent to the checker, and
// repairs that rebuild names (a lost linkEA, a lost entry) put back the
// exact bytes instead of treating such names as garbage.
func TestNamesThatAreNotUTF8AreNotDamage(t *testing.T) {
	h := newHarness(t, 2)
	long := make([]byte, 255)
	for i := range long {
		long[i] = 0x80 + byte(i%128)
	}
	d := h.mkdir(fid.Root, "caf\xe9")
	f1 := h.create(d, "\xff\xfe", 1, []byte("one"))
	if r := h.do(&pb.LinkOp{Fid: f1.PB(), Parent: d.PB(), Name: []byte("h\xe9")}); r.Errno != 0 {
		t.Fatal(r.Message)
	}
	f2 := h.create(d, string(long), 2, pattern(100<<10, 5))
	sub := h.mkdir(d, "\x80sub")
	f3 := h.create(sub, "x\xe9", 1, []byte("three"))
	names := map[string]fid.FID{"\xff\xfe": f1, "h\xe9": f1, string(long): f2, "\x80sub": sub}
	checkNames := func(when string) {
		t.Helper()
		for n, want := range names {
			if got, err := h.lookup(d, n); err != nil || got != want {
				t.Fatalf("%s: lookup %q: %s %v, want %s", when, n, got, err, want)
			}
		}
		if got, err := h.lookup(sub, "x\xe9"); err != nil || got != f3 {
			t.Fatalf("%s: lookup x\\xe9: %s %v", when, got, err)
		}
		ino, err := h.tg.Getattr(f1, true)
		if err != nil {
			t.Fatal(err)
		}
		var links []string
		for _, l := range ino.Links {
			links = append(links, string(l.Name))
		}
		sort.Strings(links)
		if strings.Join(links, "/") != "h\xe9/\xff\xfe" || ino.Nlink != 2 {
			t.Fatalf("%s: linkEA of f1 %q, nlink %d", when, links, ino.Nlink)
		}
	}
	all := func() *pb.LfsckStartRequest {
		return &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true}
	}
	c := New(h.env())
	if rep := h.run(c, all()); func() bool { f, _ := totals(rep); return f != 0 }() {
		t.Fatalf("clean tree with names that are not UTF-8: %s", describe(rep))
	}
	checkNames("after a check of a clean tree")

	// The linkEA is rebuilt from the entries, with their bytes.
	h.inject("linkea_missing", f1, d, "\xff\xfe", 0)
	if rep := h.run(c, all()); func() bool { f, r := totals(rep); return f == 0 || f != r }() {
		t.Fatalf("linkea_missing: %s", describe(rep))
	}
	checkNames("after the linkEA repair")

	// A lost entry is put back from the linkEA, with its bytes.
	h.inject("dirent_missing", f2, d, string(long), 0)
	if _, err := h.lookup(d, string(long)); err == nil {
		t.Fatal("dirent_missing left the entry")
	}
	if rep := h.run(c, all()); func() bool { f, r := totals(rep); return f == 0 || f != r }() {
		t.Fatalf("dirent_missing: %s", describe(rep))
	}
	checkNames("after the entry repair")
	if rep := h.run(c, all()); func() bool { f, _ := totals(rep); return f != 0 }() {
		t.Fatalf("second run after the repairs: %s", describe(rep))
	}
}
