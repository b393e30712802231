package itest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacre/internal/fid"
	"nacre/internal/fusefs"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestFuseMountGoesToTheBackground: `nacre mount` returns once the mount
// is ready, leaving a daemon; `nacre umount` unmounts and waits for it.
func TestFuseMountGoesToTheBackground(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// A file in the mount point: hidden while mounted, and said so.
	if err := os.WriteFile(filepath.Join(dir, "under"), []byte("local"), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "mount.log")
	out, err := cl.Run("mount", dir, "--log", logPath)
	if err != nil {
		t.Fatalf("nacre mount: %v\n%s", err, out)
	}
	if !strings.Contains(out, "is not empty: what it holds is hidden") {
		t.Errorf("mount over a directory holding a file did not warn:\n%s", out)
	}
	rec, err := fusefs.ReadRecord(mountState(), dir)
	if err != nil {
		t.Fatalf("mount record: %v", err)
	}
	t.Cleanup(func() {
		if fusefs.Alive(rec.Pid) {
			fusefs.Umount(dir, fusefs.UmountOptions{Force: true, StateDir: mountState()})
			syscall.Kill(rec.Pid, syscall.SIGKILL)
		}
	})
	if _, ok := fusefs.FindMount(dir); !ok || !fusefs.Alive(rec.Pid) {
		t.Fatalf("not mounted (daemon pid %d)", rec.Pid)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cl.Run("umount", dir); err != nil {
		t.Fatalf("nacre umount: %v\n%s", err, out)
	}
	if _, ok := fusefs.FindMount(dir); ok {
		t.Fatal("still mounted")
	}
	if fusefs.Alive(rec.Pid) {
		t.Fatalf("daemon %d still running after umount", rec.Pid)
	}
	if _, err := fusefs.ReadRecord(mountState(), dir); err == nil {
		t.Fatal("mount record left behind")
	}
	if got, err := os.ReadFile(filepath.Join(dir, "under")); err != nil || string(got) != "local" {
		t.Fatalf("the file under the mount point after umount: %q %v", got, err)
	}
	// A second mount sees the file.
	m := mountFuse(t, cl)
	if got, err := os.ReadFile(m.Path("f")); err != nil || string(got) != "data" {
		t.Fatalf("after remount: %q %v", got, err)
	}
	// A mount point that is not mounted is an error.
	if out, err := cl.Run("umount", dir); err == nil || !strings.Contains(out, "not mounted") {
		t.Fatalf("umount of a free directory: %v %s", err, out)
	}
}

// writer writes sequential chunks to one open file until stopped.
type writer struct {
	f      *os.File
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	data   bytes.Buffer
	err    error
	chunks int
}

func startWriter(t *testing.T, path string) *writer {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := &writer{f: f, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			chunk := bytes.Repeat([]byte(fmt.Sprintf("%07d\n", i)), 8192) // 64 KiB
			if _, err := f.Write(chunk); err != nil {
				w.mu.Lock()
				w.err = err
				w.mu.Unlock()
				return
			}
			w.mu.Lock()
			w.data.Write(chunk)
			w.chunks++
			w.mu.Unlock()
		}
	}()
	// Let it get going (a writer that does not is caught by its checks).
	wait.Poll(10*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.chunks >= 4
	})
	return w
}

func (w *writer) finish() (closeErr error) {
	close(w.stop)
	<-w.done
	return w.f.Close()
}

// TestFuseUmountUnderLoad: a plain umount of a busy mount is refused; a
// lazy one detaches it at once, the writer keeps its file, and the
// daemon finishes (flushing) when the file is closed; another mount then
// sees every byte written.
func TestFuseUmountUnderLoad(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	w := startWriter(t, m.Path("load"))
	if err := m.Umount(); err == nil || !strings.Contains(err.Error(), "busy") {
		t.Fatalf("umount of a busy mount: %v, want busy", err)
	}
	out, err := exec.Command(m.bin, "umount", "--lazy", m.Dir).CombinedOutput()
	if err != nil {
		t.Fatalf("umount --lazy: %v %s", err, out)
	}
	if _, ok := fusefs.FindMount(m.Dir); ok {
		t.Fatal("still mounted after a lazy umount")
	}
	time.Sleep(200 * time.Millisecond) // the writer goes on through its descriptor
	if err := w.finish(); err != nil || w.err != nil {
		t.Fatalf("writer after a lazy umount: close %v, write %v", err, w.err)
	}
	select {
	case <-m.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("daemon still running after the last file closed")
	}
	m2 := mountFuse(t, cl)
	got, err := os.ReadFile(m2.Path("load"))
	if err != nil || !bytes.Equal(got, w.data.Bytes()) {
		t.Fatalf("after remount: %d bytes (%v), want %d (%d chunks)", len(got), err, w.data.Len(), w.chunks)
	}
}

// TestFuseUmountForceUnderLoad: a forced umount aborts a busy mount: the
// writer gets errors instead of hanging, and the daemon exits.
func TestFuseUmountForceUnderLoad(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	w := startWriter(t, m.Path("load"))
	if err := m.Umount("--force"); err != nil {
		t.Fatal(err)
	}
	<-w.done
	if w.err == nil {
		t.Fatal("writer saw no error after a forced umount")
	}
	w.f.Close()
	if _, ok := fusefs.FindMount(m.Dir); ok {
		t.Fatal("still mounted")
	}
}

// TestFuseMountProcessKilled: when the mount daemon dies with files open,
// users get ENOTCONN (no hang), `nacre umount` frees the mount point, a
// new mount works, data closed before the crash is intact, and the MDS
// reaps the dead client's open-unlinked file after the grace period.
func TestFuseMountProcessKilled(t *testing.T) {
	needFUSE(t)
	t.Setenv("NACRE_ORPHAN_GRACE", "1s")
	cl := testcluster.Start(t, testcluster.Options{})
	c := cl.Client(t)
	m := mountFuse(t, cl)
	if err := os.WriteFile(m.Path("kept"), []byte("closed before the crash"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(m.Path("open"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("in flight")); err != nil {
		t.Fatal(err)
	}
	// An open-unlinked file: only this client keeps it.
	g, err := os.Create(m.Path("orphan"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ino, err := c.Resolve(context.Background(), "/orphan", false)
	if err != nil {
		t.Fatal(err)
	}
	orphan := fid.FromPB(ino.Fid)
	if err := os.Remove(m.Path("orphan")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Getattr(context.Background(), orphan); err != nil {
		t.Fatalf("open-unlinked file gone while open: %v", err)
	}

	m.Kill()
	if _, err := f.Write([]byte("more")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("write to a dead mount: %v, want ENOTCONN", err)
	}
	if _, err := os.Stat(m.Path("kept")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("stat in a dead mount: %v, want ENOTCONN", err)
	}
	f.Close()
	g.Close()
	if out, err := exec.Command(m.bin, "umount", m.Dir).CombinedOutput(); err != nil {
		t.Fatalf("umount of a dead mount: %v %s", err, out)
	}
	if _, ok := fusefs.FindMount(m.Dir); ok {
		t.Fatal("dead mount still there")
	}
	if _, err := os.ReadDir(m.Dir); err != nil {
		t.Fatalf("mount point after umount: %v", err)
	}
	m2 := mountFuse(t, cl)
	if got, err := os.ReadFile(m2.Path("kept")); err != nil || string(got) != "closed before the crash" {
		t.Fatalf("closed file after the crash: %q %v", got, err)
	}
	if _, err := os.Stat(m2.Path("open")); err != nil {
		t.Fatalf("file open at the crash: %v", err)
	}
	wait.For(t, 20*time.Second, "the dead client's open-unlinked file to be reaped", func() bool {
		_, err := c.Getattr(context.Background(), orphan)
		return err != nil
	})
}

// TestFuseUpMountsAndDownUnmounts: `nacre up --mount DIR` mounts the local
// cluster it starts, and `nacre down` unmounts it before stopping it.
func TestFuseUpMountsAndDownUnmounts(t *testing.T) {
	needFUSE(t)
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	mnt := filepath.Join(t.TempDir(), "mnt")
	t.Cleanup(func() {
		if _, ok := fusefs.FindMount(mnt); ok {
			fusefs.Umount(mnt, fusefs.UmountOptions{Force: true, StateDir: mountState()})
		}
		exec.Command(bin, "down", "--dir", dir).Run()
	})
	out, err := exec.Command(bin, "up", "--dir", dir, "--mount", mnt, "--detach").CombinedOutput()
	if err != nil {
		t.Fatalf("nacre up --mount: %v\n%s", err, out)
	}
	if _, ok := fusefs.FindMount(mnt); !ok {
		t.Fatalf("not mounted after up --mount:\n%s", out)
	}
	rec, err := fusefs.ReadRecord(mountState(), mnt)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("nacre down: %v\n%s", err, out)
	}
	if _, ok := fusefs.FindMount(mnt); ok {
		t.Fatal("still mounted after down")
	}
	if fusefs.Alive(rec.Pid) {
		t.Fatalf("mount daemon %d still running after down", rec.Pid)
	}
}

// TestFuseMountTwiceIsRefused: a second mount on a mount point is refused
// (it would stack, and one umount would leave the path mounted), and the
// first mount keeps working.
func TestFuseMountTwiceIsRefused(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	out, err := exec.Command(cl.Bin, "mount", "--mgs", cl.MGS, m.Dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "already a mount point") || !strings.Contains(string(out), "nacre umount") {
		t.Fatalf("second nacre mount on %s: err %v, output %q; want a refusal naming nacre umount", m.Dir, err, out)
	}
	if err := os.WriteFile(m.Path("still"), []byte("ok"), 0o644); err != nil {
		t.Fatalf("first mount after the refused one: %v", err)
	}
}
