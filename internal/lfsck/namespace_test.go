package lfsck

import (
	"fmt"
	"strings"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/mdt"
)

// setRaw writes keys of the MDT store as damage would (no checks).
func (h *harness) setRaw(kvs ...*pb.LfsckKV) {
	h.t.Helper()
	for _, kv := range kvs {
		r, err := h.d.Do(&pb.Command{Op: &pb.Command_Fault{Fault: &pb.FaultOp{Kind: "garbage", Change: &pb.LfsckRepair{
			Muts: []*pb.LfsckMut{{M: &pb.LfsckMut_Set{Set: kv}}}}}}})
		if err != nil || r.Errno != 0 {
			h.t.Fatalf("write %q: %v %v", kv.Key, err, r)
		}
	}
}

// localOf is the local key of an object.
func (h *harness) localOf(f fid.FID) uint64 {
	h.t.Helper()
	local, _, err := newLookup(h, f)
	if err != nil {
		h.t.Fatalf("OI entry of %s: %v", f, err)
	}
	return local
}

// entryNames lists a directory's entries: name -> FID.
func (h *harness) entryNames(d fid.FID) map[string]fid.FID {
	h.t.Helper()
	ents, _, err := h.tg.Readdir(d, 0, 10000, false, nil)
	if err != nil {
		h.t.Fatalf("readdir %s: %v", d, err)
	}
	out := map[string]fid.FID{}
	for _, e := range ents {
		out[string(e.Name)] = fid.FromPB(e.Fid)
	}
	return out
}

func nsCounts(rep *Report) string {
	c := rep.Components["namespace"]
	var parts []string
	for _, k := range []string{"dirent", "linkea", "nlinks", "orphan", "unmatched_pairs", "multiple_referenced", "lost_dirent"} {
		if n, ok := c.Counters[k]; ok && (n.Inconsistent != 0 || n.Repaired != 0) {
			parts = append(parts, fmt.Sprintf("%s %d/%d", k, n.Inconsistent, n.Repaired))
		}
	}
	return strings.Join(parts, ", ")
}

// TestEntriesWithInvalidNamesAreRemoved: an entry whose name create would
// refuse ("", "x/y", "..") naming a file that has a valid name is removed
// in one run, and the next run finds nothing. Before, the empty name was
// added to the linkEA by one run and dropped by the next, for ever, and
// "x/y" was added to the linkEA and kept.
func TestEntriesWithInvalidNamesAreRemoved(t *testing.T) {
	for _, tc := range []struct {
		name   string
		bad    string
		inLink bool // the linkEA holds the bad name too (as old runs left "x/y")
	}{
		{"empty", "", false},
		{"slash", "x/y", false},
		{"dotdot", "..", false},
		{"too long", strings.Repeat("n", mdt.MaxNameLen+1), false},
		{"slash also in the linkEA", "x/y", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 2)
			f := h.create(fid.Root, "g19", 1, []byte("data"))
			root := h.localOf(fid.Root)
			h.setRaw(&pb.LfsckKV{Key: mdt.DirentKey(root, tc.bad), Value: mdt.EncodeDirent(f, mdt.DirentType(syscall.S_IFREG))})
			if tc.inLink {
				ino, err := h.tg.Getattr(f, true)
				if err != nil {
					t.Fatal(err)
				}
				ino.Links = append(ino.Links, &pb.LinkEntry{Parent: fid.Root.PB(), Name: []byte(tc.bad)})
				ino.Nlink = 2
				h.setRaw(&pb.LfsckKV{Key: mdt.ObjKey(h.localOf(f)), Value: mdt.MarshalInode(ino)})
			}
			c := New(h.env())
			req := func() *pb.LfsckStartRequest {
				return &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true, CreateOstobj: true, CreateMdtobj: true}
			}
			rep := h.run(c, req())
			if got, want := nsCounts(rep), "dirent 1/1"; !strings.HasPrefix(got, want) {
				t.Fatalf("first run: %q, want %q first: %s", got, want, describe(rep))
			}
			if _, ok := h.entryNames(fid.Root)[tc.bad]; ok {
				t.Fatalf("the entry %q is still there", tc.bad)
			}
			if rep := h.run(c, req()); func() bool { n, _ := totals(rep); return n != 0 }() {
				t.Fatalf("second run found something: %s", describe(rep))
			}
			ino, err := h.tg.Getattr(f, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(ino.Links) != 1 || string(ino.Links[0].Name) != "g19" {
				t.Fatalf("linkEA %v, want only g19", ino.Links)
			}
			if got, err := h.read(f); err != nil || string(got) != "data" {
				t.Fatalf("read back %q, %v", got, err)
			}
		})
	}
}

// TestEntriesThatMakeALoopAreRemoved: an entry naming the root, or .nacre
// anywhere but in the root, is removed, and its parent's nlink is what it
// was. Before, the checker never looked at entries naming the root or
// .nacre while phase 1 counted them as subdirectories: the entry stayed
// (/g17root/g17root listed /) and the parent's nlink was raised to match.
func TestEntriesThatMakeALoopAreRemoved(t *testing.T) {
	for _, tc := range []struct {
		name  string
		child fid.FID
		inDir bool // the entry is in /d, not in the root
	}{
		{"root in the root", fid.Root, false},
		{"root in a directory", fid.Root, true},
		{".nacre in a directory", fid.DotNacre, true},
		{".nacre in the root under another name", fid.DotNacre, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 2)
			tr := buildTree(h)
			c := New(h.env())
			req := func() *pb.LfsckStartRequest {
				return &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true, CreateOstobj: true, CreateMdtobj: true}
			}
			// An orphan adopted makes .nacre and its lost+found.
			h.inject("orphan", tr.f2, tr.d, "f2", 0)
			h.run(c, req())
			if _, ok := h.entryNames(fid.Root)[dotNacreName]; !ok {
				t.Fatal("no .nacre after an adoption")
			}
			parent := fid.Root
			if tc.inDir {
				parent = tr.d
			}
			before, err := h.tg.Getattr(parent, true)
			if err != nil {
				t.Fatal(err)
			}
			h.setRaw(&pb.LfsckKV{Key: mdt.DirentKey(h.localOf(parent), "g17loop"), Value: mdt.EncodeDirent(tc.child, dtDir)})
			rep := h.run(c, req())
			if got, want := nsCounts(rep), "dirent 1/1"; got != want {
				t.Fatalf("first run: %q, want %q: %s", got, want, describe(rep))
			}
			if _, ok := h.entryNames(parent)["g17loop"]; ok {
				t.Fatal("the entry is still there")
			}
			after, err := h.tg.Getattr(parent, true)
			if err != nil {
				t.Fatal(err)
			}
			if after.Nlink != before.Nlink {
				t.Fatalf("parent nlink %d, was %d", after.Nlink, before.Nlink)
			}
			if got := h.entryNames(fid.Root)[dotNacreName]; got != fid.DotNacre {
				t.Fatalf("/.nacre names %s", got)
			}
			if rep := h.run(c, req()); func() bool { n, _ := totals(rep); return n != 0 }() {
				t.Fatalf("second run found something: %s", describe(rep))
			}
		})
	}
}
