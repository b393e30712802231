// Package testdisk gives tests the disks that fail, a small tmpfs they can
// fill (ENOSPC) and a store's write-ahead log scribbled over (a damaged
// disk), and a device of their own whose counters they read. Only tests
// import it.
package testdisk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// SmallTmpfs mounts a tmpfs of a few pages at a new directory and
// unmounts it at the end of the test. It skips the test where tmpfs
// cannot be mounted (not root).
func SmallTmpfs(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (root needed): %v %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// Fill writes a file in dir until its file system is full, and returns
// what removes it.
func Fill(t testing.TB, dir string) (free func()) {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	return func() {
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
	}
}

// DamageWAL scribbles over bytes 100-200 of the newest write-ahead log
// (*.log) of the store in dir, as a damaged disk would.
func DamageWAL(t testing.TB, dir string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	if len(logs) == 0 {
		t.Fatal("no write-ahead log")
	}
	b, err := os.ReadFile(logs[len(logs)-1])
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i <= 200 && i < len(b); i++ {
		b[i] ^= 0xff
	}
	if err := os.WriteFile(logs[len(logs)-1], b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Device is a file system of its own on a loop device, so that the
// device's counters hold only what the test's processes write there.
type Device struct {
	Dir  string // where it is mounted
	name string // loopN
}

// Ext4Loop makes an ext4 file system of size bytes on a loop device over
// a file, mounts it at a new directory, and removes it all at the end of
// the test. Its inode tables and journal are written at mkfs time, so
// that no background initialisation writes to it later. It fails where
// loop devices cannot be set up (root is needed).
func Ext4Loop(t testing.TB, size int64) *Device {
	t.Helper()
	base := t.TempDir()
	img := filepath.Join(base, "disk.img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		t.Fatal(err)
	}
	f.Close()
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s (root and e2fsprogs are needed: scripts/install-deps.sh)", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", img)
	dev := run("losetup", "--find", "--show", img)
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v %s", dev, err, out)
		}
	})
	dir := filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run("mount", "-t", "ext4", "-o", "nodiscard", dev, dir)
	// Registered after losetup's: runs before it.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return &Device{Dir: dir, name: filepath.Base(dev)}
}

// Written is the bytes the device has written since it was set up, once
// what its file system holds in memory is written out (syncfs).
func (d *Device) Written(t testing.TB) uint64 {
	t.Helper()
	f, err := os.Open(d.Dir)
	if err != nil {
		t.Fatal(err)
	}
	err = unix.Syncfs(int(f.Fd()))
	f.Close()
	if err != nil {
		t.Fatalf("syncfs %s: %v", d.Dir, err)
	}
	b, err := os.ReadFile(filepath.Join("/sys/block", d.name, "stat"))
	if err != nil {
		t.Fatal(err)
	}
	// Field 7: sectors written, of 512 bytes (Documentation/block/stat.rst).
	fields := strings.Fields(string(b))
	if len(fields) < 7 {
		t.Fatalf("%s stat: %q", d.name, b)
	}
	sectors, err := strconv.ParseUint(fields[6], 10, 64)
	if err != nil {
		t.Fatalf("%s stat: %v", d.name, err)
	}
	return sectors * 512
}
