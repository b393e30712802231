package itest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestAHeldFileOutlivesItsRemovalElsewhere: a library user (nacre get,
// cat) holding a file reads it to the end although another client
// removed its last name meanwhile, as a mount's open file and as on
// Lustre; once released it is destroyed. Before, `nacre get` of a file
// removed under it failed halfway with ENOENT from the OST.
func TestAHeldFileOutlivesItsRemovalElsewhere(t *testing.T) {
	// Past a new leader's grace, in which it keeps every removed file.
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2, Env: []string{"NACRE_OPEN_GRACE=100ms"}})
	ctx := context.Background()
	reader, remover := cl.Client(t), cl.Client(t)
	data := bytes.Repeat([]byte("held while read\n"), 1<<16) // 1 MiB
	ino := createIn(t, remover, fid.Root, "f", data)
	f := fid.FromPB(ino.Fid)

	got, release, err := reader.Hold(ctx, f)
	if err != nil {
		t.Fatalf("hold: %v", err)
	}
	if got == nil || got.Size != uint64(len(data)) {
		t.Fatalf("hold gave %v, want the file's attributes (size %d)", got, len(data))
	}
	if _, err := remover.Unlink(ctx, fid.Root, "f"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the MDT would have destroyed it by now
	buf := make([]byte, len(data)+1)
	n, err := reader.OpenInode(ino).ReadAt(ctx, buf, 0)
	if (err != nil && !errors.Is(err, io.EOF)) || !bytes.Equal(buf[:n], data) {
		t.Fatalf("the held file, removed elsewhere, reads %d bytes (%v), want its %d", n, err, len(data))
	}

	release()
	gone(t, reader, f, "10 s after release, the removed file")

	// A file removed (and destroyed) before the hold is not held.
	createIn(t, remover, fid.Root, "g", data)
	g, err := remover.Lookup(ctx, fid.Root, "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remover.Unlink(ctx, fid.Root, "g"); err != nil {
		t.Fatal(err)
	}
	gone(t, reader, fid.FromPB(g.Fid), "10 s after its removal, g")
	if _, _, err := reader.Hold(ctx, fid.FromPB(g.Fid)); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("hold of a removed file: %v, want ENOENT", err)
	}
}

// gone waits until f is destroyed.
func gone(t *testing.T, c *client.Client, f fid.FID, what string) {
	t.Helper()
	wait.NoErr(t, 10*time.Second, what+" to be destroyed", func() error {
		if _, err := c.Getattr(context.Background(), f); !errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("getattr: %v", err)
		}
		return nil
	})
}
