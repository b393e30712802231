package itest

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// TestCLIPutAndGetKeepFilesSparse: nacre put leaves the holes of a local
// file (and blocks of zeros read from standard input) as holes on the
// OSTs, and nacre get leaves blocks of zeros as holes in the local file,
// with every byte and the size as they were.
func TestCLIPutAndGetKeepFilesSparse(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()
	dir := t.TempDir()
	const size = 256 << 20
	want := make([]byte, size)
	copy(want[3<<20:], "in the first stripe")
	copy(want[100<<20+12345:], "further on")
	// A sparse local file of that content, ending in a hole.
	src := filepath.Join(dir, "src")
	f, err := os.Create(src)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("in the first stripe"), 3<<20)
	f.WriteAt([]byte("further on"), 100<<20+12345)
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	f.Close()

	blocks := func(path string) int64 {
		t.Helper()
		ino, err := c.Resolve(ctx, path, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Glimpse(ctx, ino); err != nil {
			t.Fatal(err)
		}
		if ino.Size != size {
			t.Fatalf("%s: size %d, want %d", path, ino.Size, size)
		}
		return int64(ino.Blocks) * 512
	}
	if out, err := cl.Run("put", "-c", "2", src, "/sparse"); err != nil {
		t.Fatalf("put: %v\n%s", err, out)
	}
	if b := blocks("/sparse"); b > 4<<20 {
		t.Errorf("put of a 256 MiB file holding 29 bytes allocated %d bytes on the OSTs", b)
	}
	// From standard input: zeros are read, and still not written.
	put := exec.Command(cl.Bin, "put", "-", "/piped")
	put.Env = append(os.Environ(), "NACRE_MGS="+cl.MGS)
	put.Stdin = bytes.NewReader(want)
	if out, err := put.CombinedOutput(); err != nil {
		t.Fatalf("put -: %v\n%s", err, out)
	}
	if b := blocks("/piped"); b > 4<<20 {
		t.Errorf("put - of a 256 MiB stream holding 29 bytes allocated %d bytes on the OSTs", b)
	}

	for _, name := range []string{"sparse", "piped"} {
		local := filepath.Join(dir, name)
		if out, err := cl.Run("get", "/"+name, local); err != nil {
			t.Fatalf("get: %v\n%s", err, out)
		}
		got, err := os.ReadFile(local)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("get /%s: %d bytes (%v), not what was put", name, len(got), err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(local, &st); err != nil {
			t.Fatal(err)
		}
		if st.Blocks*512 > 4<<20 {
			t.Errorf("get /%s allocated %d bytes locally for 29 bytes of data", name, st.Blocks*512)
		}
	}
	if ents, err := c.ReadDirAll(ctx, fid.Root, false); err != nil || len(ents) != 2 {
		t.Errorf("root holds %d entries (%v), want the two files put", len(ents), err)
	}
}
