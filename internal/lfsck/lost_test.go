package lfsck

import (
	"bytes"
	"errors"
	"sync"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/layout"
)

// withLostSlot builds the test tree with slot_lost on f1's stripe 0 and
// returns the object that slot names now (missing).
func withLostSlot(t *testing.T) (*harness, *tree, *Checker, *pb.StripeObject) {
	h := newHarness(t, 2)
	tr := buildTree(h)
	h.inject("slot_lost", tr.f1, tr.d, "f1", 0)
	ino, err := h.tg.Getattr(tr.f1, false)
	if err != nil {
		t.Fatal(err)
	}
	return h, tr, New(h.env()), ino.Layout.Objects[0]
}

// A slot that names a missing object while the real one is still on the
// OST claiming it (slot_lost) goes back to the real object also when -c
// is given: the checker does not first fill the slot with a new, empty
// object (which would send the real one to lost+found; Lustre's test 18d).
func TestLostSlotGetsItsObjectBackAlsoWithCreate(t *testing.T) {
	h, tr, c, bogus := withLostSlot(t)
	req := &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true, CreateOstobj: true}
	rep := h.run(c, req)
	lay := rep.Components["layout"]
	if lay.Counters["orphan"].Repaired != 1 || lay.Counters["dangling"].Inconsistent != 0 {
		t.Fatalf("want 1 orphan repaired and no dangling slot: %s", describe(rep))
	}
	if f, r := totals(rep); f != 1 || r != 1 {
		t.Fatalf("other counters moved: %s", describe(rep))
	}
	if attrs, err := h.osts[bogus.Ost].GetObjects([]fid.ObjID{{Seq: bogus.Seq, Oid: bogus.Oid}}); err != nil || len(attrs) != 1 || attrs[0].Exists {
		t.Fatalf("the checker created the missing object %v: %v, %v", bogus, attrs, err)
	}
	got, err := h.read(tr.f1)
	if err != nil || !bytes.Equal(got, tr.data1) {
		t.Fatalf("f1 reads back %d bytes (%v), want its %d bytes", len(got), err, len(tr.data1))
	}
	if lpf := h.lpf(); len(lpf) != 0 {
		t.Fatalf("lost+found: %v", lpf)
	}
	if again := h.run(c, req); func() bool { f, _ := totals(again); return f != 0 }() {
		t.Fatalf("second run: %s", describe(again))
	}
}

// With -o, a dangling slot no orphan claims is settled after the orphan
// step as phase 1 settles it without -o: with -c, a new empty object.
func TestDanglingSlotWithOrphansIsCreatedAfterThem(t *testing.T) {
	h := newHarness(t, 2)
	tr := buildTree(h)
	c := New(h.env())
	h.inject("ost_object_missing", tr.f1, tr.d, "f1", 0)
	req := &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true}
	dry := proto2Dry(req)
	if rep := h.run(c, dry); rep.Components["layout"].Counters["dangling"].Inconsistent != 1 {
		t.Fatalf("dry run with -o: want 1 dangling: %s", describe(rep))
	}
	rep := h.run(c, req) // -o without -c: reported
	if got := rep.Components["layout"].Counters["dangling"]; got.Inconsistent != 1 || got.Repaired != 0 {
		t.Fatalf("-o: want 1 dangling found, none repaired: %s", describe(rep))
	}
	req.CreateOstobj = true
	rep = h.run(c, req)
	if got := rep.Components["layout"].Counters["dangling"]; got.Inconsistent != 1 || got.Repaired != 1 {
		t.Fatalf("-o -c: want 1 dangling repaired: %s", describe(rep))
	}
	if again := h.run(c, req); func() bool { f, _ := totals(again); return f != 0 }() {
		t.Fatalf("second run: %s", describe(again))
	}
	const ss = 64 << 10
	got, err := h.read(tr.f1)
	if want := layout.View(tr.data1, ss, 2, map[int]bool{1: true}, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("f1 reads back %d bytes (%v), want %d with stripe 0 zero", len(got), err, len(want))
	}
}

// A run that fails right after entering phase 2 (its checkpoint there is
// the last) keeps its dangling slots in the store: resumed by a new
// checker, it still puts the real object back.
func TestLostSlotSurvivesAFailureAtPhase2(t *testing.T) {
	h := newHarness(t, 2)
	tr := buildTree(h)
	c := New(h.env())
	h.inject("slot_lost", tr.f1, tr.d, "f1", 0)
	fault.Arm("lfsck.checkpoint.after", fault.Action{Kind: "error", Count: 1})
	defer fault.Disarm("lfsck.checkpoint.after")
	req := &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true, CreateOstobj: true}
	failed := h.run(c, req)
	if failed.Components["layout"].Status != "failed" || failed.Components["layout"].Counters["orphan"].Repaired != 0 {
		t.Fatalf("want a run failed at phase 2's checkpoint, before the orphan step: %s", describe(failed))
	}
	c = New(h.env()) // the slots must come from the store, not memory
	resumed := h.run(c, &pb.LfsckStartRequest{Orphan: true, CreateOstobj: true})
	lay := resumed.Components["layout"]
	if lay.Status != "completed" || lay.Counters["orphan"].Repaired != 1 || lay.Counters["dangling"].Inconsistent != 0 {
		t.Fatalf("resumed run: want 1 orphan repaired, no dangling: %s", describe(resumed))
	}
	got, err := h.read(tr.f1)
	if err != nil || !bytes.Equal(got, tr.data1) {
		t.Fatalf("f1 reads back %d bytes (%v), want its %d bytes", len(got), err, len(tr.data1))
	}
	if lpf := h.lpf(); len(lpf) != 0 {
		t.Fatalf("lost+found: %v", lpf)
	}
}

func proto2Dry(r *pb.LfsckStartRequest) *pb.LfsckStartRequest {
	d := proto.Clone(r).(*pb.LfsckStartRequest)
	d.DryRun = true
	return d
}

// A run with -c but without -o gives the dangling slot a new, empty
// object; a later run with -o finds the real object claiming the slot.
// The empty object, never written, is destroyed and the real one goes
// back (Lustre's conditional destroy, test 18d). Once the new object has
// been written, it stays, and the real one is adopted into lost+found.
func TestOrphanReplacesTheEmptyObjectCreateMadeForItsSlot(t *testing.T) {
	for _, written := range []bool{false, true} {
		h, tr, c, made := withLostSlot(t)
		rep := h.run(c, &pb.LfsckStartRequest{Types: []string{"layout"}, Reset_: true, CreateOstobj: true})
		if got := rep.Components["layout"].Counters["dangling"]; got.Repaired != 1 {
			t.Fatalf("-c: want the dangling slot given an object: %s", describe(rep))
		}
		want := tr.data1
		if written {
			// A client writes the file's first stripe: into the new object.
			ino, _ := h.tg.Getattr(tr.f1, false)
			want = append([]byte(nil), tr.data1...)
			copy(want, bytes.Repeat([]byte{0xee}, 1000))
			h.write(ino, want[:1000])
		}
		rep = h.run(c, &pb.LfsckStartRequest{Types: []string{"layout"}, Reset_: true, Orphan: true, CreateOstobj: true})
		if got := rep.Components["layout"].Counters["orphan"]; got.Repaired != 1 {
			t.Fatalf("written %v: -o: want 1 orphan repaired: %s", written, describe(rep))
		}
		attrs, err := h.osts[made.Ost].GetObjects([]fid.ObjID{{Seq: made.Seq, Oid: made.Oid}})
		if err != nil || len(attrs) != 1 {
			t.Fatal(attrs, err)
		}
		got, err := h.read(tr.f1)
		if err != nil {
			t.Fatal(err)
		}
		lpf := h.lpf()
		if !written {
			if attrs[0].Exists || !bytes.Equal(got, tr.data1) || len(lpf) != 0 {
				t.Fatalf("the empty object is still there (%v), or f1 reads back %d bytes, not its %d, or lost+found holds %v",
					attrs[0].Exists, len(got), len(tr.data1), lpf)
			}
			continue
		}
		if !attrs[0].Exists || !bytes.Equal(got[:1000], want[:1000]) {
			t.Fatalf("written: the object the client wrote was destroyed (%v), or f1 lost the write", !attrs[0].Exists)
		}
		name := tr.f1.String() + "-C-0"
		if _, ok := lpf[name]; !ok || len(lpf) != 1 {
			t.Fatalf("written: lost+found holds %v, want %s (the real object)", lpf, name)
		}
	}
}

// The file changes between the adoption's snapshot and its apply, after
// the conditional destroy has already taken the empty object -c made for
// the slot: the layout repair is refused as stale, and the adoption must
// be tried again on the file as it is now. Before, the slot named a
// destroyed object until another run with -o.
func TestOrphanTakesTheSlotBackWhenTheFileChangesDuringAdoption(t *testing.T) {
	h, tr, c, made := withLostSlot(t)
	rep := h.run(c, &pb.LfsckStartRequest{Types: []string{"layout"}, Reset_: true, CreateOstobj: true})
	if got := rep.Components["layout"].Counters["dangling"]; got.Repaired != 1 {
		t.Fatalf("-c: want the dangling slot given an object: %s", describe(rep))
	}
	// A client changes the file's mode between the adoption's snapshot
	// and its apply.
	var once sync.Once
	changed := errors.New("the adoption was never applied")
	h.beforePropose = func(cmd *pb.Command) {
		if !adopts(cmd) {
			return
		}
		once.Do(func() {
			r, err := h.d.Do(&pb.Command{ClientId: 10, RequestId: 1, Op: &pb.Command_Setattr{Setattr: &pb.SetattrOp{
				Fid: tr.f1.PB(), Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o600}}})
			if err == nil && r.Errno != 0 {
				err = syscall.Errno(r.Errno)
			}
			changed = err
		})
	}
	req := &pb.LfsckStartRequest{Types: []string{"layout"}, Reset_: true, Orphan: true, CreateOstobj: true}
	rep = h.run(c, req)
	if changed != nil {
		t.Fatal(changed)
	}
	lay := rep.Components["layout"]
	if lay.Counters["orphan"].Repaired != 1 || lay.Counters["dangling"].Inconsistent != 0 {
		t.Fatalf("want the orphan put back in its slot once, no dangling slot: %s", describe(rep))
	}
	if attrs, err := h.osts[made.Ost].GetObjects([]fid.ObjID{{Seq: made.Seq, Oid: made.Oid}}); err != nil || len(attrs) != 1 || attrs[0].Exists {
		t.Fatalf("the empty object is still there: %v, %v", attrs, err)
	}
	ino, err := h.tg.Getattr(tr.f1, false)
	if err != nil {
		t.Fatal(err)
	}
	if ino.Mode&0o7777 != 0o600 {
		t.Fatalf("the client's change was lost: mode %o", ino.Mode)
	}
	if got, err := h.read(tr.f1); err != nil || !bytes.Equal(got, tr.data1) {
		t.Fatalf("f1 reads back %d bytes (%v), want its %d bytes", len(got), err, len(tr.data1))
	}
	if lpf := h.lpf(); len(lpf) != 0 {
		t.Fatalf("lost+found: %v", lpf)
	}
	if again := h.run(c, req); func() bool { f, _ := totals(again); return f != 0 }() {
		t.Fatalf("second run: %s", describe(again))
	}
}

// A file whose stripe 0 is missing and whose stripe 1 was lost from the
// layout only keeps its size when both are repaired in one run (-o -c):
// stripe 0 reads as zeros, stripe 1 has its data back, and the tail
// (stripe 0's last chunk) is still there. Before, the adoption marked the
// size dirty, so it was taken from the objects, and the empty object made
// for stripe 0 cut the file at the end of stripe 1's data.
func TestLostSlotAndMissingStripeKeepTheSize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		size  int
		dirty bool // a client was writing: the size comes from the objects
	}{
		{"tail on the missing stripe", 300000, false},
		{"tail on the lost slot", 200000, false},
		{"size dirty", 300000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, 2)
			data := pattern(tc.size, 7)
			f := h.create(fid.Root, "a", 2, data)
			if tc.dirty {
				h.do(&pb.SetattrOp{Fid: f.PB(), Valid: uint32(pb.SetattrValid_SETATTR_SET_DIRTY)})
			}
			h.inject("ost_object_missing", f, fid.Root, "a", 0)
			h.inject("slot_lost", f, fid.Root, "a", 1)
			c := New(h.env())
			req := &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true, CreateOstobj: true}
			rep := h.run(c, req)
			lay := rep.Components["layout"]
			if lay.Counters["dangling"].Repaired != 1 || lay.Counters["orphan"].Repaired != 1 {
				t.Fatalf("want dangling 1/1 and orphan 1/1: %s", describe(rep))
			}
			ino, err := h.tg.Getattr(f, false)
			if err != nil {
				t.Fatal(err)
			}
			const ss = 64 << 10
			want := layout.View(data, ss, 2, map[int]bool{1: true}, 0)
			dirty := ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0
			if dirty != tc.dirty {
				t.Fatalf("size dirty %v, want %v", dirty, tc.dirty)
			}
			got, err := h.read(f) // as long as the objects say
			if err != nil {
				t.Fatal(err)
			}
			if !dirty {
				if ino.Size != uint64(tc.size) {
					t.Fatalf("size %d, want %d", ino.Size, tc.size)
				}
				// A client reads up to the MDT's size: zeros past the objects.
				got = append(got, make([]byte, int(ino.Size)-len(got))...)
			} else {
				want = want[:layout.EndOfStripe(tc.size, ss, 2, 1)]
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("reads back %d bytes, want %d with stripe 0 zero", len(got), len(want))
			}
			if again := h.run(c, req); func() bool { f, _ := totals(again); return f != 0 }() {
				t.Fatalf("second run: %s", describe(again))
			}
		})
	}
}

// A file whose layout is lost and whose stripe 0 has the wrong owner gets
// both repaired in one run: the objects go back into a rebuilt layout
// (orphan) and take the file's owner (inconsistent_owner), so the next
// run finds nothing. Before, the owner was found only by the next run,
// since phase 1 saw no layout naming the object. A dry run reports both.
func TestAdoptedObjectsTakeTheFilesOwner(t *testing.T) {
	h := newHarness(t, 2)
	tr := buildTree(h)
	h.inject("owner", tr.f1, tr.d, "f1", 0)
	h.inject("lost_layout", tr.f1, tr.d, "f1", 0)
	c := New(h.env())
	req := &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true, Orphan: true, CreateOstobj: true, CreateMdtobj: true}
	counts := func(rep *Report) (orphan, owner Count) {
		lay := rep.Components["layout"]
		return lay.Counters["orphan"], lay.Counters["inconsistent_owner"]
	}
	before := h.digests()
	dry := proto2Dry(req)
	if orphan, owner := counts(h.run(c, dry)); orphan.Inconsistent != 2 || owner.Inconsistent != 1 {
		t.Fatalf("dry run: orphan %+v, inconsistent_owner %+v; want 2 and 1 found", orphan, owner)
	}
	if after := h.digests(); after != before {
		t.Fatalf("the dry run changed the stores:\n%s\n%s", before, after)
	}
	rep := h.run(c, req)
	if orphan, owner := counts(rep); orphan.Repaired != 2 || owner.Inconsistent != 1 || owner.Repaired != 1 {
		t.Fatalf("want orphan 2/2 and inconsistent_owner 1/1: %s", describe(rep))
	}
	ino, err := h.tg.Getattr(tr.f1, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range ino.Layout.Objects {
		a, err := h.osts[s.Ost].GetObjects([]fid.ObjID{{Seq: s.Seq, Oid: s.Oid}})
		if err != nil || len(a) != 1 {
			t.Fatalf("stripe %d: %v", i, err)
		}
		if a[0].Uid != ino.Uid || a[0].Gid != ino.Gid || a[0].Projid != ino.Projid {
			t.Fatalf("stripe %d owner %d:%d/%d, file's %d:%d/%d", i, a[0].Uid, a[0].Gid, a[0].Projid, ino.Uid, ino.Gid, ino.Projid)
		}
	}
	if got, err := h.read(tr.f1); err != nil || !bytes.Equal(got, tr.data1) {
		t.Fatalf("f1 reads back %d bytes (%v), want its %d bytes", len(got), err, len(tr.data1))
	}
	if again := h.run(c, req); func() bool { f, _ := totals(again); return f != 0 }() {
		t.Fatalf("second run: %s", describe(again))
	}
}
