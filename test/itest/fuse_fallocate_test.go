package itest

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"nacre/test/testcluster"
)

// TestFuseFarRangesAndRefusedSizes: what a review found on the data path,
// on files striped over two OSTs:
//   - a punch of 2^62 bytes cut the range into a call per stripe unit: the
//     mount allocated 128 TiB and died (1M stripes), or panicked with the
//     file's lock held, and every later close of the file hung for good
//     (64K stripes). Now it is one call per object and immediate.
//   - a truncate refused with EFBIG (past the largest object an OST
//     holds) had grown the other object: a later write's close recorded
//     a size of terabytes.
//   - a write refused with EFBIG had landed in part: the size grew.
//   - a truncate left st_blocks as it was (du of an emptied file).
func TestFuseFarRangesAndRefusedSizes(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	m := mountFuse(t, cl)
	for _, dir := range []string{"s64k", "s1m"} {
		if err := os.Mkdir(m.Path(dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(syscall.Setxattr(m.Path("s64k"), "nacre.lov", []byte("stripe_count=2 stripe_size=64K"), 0))
	must(syscall.Setxattr(m.Path("s1m"), "nacre.lov", []byte("stripe_count=2 stripe_size=1M"), 0))

	for _, dir := range []string{"s64k", "s1m"} {
		p := m.Path(dir, "punched")
		fd, err := unix.Open(p, unix.O_CREAT|unix.O_RDWR, 0o644)
		must(err)
		_, err = unix.Write(fd, []byte("keep"))
		must(err)
		start := time.Now()
		err = unix.Fallocate(fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 1<<62, 1<<62-1)
		if took := time.Since(start); err != nil || took > 5*time.Second {
			t.Errorf("%s: punch of 2^62 bytes: %v after %v", dir, err, took)
		}
		closed := make(chan error, 1)
		go func() { closed <- unix.Close(fd) }()
		select {
		case err := <-closed:
			must(err)
		case <-time.After(20 * time.Second):
			t.Fatalf("%s: close after the punch hangs", dir)
		}
		if got, err := os.ReadFile(p); err != nil || string(got) != "keep" {
			t.Fatalf("%s: after the punch the file reads %q, %v", dir, got, err)
		}
	}

	// Object 0 of a file of this size would be 16 TiB, one block past
	// the largest file ext4 holds; object 1 would fit.
	p := m.Path("s1m", "big")
	must(os.WriteFile(p, []byte("abc"), 0o644))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	must(err)
	if err := f.Truncate(2*(1<<44-1<<20) + 1<<20); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("truncate past the largest object: %v, want EFBIG", err)
	}
	_, err = f.WriteAt([]byte("Z"), 10)
	must(err)
	must(f.Close())
	if st, err := os.Stat(p); err != nil || st.Size() != 11 {
		t.Fatalf("after a refused truncate and a write at 10: size %v (%v), want 11", st.Size(), err)
	}

	// A write whose pieces end past the largest object: refused, and the
	// size stays.
	p = m.Path("s64k", "far")
	must(os.WriteFile(p, []byte("abc"), 0o644))
	f, err = os.OpenFile(p, os.O_RDWR, 0)
	must(err)
	if _, err := f.WriteAt(bytes.Repeat([]byte("w"), 256<<10), (1<<44-1<<16)*2); !errors.Is(err, syscall.EFBIG) {
		t.Fatalf("write past the largest object: %v, want EFBIG", err)
	}
	must(f.Close())
	if st, err := os.Stat(p); err != nil || st.Size() != 3 {
		t.Fatalf("after a refused write: size %v (%v), want 3", st.Size(), err)
	}

	// Blocks follow a truncate.
	p = m.Path("s64k", "emptied")
	must(os.WriteFile(p, bytes.Repeat([]byte("b"), 4<<20), 0o644))
	must(os.Truncate(p, 1<<20))
	var st syscall.Stat_t
	must(syscall.Stat(p, &st))
	if st.Blocks > 2*(1<<20)/512 || st.Blocks < (1<<20)/512 {
		t.Errorf("truncated to 1 MiB: %d blocks, want about %d", st.Blocks, (1<<20)/512)
	}
	must(os.WriteFile(p, nil, 0o644)) // O_TRUNC
	must(syscall.Stat(p, &st))
	if st.Blocks != 0 {
		t.Errorf("emptied by O_TRUNC: %d blocks, want 0", st.Blocks)
	}
}
