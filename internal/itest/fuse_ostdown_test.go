package itest

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/testcluster"
)

// TestFuseIOToADownOSTFailsWithEIO: through the mount, I/O to a file with
// a stripe on an OST that stays down fails with EIO (not the dial's
// "connection refused", which an application would report as if the file
// had said it), after the mount's wait for the OST, and then at once
// until the OST answers; the mount's log names the OST. Once the OST is
// back, the file reads whole.
func TestFuseIOToADownOSTFailsWithEIO(t *testing.T) {
	needFUSE(t)
	t.Setenv("NACRE_OST_DOWN_AFTER", "2s")
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	p := m.Path("wide")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Setxattr(p, "nacre.lov", []byte("stripe_count=2 stripe_size=64K"), 0); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB: both stripes
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cl.Kill("ost1", syscall.SIGKILL)
	read := func() (time.Duration, error) {
		// A fresh open: the kernel's pages of the file are not used.
		f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECT, 0)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		buf := make([]byte, 128<<10)
		start := time.Now()
		_, err = f.ReadAt(buf, 0)
		return time.Since(start), err
	}
	took, err := read()
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("read with OST0001 down: %v after %v, want EIO", err, took)
	}
	if took > 20*time.Second {
		t.Fatalf("read with OST0001 down failed only after %v (the mount waits 2 s here)", took)
	}
	took, err = read()
	if !errors.Is(err, syscall.EIO) || took > 5*time.Second {
		t.Fatalf("second read with OST0001 down: %v after %v, want EIO at once", err, took)
	}
	log, _ := os.ReadFile(m.Log)
	if !strings.Contains(string(log), "OST unreachable") || !strings.Contains(string(log), "OST0001") {
		t.Fatalf("the mount's log does not name the unreachable OST:\n%s", log)
	}
	cl.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := os.ReadFile(p)
		if err == nil && bytes.Equal(got, data) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after OST0001 came back: %d bytes, %v", len(got), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	// Reads of 1 MiB (max_read) once made go-fuse log a failed splice
	// each; the mount does not splice.
	if log, _ := os.ReadFile(m.Log); strings.Contains(string(log), "trySplice") {
		t.Fatalf("the mount's log has splice failures:\n%s", log)
	}
}
