package lfsck

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
)

func rvName(i int) string { return fmt.Sprintf("name-%03d-padding", i) } // 40 bytes a name

func rvGet(t *testing.T, h *harness, f fid.FID) *pb.Inode {
	t.Helper()
	ino, err := h.tg.Getattr(f, true)
	if err != nil {
		t.Fatal(err)
	}
	return ino
}

// rvObjectsUpTo counts the object records whose local key is <= local.
func rvObjectsUpTo(t *testing.T, h *harness, local uint64) int {
	t.Helper()
	lo := mdt.ObjKey(0)[:1]
	it, err := h.db.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := 0
	upper := string(mdt.ObjKey(local))
	for it.First(); it.Valid(); it.Next() {
		if string(it.Key()) <= upper {
			n++
		}
	}
	return n
}

// rvSetup: dir d (made first), file F in d with 200 links in d; the
// first `unlinkRecorded` names (and the recorded ones among them) are
// unlinked afterwards. Returns F, d.
func rvSetup(t *testing.T, h *harness, unlink int, keepMany bool) (fid.FID, fid.FID) {
	d := h.mkdir(fid.Root, "d")
	f := h.create(d, "many", 1, []byte("data"))
	for i := range 200 {
		if r := h.do(&pb.LinkOp{Fid: f.PB(), Parent: d.PB(), Name: []byte(rvName(i))}); r.Errno != 0 {
			t.Fatalf("link %d: %s", i, r.Message)
		}
	}
	for i := range unlink {
		if r := h.do(&pb.UnlinkOp{Parent: d.PB(), Name: []byte(rvName(i))}); r.Errno != 0 {
			t.Fatalf("unlink %d: %s", i, r.Message)
		}
	}
	if !keepMany {
		if r := h.do(&pb.UnlinkOp{Parent: d.PB(), Name: []byte("many")}); r.Errno != 0 {
			t.Fatalf("unlink many: %s", r.Message)
		}
	}
	return f, d
}

// A phase-1 failure on the directory that holds the unrecorded names
// (its entries are passed over) must keep the overflow mark. With -t all
// the failure is charged to the OI scrub (the first component on), so
// everyNameSeen sees no namespace failure and clears the mark.
func TestOverflowMarkStaysWhenADirectoryWasNotRead(t *testing.T) {
	for _, types := range [][]string{{"namespace"}, {"all"}} {
		t.Run(types[0], func(t *testing.T) {
			h := newHarness(t, 2)
			f, d := rvSetup(t, h, 120, true) // recorded: "many" only; 80 unrecorded that fit
			ino := rvGet(t, h, f)
			t.Logf("before: nlink %d, %d recorded, mark %d", ino.Nlink, len(ino.Links), ino.LinksOverflowIndex)
			n := rvObjectsUpTo(t, h, h.localOf(d))
			fault.Arm("lfsck.scan.object", fault.Action{Kind: "error", Count: n})
			defer fault.Disarm("lfsck.scan.object")
			c := New(h.env())
			rep := h.run(c, &pb.LfsckStartRequest{Types: types, Reset_: true})
			fault.Disarm("lfsck.scan.object")
			got := rvGet(t, h, f)
			t.Logf("after: nlink %d, %d recorded, mark %d: %s", got.Nlink, len(got.Links), got.LinksOverflowIndex, describe(rep))
			if got.LinksOverflowIndex == 0 && uint32(len(got.Links)) < got.Nlink {
				t.Errorf("mark cleared while %d of %d names are unrecorded", int(got.Nlink)-len(got.Links), got.Nlink)
			}
		})
	}
}

// Same, with every recorded name unlinked: the linkEA is empty, the mark
// says names were left out, the directory holding them was not read.
// The object must not be taken for an orphan (Lustre: "empty linkEA and
// no overflow").
func TestOverflowedFileWithUnseenNamesIsNoOrphan(t *testing.T) {
	h := newHarness(t, 2)
	f, d := rvSetup(t, h, 120, false)
	ino := rvGet(t, h, f)
	t.Logf("before: nlink %d, %d recorded, mark %d", ino.Nlink, len(ino.Links), ino.LinksOverflowIndex)
	if len(ino.Links) != 0 {
		t.Fatalf("setup: %d recorded", len(ino.Links))
	}
	n := rvObjectsUpTo(t, h, h.localOf(d))
	fault.Arm("lfsck.scan.object", fault.Action{Kind: "error", Count: n})
	defer fault.Disarm("lfsck.scan.object")
	c := New(h.env())
	rep := h.run(c, &pb.LfsckStartRequest{Types: []string{"namespace"}, Reset_: true, Orphan: true})
	fault.Disarm("lfsck.scan.object")
	got := rvGet(t, h, f)
	t.Logf("after: nlink %d, %d recorded %v, mark %d: %s", got.Nlink, len(got.Links), got.Links, got.LinksOverflowIndex, describe(rep))
	if lpf := h.lpf(); len(lpf) != 0 {
		t.Errorf("a file with %d names was adopted into lost+found: %v (nlink now %d for %d names)", ino.Nlink, lpf, got.Nlink, ino.Nlink+1)
	}
	if _, _, err := h.tg.Fid2Path(f); err == nil || !strings.Contains(err.Error(), "not recorded") {
		t.Errorf("fid2path of a file whose names are not recorded: %v", err)
	}
	// The user removes every name: the file goes, and nothing dangles.
	// (Adopted, it kept nlink 80 for 81 names: removing the user's 80
	// destroyed it under its lost+found entry.)
	for i := 120; i < 200; i++ {
		if r := h.do(&pb.UnlinkOp{Parent: d.PB(), Name: []byte(rvName(i))}); r.Errno != 0 {
			t.Fatalf("unlink %d: %s", i, r.Message)
		}
	}
	if _, err := h.tg.Getattr(f, false); err == nil || len(h.lpf()) != 0 {
		t.Errorf("after removing every name: getattr %v, lost+found %v", err, h.lpf())
	}
}

// A link stamped (Command.NowNs: the leader's clock at Mutate's entry)
// before the run began but applied after phase 1 read its directory,
// while the linkEA is full: its name is left out with a mark older than
// the run. Unlinks then make room; phase 2 records the traced names and
// clears the mark, although the late name is still unrecorded.
func TestOverflowMarkOfALinkAppliedDuringTheRunStays(t *testing.T) {
	h := newHarness(t, 2)
	f, d := rvSetup(t, h, 0, true) // full linkEA, 100 unrecorded
	// Make room for exactly the traced names later: unlink recorded ones
	// only after phase 1.
	stamp := time.Now().Add(-5 * time.Millisecond).UnixNano() // a Mutate that entered before the run ...
	// ... is applied after phase 1 read d: when the run records its
	// trace, entering phase 2.
	var once sync.Once
	var lateErr error
	h.beforePropose = func(cmd *pb.Command) {
		if !writesTrace(cmd) {
			return
		}
		once.Do(func() {
			r, err := h.d.Do(&pb.Command{ClientId: 11, RequestId: 1, NowNs: stamp,
				Op: &pb.Command_Link{Link: &pb.LinkOp{Fid: f.PB(), Parent: d.PB(), Name: []byte("late-name-padding-xx")}}})
			if err == nil && r.Errno != 0 {
				err = fmt.Errorf("link: %s", r.Message)
			}
			if err != nil {
				lateErr = err
				return
			}
			// Room for the 100 traced names: unlink 100 recorded ones.
			for i := range 99 {
				r, err := h.d.Do(&pb.Command{ClientId: 11, RequestId: uint64(2 + i),
					Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: d.PB(), Name: []byte(rvName(i))}}})
				if err == nil && r.Errno != 0 {
					err = fmt.Errorf("unlink: %s", r.Message)
				}
				if err != nil {
					lateErr = err
					return
				}
			}
			lateErr = nil
		})
	}
	lateErr = errors.New("the run never recorded its trace")
	c := New(h.env())
	rep := h.run(c, &pb.LfsckStartRequest{Types: []string{"namespace"}, Reset_: true})
	if lateErr != nil {
		t.Fatal(lateErr)
	}
	got := rvGet(t, h, f)
	late := hasLink(got, nameKey{d, "late-name-padding-xx"})
	t.Logf("after: nlink %d, %d recorded, late recorded %v, mark %d: %s", got.Nlink, len(got.Links), late, got.LinksOverflowIndex, describe(rep))
	if got.LinksOverflowIndex == 0 && uint32(len(got.Links)) < got.Nlink {
		t.Errorf("mark cleared while %d names are unrecorded (late recorded: %v)", int(got.Nlink)-len(got.Links), late)
	}
}

// The directory holding the unrecorded names has a record that does not
// decode (garbage): the scan passes over its entries without counting a
// failure in any component, so even -t namespace clears the mark (and,
// with an empty linkEA, adopts the file).
func TestOverflowMarkStaysWhenADirectoryDoesNotDecode(t *testing.T) {
	for _, unlink := range []int{120} {
		for _, keepMany := range []bool{true, false} {
			t.Run(fmt.Sprint(keepMany), func(t *testing.T) {
				h := newHarness(t, 2)
				f, d := rvSetup(t, h, unlink, keepMany)
				ino := rvGet(t, h, f)
				h.setRaw(&pb.LfsckKV{Key: mdt.ObjKey(h.localOf(d)), Value: []byte{0xff, 0xff, 0xff}})
				c := New(h.env())
				rep := h.run(c, &pb.LfsckStartRequest{Types: []string{"namespace"}, Reset_: true, Orphan: true})
				got := rvGet(t, h, f)
				t.Logf("before nlink %d/%d recorded/mark %d; after: nlink %d, %d recorded, mark %d, lpf %v: %s", ino.Nlink, len(ino.Links), ino.LinksOverflowIndex,
					got.Nlink, len(got.Links), got.LinksOverflowIndex, h.lpf(), describe(rep))
				if got.LinksOverflowIndex == 0 && uint32(len(got.Links)) < got.Nlink {
					t.Errorf("mark cleared while names are unrecorded")
				}
			})
		}
	}
}

// -n writes nothing for an overflowed file whose names now fit (add the
// names, clear the mark), nor for one whose mark is missing.
func TestOverflowDryRunWritesNothing(t *testing.T) {
	h := newHarness(t, 2)
	f, _ := rvSetup(t, h, 120, true)
	g := h.create(fid.Root, "g", 1, nil)
	for i := range 150 {
		h.do(&pb.LinkOp{Fid: g.PB(), Parent: fid.Root.PB(), Name: []byte(rvName(i))})
	}
	h.setRaw(&pb.LfsckKV{Key: mdt.ObjKey(h.localOf(g)), Value: func() []byte {
		ino := rvGet(t, h, g)
		ino.LinksOverflowIndex = 0
		return mdt.MarshalInode(ino)
	}()})
	_ = f
	before := h.digests()
	c := New(h.env())
	rep := h.run(c, &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, DryRun: true, Orphan: true, CreateOstobj: true, CreateMdtobj: true})
	if after := h.digests(); after != before {
		t.Fatalf("dry run wrote: %s", describe(rep))
	}
	t.Logf("dry: %s", describe(rep))
	rep = h.run(c, &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true})
	t.Logf("real: %s", describe(rep))
	rep = h.run(c, &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true})
	if n, _ := totals(rep); n != 0 {
		t.Fatalf("third run: %s", describe(rep))
	}
	for _, x := range []fid.FID{f, g} {
		ino := rvGet(t, h, x)
		t.Logf("%s: nlink %d, %d recorded, mark %d", x, ino.Nlink, len(ino.Links), ino.LinksOverflowIndex)
	}
}

// Exchange and rename between two links of one overflowed file, and a
// rename of a left-out name onto a recorded name of another file.
func TestOverflowRenameCorners(t *testing.T) {
	h := newHarness(t, 2)
	f, d := rvSetup(t, h, 0, true)
	g := h.create(d, "other", 1, nil)
	ren := func(from, to string, flags uint32) int32 {
		return h.do(&pb.RenameOp{SrcParent: d.PB(), SrcName: []byte(from), DstParent: d.PB(), DstName: []byte(to), Flags: flags}).Errno
	}
	// recorded <-> unrecorded, both of f
	if e := ren(rvName(0), rvName(199), 2); e != 0 {
		t.Fatalf("exchange: %d", e)
	}
	if e := ren(rvName(1), rvName(198), 0); e != 0 {
		t.Fatalf("rename onto own link: %d", e)
	}
	// left-out name of f onto g's only name
	if e := ren(rvName(197), "other", 0); e != 0 {
		t.Fatalf("rename onto g: %d", e)
	}
	if _, err := h.tg.Getattr(g, false); err == nil {
		t.Fatalf("g survived")
	}
	ino := rvGet(t, h, f)
	t.Logf("f: nlink %d, %d recorded, mark %d", ino.Nlink, len(ino.Links), ino.LinksOverflowIndex)
	c := New(h.env())
	rep := h.run(c, &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true})
	if n, _ := totals(rep); n != 0 {
		t.Fatalf("run after renames: %s", describe(rep))
	}
}
