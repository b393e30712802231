package reserve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeDevice is a device whose free space the test sets.
type fakeDevice struct {
	u     Usage
	calls int
	err   error
}

func (d *fakeDevice) statfs(string) (Usage, error) {
	d.calls++
	return d.u, d.err
}

func TestBytes(t *testing.T) {
	for _, c := range []struct{ total, memtable, want uint64 }{
		{256 << 20, 32 << 20, 80 << 20},      // two memtables and 16 MiB
		{1 << 40, 32 << 20, (1 << 40) / 200}, // 0.5 % of a large device
		{0, 64 << 20, 144 << 20},
	} {
		if got := Bytes(c.total, c.memtable); got != c.want {
			t.Errorf("Bytes(%d, %d) = %d, want %d", c.total, c.memtable, got, c.want)
		}
	}
}

func TestGuardKeepsTheReserve(t *testing.T) {
	const mib = 1 << 20
	dev := &fakeDevice{u: Usage{Total: 256 * mib, Avail: 100 * mib}}
	g := NewGuard("/dev/x", "OST0000", 32*mib, dev.statfs)
	now := time.Unix(0, 0)
	g.now = func() time.Time { return now }

	// write is an admitted write landing on the device.
	write := func(n uint64) error {
		err := g.Admit(n)
		if err == nil {
			dev.u.Avail -= n
			g.Done(n)
		}
		return err
	}
	// 100 MiB free, 80 MiB reserve: 20 MiB may be written, in pieces,
	// without a statfs per write.
	for i := 0; i < 20; i++ {
		if err := write(mib); err != nil {
			t.Fatalf("write %d of 1 MiB: %v", i, err)
		}
	}
	if dev.calls > 2 {
		t.Errorf("%d statfs calls for 20 writes within 100 ms", dev.calls)
	}
	err := write(mib)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the write past the reserve: want ENOSPC, got %v", err)
	}
	var fe *FullError
	if !errors.As(err, &fe) || !strings.Contains(fe.Public(), "OST0000 is full") || strings.Contains(fe.Public(), "/dev/x") {
		t.Errorf("public message %q: want the target named and no server path", fe.Public())
	}

	// Space freed elsewhere is seen at once: a refused write looks again.
	dev.u.Avail = 200 * mib
	if err := write(mib); err != nil {
		t.Fatalf("after space was freed: %v", err)
	}
	// Writes admitted but not yet written count against the reserve even
	// across a fresh look at the device, which cannot see them.
	now = now.Add(RefreshEvery)
	dev.u.Avail = 100 * mib
	for i := 0; i < 20; i++ {
		if err := g.Admit(mib); err != nil {
			t.Fatalf("in-flight write %d: %v", i, err)
		}
	}
	now = now.Add(RefreshEvery)
	if err := g.Admit(mib); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("20 MiB in flight above an 80 MiB reserve with 100 MiB free, one more: want ENOSPC, got %v", err)
	}
	for i := 0; i < 20; i++ {
		dev.u.Avail -= mib
		g.Done(mib)
	}
	// Space taken by others is seen after RefreshEvery.
	dev.u.Avail = 81 * mib
	now = now.Add(RefreshEvery)
	if err := write(2 * mib); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("1 MiB above the reserve, a 2 MiB write: want ENOSPC, got %v", err)
	}
	// A device that cannot be asked does not stop writes.
	dev.err = errors.New("statfs failed")
	now = now.Add(RefreshEvery)
	if err := g.Admit(mib); err != nil {
		t.Errorf("with statfs failing: %v", err)
	}
}

func TestCheckOpenNeedsRoomToReplayTheLog(t *testing.T) {
	const mib = 1 << 20
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "000007.log"), make([]byte, 3*mib), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := &fakeDevice{u: Usage{Total: 1 << 30, Avail: 6 * mib}}
	err := CheckOpen(dir, "nacre-OST0000", 32*mib, dev.statfs)
	if err == nil || !strings.Contains(err.Error(), "nacre-OST0000 cannot open its store") || !strings.Contains(err.Error(), "free space there") {
		t.Fatalf("3 MiB of log and 6 MiB free: want a refusal naming the target and the fix, got %v", err)
	}
	dev.u.Avail = 8 * mib
	if err := CheckOpen(dir, "nacre-OST0000", 32*mib, dev.statfs); err != nil {
		t.Errorf("3 MiB of log and 8 MiB free: %v", err)
	}
	if err := CheckOpen(t.TempDir(), "nacre-OST0000", 32*mib, (&fakeDevice{}).statfs); err != nil {
		t.Errorf("a new store with no log: %v", err)
	}
	// Pebble keeps up to three obsolete logs at full size for reuse: a
	// store at its reserve, whose logs add up to more than the reserve,
	// still opens.
	for i := 8; i < 12; i++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d.log", i)), make([]byte, 17*mib), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev.u.Avail = Bytes(1<<30, 16*mib)
	if err := CheckOpen(dir, "nacre-OST0000", 16*mib, dev.statfs); err != nil {
		t.Errorf("71 MiB of logs (mostly kept for reuse), 16 MiB memtables, the reserve free: %v", err)
	}
}

func TestGuardKeepsInodesForTheStore(t *testing.T) {
	dev := &fakeDevice{u: Usage{Total: 1 << 30, Avail: 1 << 29, Files: 1000, FilesFree: Inodes + 10}}
	g := NewGuard("/dev/x", "OST0001", 32<<20, dev.statfs)
	now := time.Unix(0, 0)
	g.now = func() time.Time { return now }
	// mk is a file made on the device once admitted.
	mk := func() error {
		err := g.AdmitFiles(1)
		if err == nil {
			dev.u.FilesFree--
		}
		return err
	}
	for i := 0; i < 10; i++ {
		if err := mk(); err != nil {
			t.Fatalf("file %d of the 10 above the reserve: %v", i, err)
		}
	}
	err := mk()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("a file into the inode reserve: want ENOSPC, got %v", err)
	}
	var fe *FullError
	if !errors.As(err, &fe) || !strings.Contains(fe.Public(), "OST0001 is out of inodes") || !strings.Contains(fe.Public(), "remove files") ||
		strings.Contains(fe.Public(), "/dev/x") {
		t.Errorf("message %q: want the target, the cause and the fix named, and no server path", fe.Public())
	}
	// Within one view of the device (no statfs), the files admitted count.
	dev.u.FilesFree = Inodes + 3
	now = now.Add(RefreshEvery)
	calls := dev.calls
	if g.AdmitFiles(2) != nil || g.AdmitFiles(1) != nil || dev.calls != calls+1 {
		t.Error("refused the files above the reserve, or looked at the device for each")
	}
	dev.u.FilesFree -= 3
	if g.AdmitFiles(1) == nil {
		t.Error("admitted a file into the reserve")
	}
	// A file system without an inode limit never runs out.
	dev.u = Usage{Total: 1 << 30, Avail: 1 << 29}
	now = now.Add(RefreshEvery)
	if err := g.AdmitFiles(1 << 20); err != nil {
		t.Errorf("no inode limit: %v", err)
	}
}

func TestCheckOpenNeedsInodes(t *testing.T) {
	dir := t.TempDir()
	dev := &fakeDevice{u: Usage{Total: 1 << 30, Avail: 1 << 29, Files: 1000, FilesFree: 3}}
	err := CheckOpen(dir, "nacre-OST0002", 32<<20, dev.statfs)
	if err == nil || !strings.Contains(err.Error(), "3 free inodes") || !strings.Contains(err.Error(), "remove files") {
		t.Fatalf("want a refusal naming the free inodes and the fix, got %v", err)
	}
	dev.u.FilesFree = 500
	if err := CheckOpen(dir, "nacre-OST0002", 32<<20, dev.statfs); err != nil {
		t.Fatal(err)
	}
}
