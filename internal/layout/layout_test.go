package layout

import (
	"math/rand"
	"testing"
)

// TestSplitCoversRangeInOrder checks Split against a byte-by-byte model.
func TestSplitCoversRangeInOrder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		ss := uint64(MinStripeSize) * uint64(1+r.Intn(4))
		count := 1 + r.Intn(5)
		off := uint64(r.Int63n(int64(ss) * 20))
		length := uint64(r.Int63n(int64(ss) * 6))
		chunks := Split(ss, count, off, length)
		pos := off
		for _, c := range chunks {
			if c.FileOff != pos {
				t.Fatalf("gap: chunk at %d, want %d", c.FileOff, pos)
			}
			if c.Len == 0 || c.Len > ss {
				t.Fatalf("bad chunk length %d", c.Len)
			}
			// Every byte of the chunk must map back to its file offset.
			for _, b := range []uint64{0, c.Len - 1} {
				if got := FileOffset(ss, count, c.Stripe, c.ObjOff+b); got != c.FileOff+b {
					t.Fatalf("FileOffset(%d,%d,%d,%d)=%d want %d", ss, count, c.Stripe, c.ObjOff+b, got, c.FileOff+b)
				}
			}
			pos += c.Len
		}
		if pos != off+length {
			t.Fatalf("chunks end at %d, want %d", pos, off+length)
		}
	}
}

func TestSizesRoundTrip(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 5000; i++ {
		ss := uint64(MinStripeSize) * uint64(1+r.Intn(3))
		count := 1 + r.Intn(6)
		size := uint64(r.Int63n(int64(ss) * 30))
		objs := make([]uint64, count)
		for s := range objs {
			objs[s] = ObjectSize(ss, count, s, size)
		}
		if got := FileSize(ss, objs); got != size {
			t.Fatalf("ss=%d count=%d size=%d: objects %v give %d", ss, count, size, objs, got)
		}
	}
}

func TestFileSizeWithHoles(t *testing.T) {
	// Only the second object has data: one byte at object offset 0.
	if got := FileSize(65536, []uint64{0, 1, 0}); got != 65537 {
		t.Fatalf("got %d want 65537", got)
	}
	if got := FileSize(65536, []uint64{0, 0}); got != 0 {
		t.Fatalf("empty objects: got %d", got)
	}
}

func TestParseSize(t *testing.T) {
	cases := map[string]uint64{"1M": 1 << 20, "64K": 65536, "64k": 65536, "2G": 2 << 30, "4096": 4096, "1MiB": 1 << 20}
	for in, want := range cases {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "M", "1X", "-1"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	if CheckStripeSize(65536) != nil || CheckStripeSize(1000) == nil || CheckStripeSize(0) == nil {
		t.Error("CheckStripeSize")
	}
}

// ObjectRanges covers, per object, exactly the bytes Split gives it, in
// one range, for ranges shorter and longer than a row, aligned or not.
func TestObjectRangesMatchSplit(t *testing.T) {
	const ss = 64 << 10
	for _, count := range []int{1, 2, 3, 8} {
		for _, off := range []uint64{0, 1, ss - 1, ss, 3*ss + 17, 10 * ss * 8} {
			for _, n := range []uint64{1, 100, ss, ss + 1, 2*ss*uint64(count) + 5, 37 * ss * uint64(count)} {
				want := map[int][2]uint64{}
				for _, ch := range Split(ss, count, off, n) {
					r, ok := want[ch.Stripe]
					if !ok {
						r[0] = ch.ObjOff
					} else if r[1] != ch.ObjOff {
						t.Fatalf("count %d off %d n %d: stripe %d's pieces are not contiguous", count, off, n, ch.Stripe)
					}
					r[1] = ch.ObjOff + ch.Len
					want[ch.Stripe] = r
				}
				got := ObjectRanges(ss, count, off, n)
				if len(got) != len(want) {
					t.Fatalf("count %d off %d n %d: %d ranges, want %d", count, off, n, len(got), len(want))
				}
				for i, g := range got {
					w := want[g.Stripe]
					if (i > 0 && got[i-1].Stripe >= g.Stripe) || g.ObjOff != w[0] || g.ObjOff+g.Len != w[1] {
						t.Fatalf("count %d off %d n %d: stripe %d gets [%d, %d), want [%d, %d)", count, off, n, g.Stripe, g.ObjOff, g.ObjOff+g.Len, w[0], w[1])
					}
				}
			}
		}
	}
	// A range of exabytes is one range per object, at once.
	if got := ObjectRanges(ss, 4, 1<<62, 1<<62-1); len(got) != 4 {
		t.Fatalf("huge range: %d ranges", len(got))
	}
}
