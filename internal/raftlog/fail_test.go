package raftlog

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncFailFS makes every data sync fail while broken is set, as a disk
// that returns EIO does.
type syncFailFS struct {
	vfs.FS
	broken *atomic.Bool
	syncs  *atomic.Int64 // syncs attempted while broken
}

type syncFailFile struct {
	vfs.File
	fs *syncFailFS
}

var errInjectedEIO = errors.New("injected EIO")

func (f syncFailFile) check() error {
	if f.fs.broken.Load() {
		f.fs.syncs.Add(1)
		return errInjectedEIO
	}
	return nil
}

func (f syncFailFile) Sync() error {
	if err := f.check(); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f syncFailFile) SyncData() error {
	if err := f.check(); err != nil {
		return err
	}
	return f.File.SyncData()
}

func (fs *syncFailFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, c, opts...)
	if err != nil {
		return nil, err
	}
	return syncFailFile{File: f, fs: fs}, nil
}

// TestAFailedSyncMakesTheLogRefuseFurtherUse: after an fsync fails, the
// kernel may have dropped the pages and marked them clean, so a retried
// fsync can succeed without the records being on disk. The log must not
// acknowledge anything after such a failure, nor sync again on Close; it
// refuses every use, naming the first failure, until it is reopened.
func TestAFailedSyncMakesTheLogRefuseFurtherUse(t *testing.T) {
	var broken atomic.Bool
	var syncs atomic.Int64
	fs := &syncFailFS{FS: vfs.NewMem(), broken: &broken, syncs: &syncs}
	l, _ := open(t, fs, Options{SegmentSize: 1 << 16})
	l.SetPrologue(func(func(byte, []byte)) {})
	add(t, l, 'E', "durable")
	if err := l.Write(true); err != nil {
		t.Fatal(err)
	}
	broken.Store(true)
	add(t, l, 'E', "lost")
	if err := l.Write(true); !errors.Is(err, errInjectedEIO) {
		t.Fatalf("Write with a failing sync: %v, want the injected EIO", err)
	}
	broken.Store(false) // a retry would now "succeed"
	for name, err := range map[string]error{
		"Write":   l.Write(true),
		"Add":     func() error { _, err := l.Add('E', []byte("after")); return err }(),
		"Release": l.Release(l.ActiveSeq()),
	} {
		if err == nil || !strings.Contains(err.Error(), "unusable after an earlier failure") || !strings.Contains(err.Error(), "injected EIO") {
			t.Errorf("%s after a failed sync: %v, want a refusal naming the first failure", name, err)
		}
	}
	broken.Store(true)
	before := syncs.Load()
	if err := l.Close(); err != nil {
		t.Errorf("Close after a failure: %v (it should only close the files)", err)
	}
	if syncs.Load() != before {
		t.Errorf("Close synced again after a failed sync")
	}
	broken.Store(false)
	l, got := open(t, fs, Options{SegmentSize: 1 << 16})
	defer l.Close()
	if p := payloads(got, 'E'); len(p) == 0 || p[0] != "durable" {
		t.Fatalf("reopened log holds %q, want the synced record first", p)
	}
}

// fullFS is a device with no space left: writes to new files fail with
// ENOSPC.
type fullFS struct{ vfs.FS }

type fullFile struct{ vfs.File }

func (f fullFile) Write(p []byte) (int, error)              { return 0, syscall.ENOSPC }
func (f fullFile) WriteAt(p []byte, off int64) (int, error) { return 0, syscall.ENOSPC }
func (fs fullFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, c)
	if err != nil {
		return nil, err
	}
	return fullFile{f}, nil
}

// TestAFullDeviceSaysWhatToDo: a replica whose log device is full stops
// with an error that says so and what to do (before: the bare ENOSPC of
// a file named prep-0).
func TestAFullDeviceSaysWhatToDo(t *testing.T) {
	_, err := Open(fullFS{vfs.NewMem()}, "log", Options{SegmentSize: 1 << 16}, func(Record) error { return nil })
	if err == nil {
		t.Fatal("a log opened on a full device")
	}
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "is full; free space there") {
		t.Fatalf("open on a full device: %v, want ENOSPC with what to do", err)
	}
}
