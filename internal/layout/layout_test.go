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
