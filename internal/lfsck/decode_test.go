package lfsck

import (
	"bytes"
	"math/rand"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
)

// TestPendTableMatchesAMap drives the open-addressing table and a Go map
// with the same random operations (many collisions: small key space).
func TestPendTableMatchesAMap(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	var tb pendTable
	ref := map[uint64]pend{}
	for i := 0; i < 200000; i++ {
		h := uint64(rng.Intn(5000))<<7 | uint64(rng.Intn(4))<<20 | 1
		if rng.Intn(3) == 0 {
			tb.remove(h)
			delete(ref, h)
			continue
		}
		p := tb.find(h)
		p.n++
		p.src = uint64(i)
		ref[h] = pend{src: uint64(i), n: ref[h].n + 1}
	}
	if tb.n != len(ref) {
		t.Fatalf("table has %d entries, map %d", tb.n, len(ref))
	}
	tb.drain(func(h uint64, p pend) {
		if ref[h] != p {
			t.Fatalf("key %x: table %+v, map %+v", h, p, ref[h])
		}
	})
}

// TestDecodeMatchesProto: the scan's decoder reads what proto writes.
func TestDecodeMatchesProto(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for i := 0; i < 2000; i++ {
		ino := &pb.Inode{Fid: &pb.FID{Seq: rng.Uint64(), Oid: rng.Uint32() | 1, Ver: rng.Uint32()}, Mode: rng.Uint32(), Uid: rng.Uint32(),
			Gid: rng.Uint32(), Projid: rng.Uint32(), Nlink: rng.Uint32(), Size: rng.Uint64(), MtimeNs: rng.Int63() - rng.Int63(), Flags: rng.Uint32()}
		for j := rng.Intn(3); j > 0; j-- {
			ino.Links = append(ino.Links, &pb.LinkEntry{Parent: &pb.FID{Seq: rng.Uint64(), Oid: rng.Uint32()}, Name: []byte("n" + string(rune('a'+j)))})
		}
		if rng.Intn(2) == 0 {
			ino.Layout = &pb.Layout{Pattern: 1, StripeSize: rng.Uint32(), StripeCount: int32(rng.Intn(5)) - 1, StripeOffset: -1, Generation: rng.Uint32()}
			// Zero fields are left out of the encoding; small and large
			// values take one to ten varint bytes.
			val := func() uint64 {
				return [...]uint64{0, uint64(rng.Intn(128)), rng.Uint64() >> uint(rng.Intn(64)), rng.Uint64()}[rng.Intn(4)]
			}
			for j := rng.Intn(9); j > 0; j-- {
				ino.Layout.Objects = append(ino.Layout.Objects, &pb.StripeObject{Ost: uint32(val()), Seq: val(), Oid: val()})
			}
		}
		b, _ := proto.Marshal(ino)
		var o object
		if err := o.decode(b); err != nil {
			t.Fatal(err)
		}
		if o.fid != fid.FromPB(ino.Fid) || o.mode != ino.Mode || o.nlink != ino.Nlink || o.uid != ino.Uid || o.mtime != ino.MtimeNs ||
			len(o.links) != len(ino.Links) || o.hasLayout != (ino.Layout != nil) {
			t.Fatalf("decoded %+v from %v", o, ino)
		}
		if ino.Layout != nil && (o.layout.stripeCount != ino.Layout.StripeCount || len(o.layout.objs) != len(ino.Layout.Objects)) {
			t.Fatalf("layout %+v from %v", o.layout, ino.Layout)
		}
		if ino.Layout != nil {
			for j, so := range ino.Layout.Objects {
				if s := o.layout.objs[j]; s.ost != so.Ost || s.seq != so.Seq || s.oid != so.Oid {
					t.Fatalf("stripe %d decoded %+v from %v", j, s, so)
				}
			}
		}
		// Truncated records never panic.
		for cut := 0; cut < len(b); cut += 1 + len(b)/10 {
			o.decode(b[:cut])
		}
	}
}

// TestNameMatchFoldsLikeOneTable: buffering pairs by partition and folding
// them in batches leaves the same pending pairs (count and source) as
// folding each pair into one table as it comes, also when a hash is
// entered and claimed several times (hard links) across fold boundaries.
func TestNameMatchFoldsLikeOneTable(t *testing.T) {
	t.Parallel() // arms no fault point (tiers_test.go)
	for _, foldAt := range []int{1, 7, 1000, nameFoldAt} {
		rng := rand.New(rand.NewSource(int64(foldAt)))
		nm := newNameMatch()
		nm.foldAt = foldAt
		var ref pendTable
		// Few distinct hashes over every partition: many repeats.
		hs := make([]uint64, 20000)
		for i := range hs {
			hs[i] = rng.Uint64() | 1
		}
		for i := 0; i < 200000; i++ {
			h := hs[rng.Intn(len(hs))]
			src := uint64(i)
			if rng.Intn(2) == 0 {
				nm.entry(h, src)
				ref.add(h, 1, src)
			} else {
				nm.claim(h, src)
				ref.add(h, -1, src)
			}
		}
		if got := nm.pending(); got != ref.n || got == 0 {
			t.Fatalf("foldAt %d: %d pending, one table has %d", foldAt, got, ref.n)
		}
		got := map[uint64]pend{}
		nm.each(func(h uint64, p pend) { got[h] = p })
		ref.drain(func(h uint64, p pend) {
			if got[h] != p {
				t.Fatalf("foldAt %d: hash %x: partitions %+v, one table %+v", foldAt, h, got[h], p)
			}
		})
	}
}

// TestOIReadersFindLikeASeek: stepping forward from the last position
// finds exactly the keys a fresh seek finds, for queries that step a
// little, jump, go backwards, miss, run past the end of a sequence and
// switch between more sequences than there are iterators.
func TestOIReadersFindLikeASeek(t *testing.T) {
	db, err := kv.OpenMem()
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewSource(5))
	have := map[fid.FID]bool{}
	const seqs = maxOIReaders + 8
	for i := 0; i < 20000; i++ {
		f := fid.FID{Seq: 0x200000400 + uint64(rng.Intn(seqs)), Oid: uint32(rng.Intn(3000)) + 1}
		if err := db.Set(mdt.OIKey(f), be64(uint64(i)), false); err != nil {
			t.Fatal(err)
		}
		have[f] = true
	}
	snap := db.NewSnapshot()
	defer snap.Close()
	ois := &oiReaders{snap: snap, its: map[uint64]*oiReader{}}
	defer ois.close()
	var last [seqs]uint32
	for i := 0; i < 50000; i++ {
		s := rng.Intn(seqs)
		if rng.Intn(8) != 0 {
			s = i / 2000 % seqs // runs within one sequence, as a scan sees them
		}
		o := last[s]
		switch rng.Intn(10) {
		case 0:
			o = uint32(rng.Intn(3100)) // anywhere, also backwards and past the end
		case 1:
			o += uint32(rng.Intn(40))
		default:
			o += uint32(rng.Intn(3))
		}
		last[s] = o
		f := fid.FID{Seq: 0x200000400 + uint64(s), Oid: o}
		r, err := ois.get(f.Seq)
		if err != nil {
			t.Fatal(err)
		}
		got := r.find(mdt.OIKey(f))
		if err := r.it.Error(); err != nil {
			t.Fatal(err)
		}
		if got != have[f] {
			t.Fatalf("query %d, %v: found %v, exists %v", i, f, got, have[f])
		}
		if got && !bytes.Equal(r.it.Key(), mdt.OIKey(f)) {
			t.Fatalf("query %d, %v: positioned at %x", i, f, r.it.Key())
		}
		if len(ois.its) > maxOIReaders {
			t.Fatalf("%d iterators open, at most %d", len(ois.its), maxOIReaders)
		}
	}
}

// TestNameMatchFoldsGeometrically: when nearly every pair waits (a tree
// whose directories come first), a fold waits for as many new pairs as it
// must re-read pending, so folds grow geometrically instead of re-reading
// everything pending every foldAt pairs.
func TestNameMatchFoldsGeometrically(t *testing.T) {
	nm := newNameMatch()
	nm.foldAt = 1000
	rng := rand.New(rand.NewSource(6))
	const n = 200000
	for i := 0; i < n; i++ {
		nm.entry(rng.Uint64()|1, uint64(i))
	}
	if got := nm.pending(); got != n {
		t.Fatalf("%d pending, want %d", got, n)
	}
	// 1000, 2000, 4000, ... 128000, then the end: 9 folds.
	if nm.folds > 10 {
		t.Fatalf("%d folds for %d pairs that all wait: re-reading what is pending each time", nm.folds, n)
	}
}

// TestStripeDecoderFallsBackOnFieldsItDoesNotKnow: a stripe with a field
// the fast reader does not expect (from a newer writer, or garbage that
// still parses) is read by the generic reader, with the same result.
func TestStripeDecoderFallsBackOnFieldsItDoesNotKnow(t *testing.T) {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, 7)
	b = protowire.AppendTag(b, 9, protowire.BytesType)
	b = protowire.AppendBytes(b, []byte("new"))
	b = protowire.AppendTag(b, 3, protowire.VarintType)
	b = protowire.AppendVarint(b, 1<<40)
	if _, ok := fastStripe(b); ok {
		t.Fatal("the fast reader accepted a field it does not know")
	}
	s, err := decodeStripe(b)
	if err != nil || s.ost != 7 || s.oid != 1<<40 || s.seq != 0 {
		t.Fatalf("decodeStripe: %+v, %v", s, err)
	}
	if _, ok := fastStripe(b[:len(b)-1]); ok {
		t.Fatal("the fast reader accepted a truncated varint")
	}
}

// The decoder of the scan's own stripes (seqField.stripe) reads what the
// generic one reads whenever it takes a stripe, and leaves everything
// else to it: stripes as proto.Marshal writes them, of every OST index,
// object id and sequence length, other sequences, and stripes cut short,
// with bytes flipped or with fields added.
func TestSeqFieldStripeReadsLikeDecodeStripe(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	check := func(f *seqField, v []byte) bool { t.Helper(); return checkSeqStripe(t, f, v) }
	for _, seq := range []uint64{fid.OSTSeq(0), fid.OSTSeq(3), 1, 1 << 62} {
		f := newSeqField(seq)
		taken := 0
		for _, o := range []uint32{0, 1, 7, 127, 128, 300, 1 << 20} {
			for _, oid := range []uint64{0, 1, 127, 128, 100000, 1 << 32, 1<<56 - 1, 1 << 63} {
				for _, s := range []uint64{seq, seq + 1} {
					v, err := proto.Marshal(&pb.StripeObject{Ost: o, Seq: s, Oid: oid})
					if err != nil {
						t.Fatal(err)
					}
					if check(&f, v) {
						taken++
						if s != seq {
							t.Fatalf("took a stripe of sequence %d for %d", s, seq)
						}
					}
					for cut := range v {
						check(&f, v[:cut])
					}
					for range 20 {
						w := bytes.Clone(v)
						w[rng.Intn(len(w))] ^= byte(1 << rng.Intn(8))
						check(&f, w)
					}
					check(&f, protowire.AppendVarint(protowire.AppendTag(bytes.Clone(v), 9, protowire.VarintType), 5))
				}
			}
		}
		// Stripes of this sequence with an OST index below 128 and an
		// object id of at most 9 varint bytes are the ones it takes.
		if taken != 4*7 {
			t.Errorf("sequence %#x: the fast decoder took %d of the 28 stripes it should", seq, taken)
		}
	}
}

// checkSeqStripe checks that whenever f.stripe takes v it reads what
// decodeStripe reads, alone and inside a layout; it tells whether f took
// it.
func checkSeqStripe(t *testing.T, f *seqField, v []byte) bool {
	t.Helper()
	s, ok := f.stripe(v)
	if !ok {
		return false
	}
	want, err := decodeStripe(v)
	if err != nil || s != want {
		t.Fatalf("seq %#x stripe % x: fast %+v, generic %+v (%v)", f.seq, v, s, want, err)
	}
	if len(v) < 0x80 {
		o := object{ostSeq: *f}
		b := append([]byte{6<<3 | 2, byte(len(v))}, v...)
		if err := o.decodeLayout(b); err != nil || len(o.layout.objs) != 1 || o.layout.objs[0] != want {
			t.Fatalf("seq %#x stripe % x in a layout: %v %+v", f.seq, v, err, o.layout.objs)
		}
	}
	return true
}
