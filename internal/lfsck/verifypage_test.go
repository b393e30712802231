package lfsck

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// verifyFixture is a table page with expectations at ids 0..n-1 of page 1
// (id i named by file i of fixtureFiles) and a summary that matches them
// all: ids below 3*sumBlock/2 written (digest summed), the rest never
// written.
func verifyFixture(n int) (*expPage, *pb.LfsckSummaryReply) {
	p := new(expPage)
	sum := &pb.LfsckSummaryReply{Exists: make([]byte, sumSpan/8), Uninitialized: make([]byte, sumSpan/8), Sums: make([]uint64, sumSpan/sumBlock)}
	for i := range uint64(n) {
		p.set(i, 0x9e3779b97f4a7c15*(i+1), uint32(i))
		sum.Exists[i/8] |= 1 << (i % 8)
		if i < 3*sumBlock/2 {
			sum.Sums[i/sumBlock] += p.dig[i]
		} else {
			sum.Uninitialized[i/8] |= 1 << (i % 8)
		}
	}
	return p, sum
}

// verifyPage must name exactly the stripes the summaries cannot settle.
func TestVerifyPageNamesWhatTheSummaryCannotSettle(t *testing.T) {
	const n = 3 * sumBlock
	const base = sumSpan // page 1
	all := func() (ids []uint64) {
		for i := range uint64(n) {
			ids = append(ids, base+i)
		}
		return ids
	}
	cases := []struct {
		name   string
		change func(p *expPage, sum *pb.LfsckSummaryReply) (*pb.LfsckSummaryReply, bool, map[uint64]bool)
		want   []uint64 // ids of the suspects
		uninit uint64
	}{
		{"all settled", func(p *expPage, sum *pb.LfsckSummaryReply) (*pb.LfsckSummaryReply, bool, map[uint64]bool) {
			return sum, false, nil
		}, nil, n - 3*sumBlock/2},
		{"an object missing", func(p *expPage, sum *pb.LfsckSummaryReply) (*pb.LfsckSummaryReply, bool, map[uint64]bool) {
			sum.Exists[5/8] &^= 1 << (5 % 8)
			sum.Sums[0] -= p.dig[5]
			return sum, false, nil
		}, []uint64{base + 5}, n - 3*sumBlock/2},
		{"a missing object the summary also calls never written", func(p *expPage, sum *pb.LfsckSummaryReply) (*pb.LfsckSummaryReply, bool, map[uint64]bool) {
			sum.Exists[2000/8] &^= 1 << (2000 % 8) // missing counts first
			return sum, false, nil
		}, []uint64{base + 2000}, n - 3*sumBlock/2 - 1},
		{"a record that differs", func(p *expPage, sum *pb.LfsckSummaryReply) (*pb.LfsckSummaryReply, bool, map[uint64]bool) {
			sum.Sums[1]++ // block 1: its written ids are checked, not its unwritten ones
			return sum, false, nil
		}, func() (ids []uint64) {
			for i := uint64(sumBlock); i < 3*sumBlock/2; i++ {
				ids = append(ids, base+i)
			}
			return ids
		}(), n - 3*sumBlock/2},
		{"an unexpected object in a block", func(p *expPage, sum *pb.LfsckSummaryReply) (*pb.LfsckSummaryReply, bool, map[uint64]bool) {
			p.has[0] &^= 1 << 2 // the OST has it, the table does not
			return sum, false, nil
		}, func() (ids []uint64) {
			for i := uint64(0); i < sumBlock; i++ {
				if i != 2 {
					ids = append(ids, base+i)
				}
			}
			return ids
		}(), n - 3*sumBlock/2},
		{"an id named twice", func(p *expPage, sum *pb.LfsckSummaryReply) (*pb.LfsckSummaryReply, bool, map[uint64]bool) {
			sum.Sums[0] -= p.dig[7]
			return sum, false, map[uint64]bool{base + 7: true}
		}, []uint64{base + 7}, n - 3*sumBlock/2},
		{"no summary of the page", func(p *expPage, sum *pb.LfsckSummaryReply) (*pb.LfsckSummaryReply, bool, map[uint64]bool) {
			return nil, false, nil
		}, all(), 0},
		{"the OST gave no summaries", func(p *expPage, sum *pb.LfsckSummaryReply) (*pb.LfsckSummaryReply, bool, map[uint64]bool) {
			return nil, true, nil
		}, all(), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, sum := verifyFixture(n)
			sum, whole, dups := c.change(p, sum)
			e := &expectations{ly: &layoutCheck{r: &run{seq: fid.OSTSeq(3)}}, files: fixtureFiles(n)}
			suspects, uninit := e.verifyPage(3, 1, p, sum, whole, dups, nil)
			var got []uint64
			for _, it := range suspects {
				if it.ost != 3 || it.seq != fid.OSTSeq(3) || it.ent.local != 1000+it.oid-base || it.slot != slotUnknown {
					t.Fatalf("suspect %+v: wrong OST, sequence, file or slot", it)
				}
				got = append(got, it.oid)
			}
			slices.Sort(got)
			if !slices.Equal(got, c.want) {
				t.Fatalf("suspects %d %v, want %d %v", len(got), head(got), len(c.want), head(c.want))
			}
			if uninit != c.uninit {
				t.Fatalf("never written: %d, want %d", uninit, c.uninit)
			}
		})
	}
}

// fixtureFiles is the table's list of files for verifyFixture: file i is
// at local key 1000+i.
func fixtureFiles(n int) []uint64 {
	files := make([]uint64, n)
	for i := range files {
		files[i] = 1000 + uint64(i)
	}
	return files
}

func head(ids []uint64) string {
	if len(ids) > 6 {
		return fmt.Sprint(ids[:3], "...", ids[len(ids)-3:])
	}
	return fmt.Sprint(ids)
}

// BenchmarkVerifyPage is the summaries' comparison per recorded stripe
// (ns/op / sumSpan), for a page whose objects were all written and one
// whose objects were never written.
func BenchmarkVerifyPage(b *testing.B) {
	for _, written := range []bool{true, false} {
		b.Run(fmt.Sprint("written=", written), func(b *testing.B) {
			p, sum := verifyFixture(sumSpan)
			if !written {
				for i := range sum.Sums {
					sum.Sums[i] = 0
				}
				for i := range sum.Uninitialized {
					sum.Uninitialized[i] = 0xff
				}
			} else {
				for i := range sum.Uninitialized {
					sum.Uninitialized[i] = 0
				}
				for i := range sum.Sums {
					sum.Sums[i] = 0
				}
				for i := range uint64(sumSpan) {
					sum.Sums[i/sumBlock] += p.dig[i]
				}
			}
			e := &expectations{ly: &layoutCheck{r: &run{seq: fid.OSTSeq(0)}}}
			b.ResetTimer()
			for range b.N {
				if suspects, _ := e.verifyPage(0, 0, p, sum, false, nil, nil); len(suspects) != 0 {
					b.Fatal("suspects in a page that matches")
				}
			}
		})
	}
}

// The word-at-a-time comparison must name the same stripes, in the same
// order, and count the same never-written objects as the one-id-at-a-time
// reference, for any table and summary.
func FuzzVerifyPageMatchesByID(f *testing.F) {
	f.Add(uint64(1), uint16(3000), uint8(3), uint8(2), uint8(1))
	f.Add(uint64(7), uint16(65535), uint8(0), uint8(0), uint8(0))
	f.Add(uint64(42), uint16(100), uint8(50), uint8(50), uint8(50))
	f.Fuzz(func(t *testing.T, seed uint64, n uint16, missing, unwritten, wrong uint8) {
		rng := rand.New(rand.NewPCG(seed, uint64(n)))
		p := new(expPage)
		files := make([]uint64, 2000)
		for i := range files {
			files[i] = rng.Uint64()
		}
		sum := &pb.LfsckSummaryReply{Exists: make([]byte, sumSpan/8), Uninitialized: make([]byte, sumSpan/8), Sums: make([]uint64, sumSpan/sumBlock)}
		for range int(n) {
			i := rng.Uint64N(sumSpan)
			if p.expects(i) {
				continue
			}
			p.set(i, rng.Uint64(), uint32(rng.IntN(len(files))))
			switch r := rng.IntN(256); {
			case r < int(missing):
				// not on the OST (a summary that also calls it never
				// written is garbage, and missing wins)
				if rng.IntN(2) == 0 {
					sum.Uninitialized[i/8] |= 1 << (i % 8)
				}
			case r < int(missing)+int(unwritten):
				sum.Exists[i/8] |= 1 << (i % 8)
				sum.Uninitialized[i/8] |= 1 << (i % 8)
			default:
				sum.Exists[i/8] |= 1 << (i % 8)
				sum.Sums[i/sumBlock] += p.dig[i]
			}
		}
		for range int(wrong) % 8 { // records that differ, and objects the table does not expect
			sum.Sums[rng.IntN(len(sum.Sums))] += rng.Uint64()
			j := rng.Uint64N(sumSpan)
			sum.Exists[j/8] |= 1 << (j % 8)
			if rng.IntN(2) == 0 {
				sum.Uninitialized[j/8] |= 1 << (j % 8)
			}
		}
		e := &expectations{ly: &layoutCheck{r: &run{seq: fid.OSTSeq(1)}}, files: files}
		got, gotUninit := e.verifyPage(1, 2, p, sum, false, nil, nil)
		want, wantUninit := e.verifyPageByID(1, 2*sumSpan, p, sum, false, nil, nil)
		if gotUninit != wantUninit || len(got) != len(want) {
			t.Fatalf("never written %d, suspects %d; one id at a time %d, %d", gotUninit, len(got), wantUninit, len(want))
		}
		for i := range got {
			if got[i].oid != want[i].oid || got[i].ent.local != want[i].ent.local {
				t.Fatalf("suspect %d: %d (file %d), one id at a time %d (file %d)", i, got[i].oid, got[i].ent.local, want[i].oid, want[i].ent.local)
			}
		}
	})
}

// layoutCheck.file records each stripe of the scan's own sequence in the
// table once, with its file, and sets aside an object that two
// layouts name (dups, settled by resolveDups when never written) instead
// of recording it twice: across pages, OSTs, the bitmap's growth and the
// table's page allocation.
func TestLayoutObjectRecordsStripesOnceAndSetsAsideDups(t *testing.T) {
	ly := bareLayout(fid.OSTSeq(0))
	file := func(local uint64, oids ...uint64) {
		o := object{ostSeq: newSeqField(ly.r.seq)}
		if err := o.decodeSome(benchRecord(t, len(oids), 0), true); err != nil {
			t.Fatal(err)
		}
		for i := range o.layout.objs {
			o.layout.objs[i].oid = oids[i]
		}
		ly.file(&scanned{local: local, o: &o})
	}
	// Stripe i of a file is on OST i (benchRecord).
	file(10, 5, 7)
	file(11, 70000, 5)            // OST 0 page 1; OST 1 id 5
	file(12, 5, 1<<20)            // OST 0 id 5 again: named twice; OST 1 far beyond the bitmap's words
	file(13, 70000+64, 3, 9, 4)   // four OSTs
	want := map[[2]uint64]uint64{ // {ost, oid}: local
		{0, 5}: 10, {1, 7}: 10, {0, 70000}: 11, {1, 5}: 11, {1, 1 << 20}: 12,
		{0, 70064}: 13, {1, 3}: 13, {2, 9}: 13, {3, 4}: 13,
	}
	got := 0
	for ost, ps := range ly.exp.pages {
		for pi, p := range ps {
			if p == nil {
				continue
			}
			for i := range uint64(sumSpan) {
				if !p.expects(i) {
					continue
				}
				got++
				oid := uint64(pi)*sumSpan + i
				w, ok := want[[2]uint64{uint64(ost), oid}]
				if local := ly.exp.files[p.file[i]]; !ok || local != w {
					t.Errorf("OST %d object %d: recorded for file %d, want %d (known %v)", ost, oid, local, w, ok)
				}
			}
		}
	}
	if got != len(want) {
		t.Errorf("%d stripes recorded, want %d", got, len(want))
	}
	if d := (stripe{ost: 0, seq: ly.r.seq, oid: 5}); len(ly.dups) != 1 || !ly.dups[d] {
		t.Errorf("dups %v, want only %v", ly.dups, d)
	}
	if !ly.exp.dup[0][5] {
		t.Errorf("the table's dups %v, want OST 0 object 5", ly.exp.dup)
	}
	if !slices.Equal(ly.exp.files, []uint64{10, 11, 12, 13}) {
		t.Errorf("files %v, want each once, in scan order", ly.exp.files)
	}
	if ly.q.inflight != 1 {
		t.Errorf("%d checks queued, want 1 (the second holder of OST 0 object 5)", ly.q.inflight)
	}
}
