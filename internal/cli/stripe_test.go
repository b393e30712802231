package cli

import (
	"bytes"
	"strings"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// TestGetStripeTextAndJSONAgree: a file's stripe_offset is the OST of its
// first stripe in text and JSON alike (JSON said -1, the offset the create
// did not ask, where the text said 1); a directory's is what its default
// asks, -1 if nothing; a default's 0 stripe size is named as the file
// system default it stands for.
func TestGetStripeTextAndJSONAgree(t *testing.T) {
	objs := []*pb.StripeObject{{Ost: 1, Seq: 0x100000000, Oid: 5}, {Ost: 0, Seq: 0x100000000, Oid: 7}}
	file := func(offset int32) *pb.Inode {
		return &pb.Inode{Fid: fid.Root.PB(), Mode: syscall.S_IFREG | 0o644,
			Layout: &pb.Layout{StripeCount: 2, StripeSize: 1 << 20, StripeOffset: offset, Objects: objs}}
	}
	dir := func(count int32, size uint32, offset int32) *pb.Inode {
		return &pb.Inode{Fid: fid.Root.PB(), Mode: syscall.S_IFDIR | 0o755,
			Layout: &pb.Layout{StripeCount: count, StripeSize: size, StripeOffset: offset}}
	}
	cases := []struct {
		name       string
		ino        *pb.Inode
		wantOffset int
		wantText   []string
	}{
		{"file placed anywhere", file(-1), 1, []string{"lmm_stripe_offset: 1\n"}},
		{"file placed from OST 1", file(1), 1, []string{"lmm_stripe_offset: 1\n"}},
		{"directory default, no offset", dir(2, 0, -1), -1, []string{"stripe_count:  2\n", "stripe_size:   0 (file system default, 1M)\n", "stripe_offset: -1\n"}},
		{"directory default from OST 1", dir(0, 64<<10, 1), 1, []string{"stripe_count:  0 (file system default, 1)\n", "stripe_size:   64K\n", "stripe_offset: 1\n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := stripeOf("/p", c.ino)
			if out.StripeOffset != c.wantOffset {
				t.Errorf("JSON stripe_offset %d, want %d", out.StripeOffset, c.wantOffset)
			}
			var b bytes.Buffer
			if err := writeStripe(&b, out, c.ino); err != nil {
				t.Fatal(err)
			}
			for _, w := range c.wantText {
				if !strings.Contains(b.String(), w) {
					t.Errorf("text lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
}
