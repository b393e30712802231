package fusefs

import (
	"bytes"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

func TestInoIsUniqueAndStable(t *testing.T) {
	seen := map[uint64]fid.FID{}
	for seq := uint64(0x200000400); seq < 0x200000400+64; seq++ {
		for oid := uint32(1); oid < 131072; oid += 997 {
			f := fid.FID{Seq: seq, Oid: oid}
			ino := Ino(f)
			if ino == 0 || ino >= nacreIno {
				t.Fatalf("%s: ino %#x out of range", f, ino)
			}
			if g, ok := seen[ino]; ok {
				t.Fatalf("%s and %s share ino %#x", f, g, ino)
			}
			seen[ino] = f
		}
	}
	if Ino(fid.Root) != Ino(fid.Root) || Ino(fid.Root) == 0 {
		t.Fatal("root ino")
	}
}

func TestLovRoundTrip(t *testing.T) {
	ino := &pb.Inode{Mode: 0o100644, Layout: &pb.Layout{StripeSize: 1 << 20, StripeCount: 2, StripeOffset: -1, Generation: 3,
		Objects: []*pb.StripeObject{{Ost: 0, Seq: 0x100000000, Oid: 5}, {Ost: 1, Seq: 0x100000000, Oid: 7}}}}
	s, ok := formatLov(ino)
	if !ok || s != "stripe_count=2 stripe_size=1048576 stripe_offset=-1 pattern=raid0 generation=3 objects=0:0x100000000:0x5,1:0x100000000:0x7" {
		t.Fatalf("format: %q", s)
	}
	l, err := parseLov(s)
	if err != nil || l.StripeCount != 2 || l.StripeSize != 1<<20 || l.StripeOffset != -1 {
		t.Fatalf("parse: %+v %v", l, err)
	}
	l, err = parseLov("stripe_size=64K stripe_count=-1 stripe_offset=1")
	if err != nil || l.StripeSize != 64<<10 || l.StripeCount != -1 || l.StripeOffset != 1 {
		t.Fatalf("parse with units: %+v %v", l, err)
	}
	for _, bad := range []string{"stripe_count", "stripe_count=x", "stripe_size=-1", "stripe_offset=-2", "stripe_count=2001"} {
		if _, err := parseLov(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	if _, ok := formatLov(&pb.Inode{Mode: 0o40755}); ok {
		t.Error("a directory without a default layout has no nacre.lov")
	}
}

func TestParseOptions(t *testing.T) {
	o := DefaultMountOptions()
	if err := ParseOptions(&o, "allow_other,ro,attr_timeout=0.5,entry_timeout=0,negative_timeout=2,max_background=128,noatime"); err != nil {
		t.Fatal(err)
	}
	if !o.AllowOther || !o.ReadOnly || !o.DefaultPermissions || o.AttrTimeout != 500*time.Millisecond ||
		o.EntryTimeout != time.Nanosecond || o.NegativeTimeout != 2*time.Second || o.MaxBackground != 128 {
		t.Fatalf("%+v", o)
	}
	if err := ParseOptions(&o, "no_default_permissions"); err != nil || o.DefaultPermissions {
		t.Fatal("no_default_permissions")
	}
	for _, bad := range []string{"bogus", "attr_timeout", "attr_timeout=x", "max_background=-1"} {
		if err := ParseOptions(&o, bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// A write in flight holds a buffer of at most twice its size (one pool of
// 1 MiB buffers made 4 KiB writes pin 256 times their bytes), and buffers
// come back to their own class.
func TestWriteBehindBuffersFitTheWrite(t *testing.T) {
	for _, n := range []int{1, 4096, 4097, 65536, 100000, 1 << 20, 1<<20 + 1, 3 << 20} {
		bp, class := getBuf(n)
		if c := cap(*bp); c < n || (n > 4096 && c > 2*n) || (n <= 4096 && c > 4096) || len(*bp) != 0 {
			t.Errorf("getBuf(%d): len %d cap %d", n, len(*bp), c)
		}
		if (class < 0) != (n > 1<<maxBufShift) {
			t.Errorf("getBuf(%d): class %d", n, class)
		}
		*bp = append(*bp, make([]byte, n)...)
		putBuf(bp, class)
		if class >= 0 {
			again, c2 := getBuf(n)
			if c2 != class || cap(*again) < n || len(*again) != 0 {
				t.Errorf("getBuf(%d) after putBuf: class %d cap %d len %d", n, c2, cap(*again), len(*again))
			}
		}
	}
}

// Small contiguous writes made while one is under way leave as one call
// when it ends; a lone write, a write elsewhere in the file, and a fence
// send what is held at once, and the bytes arrive as written.
func TestWriteBehindMergesSmallWrites(t *testing.T) {
	fs := &FS{budget: newBudget(writeBudget)}
	of := &openFile{wb: newWriteBehind(fs.budget)}
	type call struct {
		off  uint64
		data []byte
	}
	calls := make(chan call, 100)
	gate := make(chan struct{})
	writeAt := func(off uint64) func([]byte) error {
		return func(p []byte) error {
			calls <- call{off, append([]byte(nil), p...)}
			<-gate
			return nil
		}
	}
	next := func(what string) call {
		t.Helper()
		select {
		case c := <-calls:
			return c
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no call to the OSTs", what)
			return call{}
		}
	}
	none := func(what string) {
		t.Helper()
		select {
		case c := <-calls:
			t.Fatalf("%s: a call at %d of %d bytes, want none yet", what, c.off, len(c.data))
		case <-time.After(50 * time.Millisecond):
		}
	}
	chunk := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 4096) }
	write := func(i int) {
		t.Helper()
		off := uint64(i) * 4096
		if err := fs.writeAsync(of, chunk(i), off, false, writeAt(off)); err != nil {
			t.Fatal(err)
		}
	}

	write(0)
	if c := next("a lone write"); c.off != 0 || !bytes.Equal(c.data, chunk(0)) {
		t.Fatalf("lone write: call at %d of %d bytes", c.off, len(c.data))
	}
	for i := 1; i <= 15; i++ {
		write(i)
	}
	none("writes while one is under way")
	gate <- struct{}{} // the first ends: the 15 held leave as one
	c := next("the held writes")
	var want []byte
	for i := 1; i <= 15; i++ {
		want = append(want, chunk(i)...)
	}
	if c.off != 4096 || !bytes.Equal(c.data, want) {
		t.Fatalf("merged call at %d of %d bytes, want at 4096 the 15 writes' %d bytes", c.off, len(c.data), len(want))
	}
	// Under way now: the merged call. A write that does not continue the
	// held one is not merged with it and sends it.
	write(16)
	none("a write continuing the one under way")
	write(40)
	if c := next("a write elsewhere"); c.off != 16*4096 || len(c.data) != 4096 {
		t.Fatalf("held write sent at %d with %d bytes, want at %d with 4096", c.off, len(c.data), 16*4096)
	}
	done := make(chan struct{})
	go func() { of.wb.fence(); close(done) }()
	if c := next("a fence"); c.off != 40*4096 {
		t.Fatalf("fence sent a call at %d, want %d", c.off, 40*4096)
	}
	for i := 0; i < 3; i++ {
		gate <- struct{}{}
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("fence did not return once every call ended")
	}
	if of.wb.busy() || of.wb.bytes != 0 || of.wb.sent != 0 {
		t.Fatalf("after the fence: busy %v, %d bytes, %d sent", of.wb.busy(), of.wb.bytes, of.wb.sent)
	}
}
