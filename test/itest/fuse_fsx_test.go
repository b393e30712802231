package itest

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"nacre/test/testcluster"
)

// TestFuseFsx is a data-integrity exerciser in the style of fsx: a seeded
// random mix of write, read, truncate up and down, mmap read and write,
// fallocate, punch hole and zero range on one file through a mount, every
// result checked against an in-memory model; now and then the file is
// closed and reopened, alternately through a second mount (close-to-open).
//
// Bounded for CI (NACRE_FSX_SECONDS, default 4 s of operations); set
// NACRE_FSX_SEED to repeat a run, NACRE_FSX_SECONDS=600 for a long one.
func TestFuseFsx(t *testing.T) {
	needFUSE(t)
	seed := time.Now().UnixNano() % 1000000
	if s := os.Getenv("NACRE_FSX_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	secs := 4.0
	if s := os.Getenv("NACRE_FSX_SECONDS"); s != "" {
		secs, _ = strconv.ParseFloat(s, 64)
	}
	t.Logf("seed %d (NACRE_FSX_SEED=%d repeats this run)", seed, seed)
	cl := testcluster.Start(t, testcluster.Options{})
	mounts := []*fuseMount{mountFuse(t, cl), mountFuse(t, cl)}
	// Stripe the file over both OSTs with a small stripe, so operations
	// cross objects.
	if err := os.WriteFile(mounts[0].Path("fsx"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(mounts[0].Path("fsx"), "nacre.lov", []byte("stripe_count=2 stripe_size=64K"), 0); err != nil {
		t.Fatal(err)
	}
	x := &fsx{t: t, r: rand.New(rand.NewSource(seed)), maxSize: 3 << 20}
	x.open(mounts[0])
	defer func() { x.f.Close() }()
	deadline := time.Now().Add(time.Duration(secs * float64(time.Second)))
	ops := 0
	for ; time.Now().Before(deadline); ops++ {
		x.step(ops)
		if ops%50 == 49 {
			x.check("reopen")
			x.f.Close()
			x.open(mounts[ops/50%2])
			x.check("after reopen on " + x.m.Dir)
		}
	}
	x.check("end")
	t.Logf("%d operations: %v", ops, x.counts)
}

type fsx struct {
	t       *testing.T
	r       *rand.Rand
	m       *fuseMount
	f       *os.File
	model   []byte
	maxSize int
	counts  map[string]int
	log     []string
}

func (x *fsx) open(m *fuseMount) {
	f, err := os.OpenFile(m.Path("fsx"), os.O_RDWR, 0)
	if err != nil {
		x.t.Fatal(err)
	}
	x.m, x.f = m, f
}

func (x *fsx) fail(format string, args ...any) {
	x.t.Helper()
	n := len(x.log)
	if n > 15 {
		n = 15
	}
	x.t.Fatalf("%s\nlast operations:\n%s", fmt.Sprintf(format, args...), join(x.log[len(x.log)-n:]))
}

func join(l []string) string {
	var b bytes.Buffer
	for _, s := range l {
		b.WriteString("  " + s + "\n")
	}
	return b.String()
}

func (x *fsx) note(op string, off, n int) {
	if x.counts == nil {
		x.counts = map[string]int{}
	}
	x.counts[op]++
	x.log = append(x.log, fmt.Sprintf("%-9s off %8d len %8d -> size %d", op, off, n, len(x.model)))
}

func (x *fsx) resize(n int) {
	if n > len(x.model) {
		x.model = append(x.model, make([]byte, n-len(x.model))...)
	} else {
		x.model = x.model[:n]
	}
}

func (x *fsx) rangeIn(maxLen int) (int, int) {
	off := x.r.Intn(x.maxSize)
	n := 1 + x.r.Intn(maxLen)
	if off+n > x.maxSize {
		n = x.maxSize - off
	}
	return off, max(n, 1)
}

func (x *fsx) step(i int) {
	switch op := x.r.Intn(100); {
	case op < 30:
		off, n := x.rangeIn(256 << 10)
		data := randBytes(x.r, n)
		if _, err := x.f.WriteAt(data, int64(off)); err != nil {
			x.fail("write: %v", err)
		}
		if off+n > len(x.model) {
			x.resize(off + n)
		}
		copy(x.model[off:], data)
		x.note("write", off, n)
	case op < 50:
		if len(x.model) == 0 {
			return
		}
		off := x.r.Intn(len(x.model))
		n := 1 + x.r.Intn(256<<10)
		buf := make([]byte, n)
		got, err := x.f.ReadAt(buf, int64(off))
		want := min(n, len(x.model)-off)
		if got != want || (err != nil && got != n && err.Error() != "EOF") {
			x.fail("read at %d: %d bytes (%v), want %d", off, got, err, want)
		}
		if !bytes.Equal(buf[:got], x.model[off:off+want]) {
			x.fail("read at %d: content differs at %d", off, off+firstDiff(buf[:got], x.model[off:off+want]))
		}
		x.note("read", off, n)
	case op < 60:
		n := x.r.Intn(x.maxSize)
		if x.r.Intn(3) == 0 {
			n = x.r.Intn(len(x.model) + 1)
		}
		if err := x.f.Truncate(int64(n)); err != nil {
			x.fail("truncate: %v", err)
		}
		x.resize(n)
		x.note("truncate", n, 0)
	case op < 70:
		x.mmapOp(false)
	case op < 78:
		x.mmapOp(true)
	case op < 85:
		off, n := x.rangeIn(512 << 10)
		keep := x.r.Intn(2) == 0
		mode := uint32(0)
		if keep {
			mode = 1 // FALLOC_FL_KEEP_SIZE
		}
		if err := syscall.Fallocate(int(x.f.Fd()), mode, int64(off), int64(n)); err != nil {
			x.fail("fallocate: %v", err)
		}
		if !keep && off+n > len(x.model) {
			x.resize(off + n)
		}
		x.note(map[bool]string{true: "falloc-k", false: "falloc"}[keep], off, n)
	case op < 93:
		off, n := x.rangeIn(512 << 10)
		if err := syscall.Fallocate(int(x.f.Fd()), 0x02|0x01, int64(off), int64(n)); err != nil {
			x.fail("punch: %v", err)
		}
		for j := off; j < off+n && j < len(x.model); j++ {
			x.model[j] = 0
		}
		x.note("punch", off, n)
	default:
		off, n := x.rangeIn(512 << 10)
		if err := syscall.Fallocate(int(x.f.Fd()), 0x10, int64(off), int64(n)); err != nil {
			x.fail("zero range: %v", err)
		}
		if off+n > len(x.model) {
			x.resize(off + n)
		}
		for j := off; j < off+n; j++ {
			x.model[j] = 0
		}
		x.note("zerorange", off, n)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(x.f.Fd()), &st); err != nil {
		x.fail("fstat: %v", err)
	}
	if st.Size != int64(len(x.model)) {
		x.fail("size %d after the operation, model %d", st.Size, len(x.model))
	}
}

// mmapOp maps the file (a page-aligned window) and reads or writes
// through the mapping, with msync for writes.
func (x *fsx) mmapOp(write bool) {
	size := len(x.model)
	if size == 0 {
		return
	}
	pg := os.Getpagesize()
	off := x.r.Intn(size)
	n := 1 + x.r.Intn(min(size-off, 128<<10))
	mapOff := off / pg * pg
	mapLen := off + n - mapOff
	prot := syscall.PROT_READ
	if write {
		prot |= syscall.PROT_WRITE
	}
	mem, err := syscall.Mmap(int(x.f.Fd()), int64(mapOff), mapLen, prot, syscall.MAP_SHARED)
	if err != nil {
		x.fail("mmap: %v", err)
	}
	defer syscall.Munmap(mem)
	if write {
		data := randBytes(x.r, n)
		copy(mem[off-mapOff:], data)
		copy(x.model[off:], data)
		if err := msync(mem); err != nil {
			x.fail("msync: %v", err)
		}
		x.note("mapwrite", off, n)
		return
	}
	if !bytes.Equal(mem[off-mapOff:off-mapOff+n], x.model[off:off+n]) {
		x.fail("mapread at %d: content differs at %d", off, off+firstDiff(mem[off-mapOff:off-mapOff+n], x.model[off:off+n]))
	}
	x.note("mapread", off, n)
}

func msync(b []byte) error {
	_, _, e := syscall.Syscall(syscall.SYS_MSYNC, uintptr(unsafePointer(b)), uintptr(len(b)), syscall.MS_SYNC)
	if e != 0 {
		return e
	}
	return nil
}

// check compares the whole file with the model.
func (x *fsx) check(when string) {
	got, err := os.ReadFile(x.m.Path("fsx"))
	if err != nil {
		x.fail("%s: read whole file: %v", when, err)
	}
	if !bytes.Equal(got, x.model) {
		x.fail("%s: file (%d bytes) differs from the model (%d bytes) at %d", when, len(got), len(x.model), firstDiff(got, x.model))
	}
}
