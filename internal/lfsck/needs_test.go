package lfsck

import (
	"fmt"
	"hash/crc64"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/mdt"
)

// userDigests summarises what a run may change only by repairing: every
// key of the MDT store but the checker's own (state, counters, reports,
// trace: prefix K) and the applied log index (every command moves it),
// and every key of every OST store.
func (h *harness) userDigests() string {
	h.t.Helper()
	it, err := h.db.NewIter(nil, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	defer it.Close()
	tab := crc64.MakeTable(crc64.ECMA)
	var crc uint64
	n := 0
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if (len(k) > 0 && k[0] == mdt.PfxChecker) || string(k) == "\x01applied" {
			continue
		}
		crc = crc64.Update(crc, tab, []byte(fmt.Sprintf("%d:%x=%d:", len(k), k, len(it.Value()))))
		crc = crc64.Update(crc, tab, it.Value())
		n++
	}
	if err := it.Error(); err != nil {
		h.t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mdt %x/%d", crc, n)
	for _, i := range h.ostN {
		d, n, err := h.osts[i].StoreDigest()
		if err != nil {
			h.t.Fatal(err)
		}
		fmt.Fprintf(&b, " ost%d %x/%d", i, d, n)
	}
	return b.String()
}

// flagReq is a real run (from the beginning) with the repair options in
// flags ("-o -c -C").
func flagReq(flags string) *pb.LfsckStartRequest {
	return &pb.LfsckStartRequest{Types: []string{"all"}, Reset_: true,
		Orphan: strings.Contains(flags, "-o"), CreateOstobj: strings.Contains(flags, "-c"), CreateMdtobj: strings.Contains(flags, "-C")}
}

// otherFlags are the repair options a kind does not need.
func otherFlags(k fault.Damage) string {
	var out []string
	for _, f := range []string{"-o", "-c", "-C"} {
		if !strings.Contains(k.Needs, f) {
			out = append(out, f)
		}
	}
	return strings.Join(out, " ")
}

// TestRepairsThatNeedAFlagHappenOnlyWhenAsked: for every kind whose repair
// needs -c, -C or -o, a real run without that option (with none, and with
// every other one) reports the finding and changes nothing outside the
// checker's own state; with the option, the same damage is repaired.
// OST objects no layout names are looked for only with -o (docs/lfsck.md,
// the layout check's phase 2): without it those kinds are not found at
// all, and nothing changes either.
func TestRepairsThatNeedAFlagHappenOnlyWhenAsked(t *testing.T) {
	t.Parallel() // arms no fault point (tiers_test.go)
	n := 0
	for _, k := range fault.Kinds {
		if k.Needs == "" {
			continue
		}
		n++
		t.Run(string(k.Kind), func(t *testing.T) {
			h := newHarness(t, 2)
			tr := buildTree(h)
			c := New(h.env())
			if f, _ := totals(h.run(c, flagReq(""))); f != 0 {
				t.Fatal("the clean tree is inconsistent")
			}
			target := injectInto(h, tr, k)
			want := uint64(1)
			if k.Count == "stripes" {
				want = 2
			}
			wantFound, counter := want, k.Counter
			if k.Component == "layout" && k.Counter == "orphan" {
				wantFound = 0
			}
			runs := []string{"", otherFlags(k)}
			if k.Kind == "slot_lost" {
				// Without -o the slot is only dangling, and -c would give
				// it a new object (which a later run with -o destroys
				// again: TestOrphanReplacesTheEmptyObjectCreateMadeForItsSlot).
				wantFound, counter, runs = want, "dangling", []string{"", "-C"}
			}
			for _, flags := range runs {
				before := h.userDigests()
				rep := h.run(c, flagReq(flags))
				got := rep.Components[k.Component].Counters[counter]
				if got.Inconsistent != wantFound || got.Repaired != 0 {
					t.Fatalf("real run with %q (not %s): want %s.%s %d found, 0 repaired; got %s",
						flags, k.Needs, k.Component, counter, wantFound, describe(rep))
				}
				if f, r := totals(rep); f != wantFound || r != 0 {
					t.Fatalf("real run with %q: other counters moved: %s", flags, describe(rep))
				}
				for name, cr := range rep.Components {
					if cr.Status != "completed" {
						t.Fatalf("real run with %q: %s ended %s", flags, name, cr.Status)
					}
				}
				if after := h.userDigests(); after != before {
					t.Fatalf("real run with %q (not %s) changed the stores:\n%s\n%s", flags, k.Needs, before, after)
				}
				if lpf := h.lpf(); len(lpf) != 0 {
					t.Fatalf("real run with %q adopted into lost+found: %v", flags, lpf)
				}
			}
			rep := h.run(c, flagReq(k.Needs))
			if got := rep.Components[k.Component].Counters[k.Counter]; got.Inconsistent != want || got.Repaired != want {
				t.Fatalf("real run with %s: want %d %s.%s repaired, got %s", k.Needs, want, k.Component, k.Counter, describe(rep))
			}
			if f, _ := totals(h.run(c, flagReq(""))); f != 0 {
				t.Fatal("still inconsistent after the repair")
			}
			checkData(t, h, tr, k, target)
		})
	}
	if n < 10 {
		t.Fatalf("only %d kinds need an option", n)
	}
}
