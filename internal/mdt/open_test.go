package mdt

import (
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
)

type openHarness struct {
	t   *testing.T
	d   *Direct
	req uint64
}

func (h *openHarness) do(client uint64, op any) *pb.Reply {
	h.t.Helper()
	h.req++
	cmd := &pb.Command{ClientId: client, RequestId: h.req, Cred: &pb.Cred{}}
	switch o := op.(type) {
	case *pb.CreateOp:
		o.Osts = []uint32{0, 1}
		cmd.Op = &pb.Command_Create{Create: o}
	case *pb.OpenUnlinkOp:
		cmd.Op = &pb.Command_OpenUnlink{OpenUnlink: o}
	case *pb.OpenRenameOp:
		cmd.Op = &pb.Command_OpenRename{OpenRename: o}
	case *pb.TmpfileOp:
		o.Osts = []uint32{0, 1}
		cmd.Op = &pb.Command_Tmpfile{Tmpfile: o}
	case *pb.OrphanReleaseOp:
		cmd.Op = &pb.Command_OrphanRelease{OrphanRelease: o}
	case *pb.LinkOp:
		cmd.Op = &pb.Command_Link{Link: o}
	case *pb.UnlinkOp:
		cmd.Op = &pb.Command_Unlink{Unlink: o}
	default:
		h.t.Fatalf("op %T", op)
	}
	r, err := h.d.Do(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *openHarness) create(name string, mode uint32) *pb.Inode {
	h.t.Helper()
	r := h.do(1, &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte(name), Mode: mode, Exclusive: true})
	if r.Errno != 0 {
		h.t.Fatalf("create %s: %s", name, r.Message)
	}
	return r.Inode
}

func (h *openHarness) destroyQueued() int {
	q, err := h.d.T.DestroyQueue(1000)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(q)
}

func TestOpenUnlinkKeepsTheFileUntilRelease(t *testing.T) {
	h := &openHarness{t: t, d: newDirect(t, 2)}
	ino := h.create("f", syscall.S_IFREG|0o644)
	f := fid.FromPB(ino.Fid)
	r := h.do(1, &pb.OpenUnlinkOp{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte("f")}, Open: []*pb.FID{ino.Fid}})
	if r.Errno != 0 || r.Inode.Nlink != 0 {
		t.Fatalf("unlink: %+v", r)
	}
	if _, err := h.d.T.Lookup(fid.Root, "f", nil); err == nil {
		t.Fatal("name still there")
	}
	got, err := h.d.T.Getattr(f, false)
	if err != nil || got.Nlink != 0 || got.Layout == nil {
		t.Fatalf("orphan: %+v %v", got, err)
	}
	if !PendingOrphan(h.d.T.DB(), f) || h.destroyQueued() != 0 {
		t.Fatal("not recorded as an orphan, or objects queued")
	}
	// Another client cannot release it.
	h.do(2, &pb.OrphanReleaseOp{Fids: []*pb.FID{ino.Fid}})
	if _, err := h.d.T.Getattr(f, false); err != nil {
		t.Fatal("released by another client")
	}
	h.do(1, &pb.OrphanReleaseOp{Fids: []*pb.FID{ino.Fid}})
	if _, err := h.d.T.Getattr(f, false); err == nil {
		t.Fatal("still there after release")
	}
	if PendingOrphan(h.d.T.DB(), f) || h.destroyQueued() != 1 {
		t.Fatal("record left or objects not queued")
	}
}

func TestOpenUnlinkOfAFileNotOpenDestroysIt(t *testing.T) {
	h := &openHarness{t: t, d: newDirect(t, 2)}
	a := h.create("a", syscall.S_IFREG|0o644)
	h.create("b", syscall.S_IFREG|0o644)
	r := h.do(1, &pb.OpenUnlinkOp{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte("b")}, Open: []*pb.FID{a.Fid}})
	if r.Errno != 0 || h.destroyQueued() != 1 {
		t.Fatalf("unlink b: %+v, queued %d", r, h.destroyQueued())
	}
	// A failing unlink leaves the pinned file as it was.
	r = h.do(1, &pb.OpenUnlinkOp{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte("a"), Dir: true}, Open: []*pb.FID{a.Fid}})
	if r.Errno != int32(syscall.ENOTDIR) {
		t.Fatalf("rmdir of a file: %+v", r)
	}
	if got, _ := h.d.T.Getattr(fid.FromPB(a.Fid), false); got.Nlink != 1 {
		t.Fatalf("nlink after failed unlink: %d", got.Nlink)
	}
}

func TestOpenRenameKeepsReplacedFileAndDirectory(t *testing.T) {
	h := &openHarness{t: t, d: newDirect(t, 2)}
	h.create("src", syscall.S_IFREG|0o644)
	dst := h.create("dst", syscall.S_IFREG|0o644)
	r := h.do(1, &pb.OpenRenameOp{Rename: &pb.RenameOp{SrcParent: fid.Root.PB(), SrcName: []byte("src"), DstParent: fid.Root.PB(), DstName: []byte("dst")}, Open: []*pb.FID{dst.Fid}})
	if r.Errno != 0 {
		t.Fatal(r.Message)
	}
	if got, err := h.d.T.Getattr(fid.FromPB(dst.Fid), false); err != nil || got.Nlink != 0 {
		t.Fatalf("replaced file: %+v %v", got, err)
	}
	// Directories: dir1 over an open empty dir2.
	h.create("dir1", syscall.S_IFDIR|0o755)
	d2 := h.create("dir2", syscall.S_IFDIR|0o700)
	h.d.Do(&pb.Command{ClientId: 1, RequestId: 999, Cred: &pb.Cred{}, Op: &pb.Command_Setxattr{Setxattr: &pb.SetxattrOp{Fid: d2.Fid, Name: []byte("user.x"), Value: []byte("v")}}})
	inodes := h.d.T.Inodes()
	r = h.do(1, &pb.OpenRenameOp{Rename: &pb.RenameOp{SrcParent: fid.Root.PB(), SrcName: []byte("dir1"), DstParent: fid.Root.PB(), DstName: []byte("dir2")}, Open: []*pb.FID{d2.Fid}})
	if r.Errno != 0 {
		t.Fatal(r.Message)
	}
	got, err := h.d.T.Getattr(fid.FromPB(d2.Fid), false)
	if err != nil || got.Nlink != 0 || got.Mode != syscall.S_IFDIR|0o700 {
		t.Fatalf("replaced directory: %+v %v", got, err)
	}
	if v, err := h.d.T.Getxattr(fid.FromPB(d2.Fid), "user.x", nil); err != nil || string(v) != "v" {
		t.Fatalf("xattr of the kept directory: %q %v", v, err)
	}
	if h.d.T.Inodes() != inodes {
		t.Fatalf("inode count %d, want %d", h.d.T.Inodes(), inodes)
	}
	h.do(1, &pb.OrphanReleaseOp{Fids: []*pb.FID{dst.Fid, d2.Fid}})
	for _, f := range []*pb.FID{dst.Fid, d2.Fid} {
		if _, err := h.d.T.Getattr(fid.FromPB(f), false); err == nil {
			t.Fatalf("%s still there", fid.FromPB(f))
		}
	}
	if h.d.T.Inodes() != inodes-2 {
		t.Fatalf("inode count %d after release, want %d", h.d.T.Inodes(), inodes-2)
	}
}

func TestTmpfileIsAnOrphanUntilLinked(t *testing.T) {
	h := &openHarness{t: t, d: newDirect(t, 2)}
	r := h.do(1, &pb.TmpfileOp{Parent: fid.Root.PB(), Mode: 0o600})
	if r.Errno != 0 || r.Inode.Nlink != 0 || r.Inode.Layout == nil {
		t.Fatalf("tmpfile: %+v", r)
	}
	ents, _, err := h.d.T.Readdir(fid.Root, 0, 100, false, nil)
	if err != nil || len(ents) != 0 {
		t.Fatalf("root lists %v %v", ents, err)
	}
	// linkat(AT_EMPTY_PATH) gives it a name; the release keeps it.
	if r := h.do(1, &pb.LinkOp{Fid: r.Inode.Fid, Parent: fid.Root.PB(), Name: []byte("kept")}); r.Errno != 0 {
		t.Fatal(r.Message)
	}
	h.do(1, &pb.OrphanReleaseOp{Fids: []*pb.FID{r.Inode.Fid}})
	got, err := h.d.T.Lookup(fid.Root, "kept", nil)
	if err != nil || got.Nlink != 1 || PendingOrphan(h.d.T.DB(), fid.FromPB(got.Fid)) {
		t.Fatalf("linked tmpfile: %+v %v", got, err)
	}
	// Another tmpfile, released unlinked, is gone.
	r2 := h.do(1, &pb.TmpfileOp{Parent: fid.Root.PB(), Mode: 0o600})
	h.do(1, &pb.OrphanReleaseOp{Fids: []*pb.FID{r2.Inode.Fid}})
	if _, err := h.d.T.Getattr(fid.FromPB(r2.Inode.Fid), false); err == nil {
		t.Fatal("released tmpfile still there")
	}
	os, err := h.d.T.Orphans(0)
	if err != nil || len(os) != 0 {
		t.Fatalf("orphans left: %v %v", os, err)
	}
	var _ kv.Reader = h.d.T.DB()
}
