package lfsck

import (
	"bytes"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
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

func startReq(k fault.Kind, dry bool) *pb.LfsckStartRequest {
	return &pb.LfsckStartRequest{Types: []string{"all"}, DryRun: dry, Reset_: true,
		Orphan: strings.Contains(k.Needs, "-o"), CreateMdtobj: strings.Contains(k.Needs, "-C"), CreateOstobj: strings.Contains(k.Needs, "-c")}
}

// TestEveryFaultKind: for every kind of damage, a dry run reports exactly
// it and changes no byte of any store, a real run repairs it, a second
// run finds nothing, and the data reads back.
func TestEveryFaultKind(t *testing.T) {
	for _, k := range fault.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
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

func checkData(t *testing.T, h *harness, tr *tree, k fault.Kind, target fid.FID) {
	t.Helper()
	same := func(f fid.FID, want []byte, what string) {
		got, err := h.read(f)
		if err != nil {
			t.Fatalf("read %s: %v", what, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s reads back %d bytes, want %d (differ: %v)", what, len(got), len(want), len(got) == len(want))
		}
	}
	// The untouched file is always intact.
	if f, err := h.lookup(tr.d, "f2"); err != nil || f != tr.f2 {
		t.Fatalf("f2: %v %v", f, err)
	}
	same(tr.f2, tr.data2, "f2")
	lpf := h.lpf()
	switch k.Data {
	case "intact":
		if k.Target == "file" && k.Kind != "nlink_less" {
			f, err := h.lookup(tr.d, "f1")
			if err != nil || f != tr.f1 {
				t.Fatalf("f1 resolves to %v, %v", f, err)
			}
			same(tr.f1, tr.data1, "f1")
		}
	case "lost+found":
		var found bool
		for name, f := range lpf {
			switch {
			case k.Kind == "lost_parent" && strings.HasSuffix(name, "-P-0"):
				c, err := h.lookup(f, "only")
				if err != nil || c != tr.only {
					t.Fatalf("lost+found/%s/only: %v %v", name, c, err)
				}
				same(c, tr.dataOnly, "lost+found/"+name+"/only")
				found = true
			case f == target:
				if !strings.HasPrefix(name, target.String()+"-") {
					t.Fatalf("lost+found name %q does not start with the FID", name)
				}
				if k.Target == "file" {
					same(f, tr.data1, "lost+found/"+name)
				}
				found = true
			case k.Kind == "orphan_nopfid" && strings.Contains(name, "-N-"):
				found = true
			}
		}
		if !found {
			t.Fatalf("nothing in lost+found for %s: %v", k.Kind, lpf)
		}
	case "empty":
		name := "f1"
		if k.Target == "dir" {
			name = "s"
		}
		if f, err := h.lookup(tr.d, name); err != nil || f != target {
			t.Fatalf("%s resolves to %v, %v", name, f, err)
		}
	}
}

// injectInto damages tr as kind k says and returns the object damaged.
func injectInto(h *harness, tr *tree, k fault.Kind) fid.FID {
	target, parent, name := tr.f1, tr.d, "f1"
	switch {
	case k.Kind == "nlink_less":
		target, name = tr.h1, "h1"
	case k.Kind == "lost_parent":
		target, parent, name = tr.only, tr.e, "only"
	case k.Target == "dir":
		target, name = tr.s, "s"
	}
	h.inject(k.Kind, target, parent, name, 0)
	return target
}
