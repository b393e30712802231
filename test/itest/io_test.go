package itest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// TestStripedIOMatchesReference writes files of random sizes (0 B to
// 64 MiB) at random offsets with stripe counts 1, 2 and -1 and stripe sizes
// 64 KiB to 4 MiB, and compares every byte with a reference copy, read
// back whole and at random ranges, before and after close.
func TestStripedIOMatchesReference(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 3})
	c := cl.Client(t)
	ctx := context.Background()
	seed := int64(1)
	if s := os.Getenv("NACRE_ITEST_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	r := rand.New(rand.NewSource(seed))
	t.Logf("seed %d (set NACRE_ITEST_SEED to repeat)", seed)
	counts := []int32{1, 2, -1}
	sizes := []uint32{64 << 10, 128 << 10, 1 << 20, 4 << 20}
	maxSizes := []int{0, 1, 4095, 65537, 1 << 20, 3<<20 + 17, 9 << 20, 64 << 20}
	files := 0
	for _, sc := range counts {
		for _, ss := range sizes {
			maxSize := maxSizes[files%len(maxSizes)]
			files++
			t.Run(fmt.Sprintf("count%d_size%dK_max%d", sc, ss>>10, maxSize), func(t *testing.T) {
				ino, _, err := c.Create(ctx, fid.Root, fmt.Sprintf("f%d_%d_%d", sc, ss, maxSize), 0o644,
					client.CreateOpts{Exclusive: true, Layout: &pb.Layout{StripeCount: sc, StripeSize: ss, StripeOffset: -1}})
				if err != nil {
					t.Fatal(err)
				}
				wantStripes := int(sc)
				if sc == -1 {
					wantStripes = 3
				}
				if len(ino.Layout.Objects) != wantStripes || ino.Layout.StripeSize != ss {
					t.Fatalf("layout %v", ino.Layout)
				}
				ref := exercise(t, ctx, c, ino, r, maxSize)
				// A fresh client (another process's view) sees the same bytes.
				c2 := cl.Client(t)
				ino2, err := c2.Stat(ctx, fid.FromPB(ino.Fid))
				if err != nil {
					t.Fatal(err)
				}
				if ino2.Size != uint64(len(ref)) {
					t.Fatalf("size after close %d, want %d", ino2.Size, len(ref))
				}
				got := readFileAll(t, ctx, c2.OpenInode(ino2))
				if !bytes.Equal(got, ref) {
					t.Fatalf("content differs from reference at byte %d", firstDiff(got, ref))
				}
			})
		}
	}
}

// exercise does random writes (and a truncate) through one open file and
// returns the reference content.
func exercise(t *testing.T, ctx context.Context, c *client.Client, ino *pb.Inode, r *rand.Rand, maxSize int) []byte {
	t.Helper()
	f := c.OpenInode(ino)
	var ref []byte
	if maxSize > 0 {
		for i := 0; i < 6; i++ {
			off := r.Intn(maxSize)
			n := 1 + r.Intn(maxSize-off)
			if i == 0 {
				off, n = 0, maxSize // at least one full write
			}
			data := make([]byte, n)
			r.Read(data)
			if _, err := f.WriteAt(ctx, data, uint64(off)); err != nil {
				t.Fatal(err)
			}
			if off+n > len(ref) {
				ref = append(ref, make([]byte, off+n-len(ref))...)
			}
			copy(ref[off:], data)
		}
		// A hole past the end, then a truncate down within the data.
		end := len(ref) + r.Intn(1<<20)
		if _, err := f.WriteAt(ctx, []byte("tail"), uint64(end)); err != nil {
			t.Fatal(err)
		}
		ref = append(ref, make([]byte, end-len(ref))...)
		ref = append(ref, "tail"...)
		cut := len(ref) - r.Intn(len(ref)/2+1)
		if err := f.Truncate(ctx, uint64(cut)); err != nil {
			t.Fatal(err)
		}
		ref = ref[:cut]
	}
	// Random range reads before close.
	for i := 0; i < 10 && len(ref) > 0; i++ {
		off := r.Intn(len(ref))
		n := 1 + r.Intn(len(ref)-off)
		buf := make([]byte, n)
		got, err := f.ReadAt(ctx, buf, uint64(off))
		if err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if got != n || !bytes.Equal(buf, ref[off:off+n]) {
			t.Fatalf("range read [%d,+%d) got %d bytes, differs at %d", off, n, got, firstDiff(buf[:got], ref[off:off+n]))
		}
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return ref
}

func readFileAll(t *testing.T, ctx context.Context, f *client.File) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 5<<20+3) // not a multiple of any stripe size
	var off uint64
	for {
		n, err := f.ReadAt(ctx, buf, off)
		out = append(out, buf[:n]...)
		off += uint64(n)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestOtherClientSeesSizeWhileWriting: before close, a second client's
// stat takes the size from the OSTs (the MDT marks it dirty).
func TestOtherClientSeesSizeWhileWriting(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	a, b := cl.Client(t), cl.Client(t)
	ctx := context.Background()
	ino, _, err := a.Create(ctx, fid.Root, "growing", 0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: 2, StripeSize: 65536}})
	if err != nil {
		t.Fatal(err)
	}
	f := a.OpenInode(ino)
	if _, err := f.WriteAt(ctx, make([]byte, 200000), 0); err != nil {
		t.Fatal(err)
	}
	st, err := b.Stat(ctx, fid.FromPB(ino.Fid))
	if err != nil || st.Size != 200000 {
		t.Fatalf("stat from another client while writing: size %d, %v", st.GetSize(), err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st, _ = b.Getattr(ctx, fid.FromPB(ino.Fid))
	if st.Size != 200000 || st.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0 {
		t.Fatalf("MDT size after close: %d flags %#x", st.Size, st.Flags)
	}
}
