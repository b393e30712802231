package lfsck

import (
	"bytes"
	"fmt"
	"strings"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/layout"
)

// tree is the small tree every kind test damages.
type tree struct {
	d, f1, f2, h1, s, e, only fid.FID
	data1, data2, dataOnly    []byte
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func buildTree(h *harness) *tree { return buildTreeAt(h, fid.Root, "d") }

func buildTreeAt(h *harness, parent fid.FID, name string) *tree {
	t := &tree{data1: pattern(200<<10+17, 1), data2: pattern(150<<10, 2), dataOnly: pattern(70<<10, 3)}
	t.d = h.mkdir(parent, name)
	t.f1 = h.create(t.d, "f1", 2, t.data1)
	t.f2 = h.create(t.d, "f2", 2, t.data2)
	t.h1 = h.create(t.d, "h1", 1, []byte("hard"))
	if r := h.do(&pb.LinkOp{Fid: t.h1.PB(), Parent: t.d.PB(), Name: []byte("h2")}); r.Errno != 0 {
		h.t.Fatal(r.Message)
	}
	t.s = h.mkdir(t.d, "s")
	t.e = h.mkdir(t.d, "e")
	t.only = h.create(t.e, "only", 1, t.dataOnly)
	return t
}

func startReq(k fault.Damage, dry bool) *pb.LfsckStartRequest {
	return &pb.LfsckStartRequest{Types: []string{"all"}, DryRun: dry, Reset_: true,
		Orphan: strings.Contains(k.Needs, "-o"), CreateMdtobj: strings.Contains(k.Needs, "-C"), CreateOstobj: strings.Contains(k.Needs, "-c")}
}

// TestEveryFaultKind: for every kind of damage, a dry run reports exactly
// it and changes no byte of any store, a real run repairs it, a second
// run finds nothing, and the data reads back.
func TestEveryFaultKind(t *testing.T) {
	t.Parallel() // arms no fault point (tiers_test.go)
	for _, k := range fault.Kinds {
		if fault.MDTsNeeded(k.Kind) > 1 {
			continue // test/itest/dne_test.go
		}
		t.Run(string(k.Kind), func(t *testing.T) {
			h := newHarness(t, 2)
			tr := buildTree(h)
			c := New(h.env())
			if rep := h.run(c, startReq(k, false)); func() bool { f, _ := totals(rep); return f != 0 }() {
				t.Fatalf("clean tree: %s", describe(rep))
			}
			target := injectInto(h, tr, k)
			want := uint64(1)
			if k.Count == "stripes" {
				want = 2
			}

			before := h.digests()
			dry := h.run(c, startReq(k, true))
			if after := h.digests(); after != before {
				t.Fatalf("the dry run changed the stores:\n%s\n%s", before, after)
			}
			cr := dry.Components[k.Component]
			if f, _ := totals(dry); f != want || cr.Counters[k.Counter].Inconsistent != want {
				t.Fatalf("dry run: want %d %s.%s, got %s", want, k.Component, k.Counter, describe(dry))
			}
			if f, r := totals(dry); r != 0 || f != want {
				t.Fatalf("dry run repaired: %s", describe(dry))
			}

			real := h.run(c, startReq(k, false))
			cr = real.Components[k.Component]
			if got := cr.Counters[k.Counter]; got.Inconsistent != want || got.Repaired != want {
				t.Fatalf("real run: want %d %s.%s repaired, got %s", want, k.Component, k.Counter, describe(real))
			}
			if f, r := totals(real); f != want || r != want {
				t.Fatalf("real run: other counters moved: %s", describe(real))
			}
			again := h.run(c, startReq(k, false))
			if f, _ := totals(again); f != 0 {
				t.Fatalf("second run still finds: %s", describe(again))
			}
			checkData(t, h, tr, k, target)
		})
	}
}

// checkData checks what the tree reads back after kind k was repaired:
// every kind, the untouched files intact and exactly the lost+found
// entries it must produce (docs/lfsck.md, lost+found); then by the
// kind's Data: "intact" files read back their data; "stripe-lost" (stripe
// 0 of f1) reads as zeros of the stripe's length, the rest intact (and
// the adopted old object of slot_conflict reads back its data);
// "lost+found" objects read back their data from lost+found; "empty"
// objects were re-created empty by the checker.
func checkData(t *testing.T, h *harness, tr *tree, k fault.Damage, target fid.FID) {
	t.Helper()
	same := func(f fid.FID, want []byte, what string) {
		t.Helper()
		got, err := h.read(f)
		if err != nil {
			t.Fatalf("read %s: %v", what, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s reads back %d bytes, want %d (%s)", what, len(got), len(want), firstDiff(got, want))
		}
	}
	resolves := func(parent fid.FID, name string, want fid.FID) {
		t.Helper()
		if f, err := h.lookup(parent, name); err != nil || f != want {
			t.Fatalf("%s resolves to %v, %v; want %v", name, f, err, want)
		}
	}
	gone := func(parent fid.FID, name string) {
		t.Helper()
		if f, err := h.lookup(parent, name); err == nil {
			t.Fatalf("%s is back in its directory (%v)", name, f)
		}
	}
	const ss = 64 << 10
	// The untouched files are always intact.
	resolves(tr.d, "f2", tr.f2)
	same(tr.f2, tr.data2, "f2")
	if k.Kind != "lost_parent" {
		resolves(tr.d, "e", tr.e)
		resolves(tr.e, "only", tr.only)
		same(tr.only, tr.dataOnly, "e/only")
	}

	// lost+found holds exactly what the kind must produce, named
	// <FID>-<type>-<n> (n: 0, the first free number).
	lpf := h.lpf()
	wantLPF := map[string]fid.FID{}
	switch k.Kind {
	case "orphan", "lost_mdt_object":
		typ := map[string]string{"orphan": "O", "lost_mdt_object": "R"}[string(k.Kind)]
		wantLPF[tr.f1.String()+"-"+typ+"-0"] = tr.f1
	case "orphan_dir":
		// The injection drops the linkEA: the old parent is not known.
		wantLPF[tr.s.String()+"-D-0"] = tr.s
	case "lost_parent":
		wantLPF[tr.e.String()+"-P-0"] = tr.e
	case "slot_conflict":
		name := tr.f1.String() + "-C-0"
		f, ok := lpf[name]
		if !ok || f == tr.f1 || f.IsZero() {
			t.Fatalf("lost+found: want %s holding a new file, got %v", name, lpf)
		}
		wantLPF[name] = f
	case "orphan_nopfid":
		// One new file per OST object, named by its own new FID.
		for name, f := range lpf {
			if name == f.String()+"-N-0" && f != tr.f1 {
				wantLPF[name] = f
			}
		}
		if len(wantLPF) != 2 {
			t.Fatalf("lost+found: want two <newFID>-N-0 files, got %v", lpf)
		}
	default:
		if k.Data == "lost+found" {
			t.Fatalf("checkData does not know what %s puts in lost+found", k.Kind)
		}
	}
	if fmt.Sprint(lpf) != fmt.Sprint(wantLPF) {
		t.Fatalf("lost+found after %s: %v, want %v", k.Kind, lpf, wantLPF)
	}

	switch k.Data {
	case "intact":
		switch {
		case k.Kind == "nlink_less":
			resolves(tr.d, "h1", tr.h1)
			resolves(tr.d, "h2", tr.h1)
			same(tr.h1, []byte("hard"), "h1")
			if ino, err := h.tg.Getattr(tr.h1, false); err != nil || ino.Nlink != 2 {
				t.Fatalf("h1: nlink %v, %v; want 2", ino.GetNlink(), err)
			}
		case k.Target == "file":
			resolves(tr.d, "f1", tr.f1)
			same(tr.f1, tr.data1, "f1")
			if k.Kind == "dirent_alien" {
				gone(tr.d, "f1.alien")
			}
		case k.Target == "dir":
			resolves(tr.d, "s", tr.s)
			if k.Kind == "dir_second_name" {
				gone(tr.d, "s.second")
			}
			if ino, err := h.tg.Getattr(tr.s, false); err != nil || ino.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				t.Fatalf("s: %v, %v", ino, err)
			}
		}
	case "stripe-lost":
		// Stripe 0 of f1 lost its data: it reads as zeros, the file keeps
		// its length, stripe 1 is intact.
		resolves(tr.d, "f1", tr.f1)
		same(tr.f1, layout.View(tr.data1, ss, 2, map[int]bool{1: true}, 0), "f1 (stripe 0 lost)")
		switch k.Kind {
		case "multiple_reference":
			// f2 kept the shared object; f1 got one of its own.
			f1, _ := h.tg.Getattr(tr.f1, false)
			f2, _ := h.tg.Getattr(tr.f2, false)
			for _, a := range f1.GetLayout().GetObjects() {
				for _, b := range f2.GetLayout().GetObjects() {
					if a.Ost == b.Ost && a.Seq == b.Seq && a.Oid == b.Oid {
						t.Fatalf("f1 and f2 still share object %v", a)
					}
				}
			}
		case "slot_conflict":
			// The object that lost the slot is adopted in a new file of
			// f1's layout holding it at its slot: f1's stripe-0 data.
			name := tr.f1.String() + "-C-0"
			same(lpf[name], layout.View(tr.data1, ss, 2, map[int]bool{0: true}, layout.EndOfStripe(len(tr.data1), ss, 2, 0)), "lost+found/"+name)
		}
	case "lost+found":
		switch k.Kind {
		case "orphan", "lost_mdt_object":
			gone(tr.d, "f1")
			for name, f := range wantLPF {
				same(f, tr.data1, "lost+found/"+name)
			}
		case "orphan_dir":
			gone(tr.d, "s")
			if ino, err := h.tg.Getattr(tr.s, false); err != nil || ino.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				t.Fatalf("lost+found directory: %v, %v", ino, err)
			}
		case "lost_parent":
			gone(tr.d, "e")
			resolves(tr.e, "only", tr.only)
			same(tr.only, tr.dataOnly, "lost+found/"+tr.e.String()+"-P-0/only")
		case "orphan_nopfid":
			// Each new file holds one of f1's objects as its only stripe.
			gone(tr.d, "f1")
			want := map[string]bool{}
			for s := 0; s < 2; s++ {
				want[string(layout.ObjectData(tr.data1, ss, 2, s))] = true
			}
			for name, f := range wantLPF {
				got, err := h.read(f)
				if err != nil || !want[string(got)] {
					t.Fatalf("lost+found/%s reads back %d bytes (%v), not the data of one of f1's objects", name, len(got), err)
				}
				delete(want, string(got))
			}
		}
	case "empty":
		// The checker re-created the object (-C): empty, root's, 0600 or
		// 0700, marked as created by the checker.
		name, typ, perm := "f1", uint32(syscall.S_IFREG), uint32(0o600)
		if k.Target == "dir" {
			name, typ, perm = "s", syscall.S_IFDIR, 0o700
		}
		resolves(tr.d, name, target)
		ino, err := h.tg.Getattr(target, false)
		if err != nil {
			t.Fatal(err)
		}
		if ino.Mode&syscall.S_IFMT != typ || ino.Mode&0o7777 != perm || ino.Uid != 0 || (typ == syscall.S_IFREG && ino.Size != 0) ||
			ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_LFSCK_CREATED) == 0 {
			t.Fatalf("re-created %s: mode %o uid %d size %d flags %x", name, ino.Mode, ino.Uid, ino.Size, ino.Flags)
		}
		if typ == syscall.S_IFDIR {
			if ents, _, err := h.tg.Readdir(target, 0, 100, false, nil); err != nil || len(ents) != 0 {
				t.Fatalf("re-created directory holds %d entries, %v", len(ents), err)
			}
		} else {
			same(target, nil, "re-created "+name)
		}
	default:
		t.Fatalf("checkData does not know data %q of %s", k.Data, k.Kind)
	}
}

// firstDiff says where two byte slices first differ.
func firstDiff(got, want []byte) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("first difference at %d: %#x, want %#x", i, got[i], want[i])
		}
	}
	if len(got) != len(want) {
		return "one is a prefix of the other"
	}
	return "equal"
}

// injectInto damages tr as kind k says and returns the object damaged.
func injectInto(h *harness, tr *tree, k fault.Damage) fid.FID {
	target, parent, name := tr.f1, tr.d, "f1"
	switch {
	case k.Kind == "nlink_less":
		target, name = tr.h1, "h1"
	case k.Kind == "lost_parent":
		target, parent, name = tr.only, tr.e, "only"
	case k.Target == "dir":
		target, name = tr.s, "s"
	}
	h.inject(string(k.Kind), target, parent, name, 0)
	return target
}
