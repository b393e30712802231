package mdt

import (
	"fmt"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// permNS is a namespace whose root is world-writable, with root's view n
// and uid 1000's u.
func permNS(t *testing.T) (n, u directNS) {
	t.Helper()
	var req uint64
	n = directNS{d: newDirect(t, 2), cred: &pb.Cred{}, osts: []uint32{0, 1}, req: &req}
	if _, err := n.Setattr(&pb.SetattrOp{Fid: fid.Root.PB(), Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	return n, n.As(1000, 1000).(directNS)
}

// mk makes an object of n's user with exactly mode (type bits and all).
func mk(t *testing.T, n directNS, parent fid.FID, name string, mode uint32) fid.FID {
	t.Helper()
	ino, err := n.inode(&pb.CreateOp{Parent: parent.PB(), Name: []byte(name), Mode: mode, Exclusive: true})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	f := fid.FromPB(ino.Fid)
	if _, err := n.Setattr(&pb.SetattrOp{Fid: f.PB(), Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: mode & 0o7777}); err != nil {
		t.Fatalf("chmod %s: %v", name, err)
	}
	return f
}

// protected_hardlinks: another user's file is linked only by root, its
// owner, or one who may read and write it, and never if it is special,
// set-user-ID or executable set-group-ID (EPERM, as Linux with
// fs.protected_hardlinks = 1).
func TestLinkProtectedHardlinks(t *testing.T) {
	n, u := permNS(t)
	d := mk(t, n, fid.Root, "d", syscall.S_IFDIR|0o777)
	mine := mk(t, u, d, "mine", 0o400)
	for _, c := range []struct {
		name string
		mode uint32
		ok   bool
	}{
		{"secret", 0o600, false},
		{"readonly", 0o644, false},
		{"shared", 0o666, true},
		{"suid", 0o4666, false},
		{"sgidexec", 0o2676, false},
		{"sgid", 0o2666, true},
		{"fifo", syscall.S_IFIFO | 0o666, false},
	} {
		f := mk(t, n, d, c.name, c.mode)
		_, err := u.Link(f, d, c.name+".link")
		if c.ok && err != nil {
			t.Errorf("uid 1000 linking root's %s (%o): %v", c.name, c.mode, err)
		}
		if !c.ok {
			wantErrno(t, "uid 1000 linking root's "+c.name, err, syscall.EPERM)
			if _, err := n.Link(f, d, c.name+".root"); err != nil {
				t.Errorf("root linking %s: %v", c.name, err)
			}
		}
	}
	if _, err := u.Link(mine, d, "mine.link"); err != nil {
		t.Errorf("uid 1000 linking its own 0400 file: %v", err)
	}
}

// utimensat with one time now and the other left alone is a choice of
// times, the owner's (EPERM); a writer sets both to now (touch), and a
// write-like change (with the change time) moves mtime.
func TestSetOneTimeNowIsTheOwners(t *testing.T) {
	n, u := permNS(t)
	f := mk(t, n, fid.Root, "f", 0o666)
	ro := mk(t, n, fid.Root, "ro", 0o644)
	set := func(ns directNS, f fid.FID, v ...pb.SetattrValid) error {
		var valid uint32
		for _, b := range v {
			valid |= uint32(b)
		}
		_, err := ns.Setattr(&pb.SetattrOp{Fid: f.PB(), Valid: valid})
		return err
	}
	const aNow, mNow, cNow = pb.SetattrValid_SETATTR_ATIME_NOW, pb.SetattrValid_SETATTR_MTIME_NOW, pb.SetattrValid_SETATTR_CTIME_NOW
	if err := set(u, f, aNow, mNow); err != nil {
		t.Errorf("a writer's touch: %v", err)
	}
	wantErrno(t, "a writer setting mtime alone to now", set(u, f, mNow), syscall.EPERM)
	wantErrno(t, "a writer setting atime alone to now", set(u, f, aNow), syscall.EPERM)
	wantErrno(t, "a reader's touch", set(u, ro, aNow, mNow), syscall.EACCES)
	wantErrno(t, "a reader setting mtime alone to now", set(u, ro, mNow), syscall.EPERM)
	if err := set(u, f, mNow, cNow); err != nil {
		t.Errorf("a writer's modification time (O_TRUNC, fallocate): %v", err)
	}
	wantErrno(t, "a reader's modification time", set(u, ro, mNow, cNow), syscall.EACCES)
	own := mk(t, u, fid.Root, "own", 0o444)
	if err := set(u, own, mNow); err != nil {
		t.Errorf("the owner setting mtime alone to now: %v", err)
	}
	if err := set(n, ro, aNow); err != nil {
		t.Errorf("root setting atime alone to now: %v", err)
	}
}

// A rename or exchange that moves a directory to another parent changes
// its "..": the caller must be able to write that directory (EACCES), on
// both sides of an exchange; the sticky rule holds on both sides too.
func TestExchangeMovesOnlyWritableDirectories(t *testing.T) {
	n, u := permNS(t)
	a := mk(t, n, fid.Root, "a", syscall.S_IFDIR|0o777)
	b := mk(t, n, fid.Root, "b", syscall.S_IFDIR|0o777)
	mk(t, u, a, "f", 0o644)
	mk(t, n, b, "rootdir", syscall.S_IFDIR|0o755)
	mk(t, u, b, "mydir", syscall.S_IFDIR|0o755)
	wantErrno(t, "exchange moving root's directory", u.Rename(a, "f", b, "rootdir", renameExchange), syscall.EACCES)
	wantErrno(t, "exchange moving root's directory (as source)", u.Rename(b, "rootdir", a, "f", renameExchange), syscall.EACCES)
	wantErrno(t, "rename moving root's directory", u.Rename(b, "rootdir", a, "moved", 0), syscall.EACCES)
	if err := u.Rename(a, "f", b, "mydir", renameExchange); err != nil {
		t.Fatalf("exchange moving uid 1000's own directory: %v", err)
	}
	// a/f is uid 1000's directory now, b/mydir its file.
	if err := n.Rename(a, "f", b, "rootdir", renameExchange); err != nil {
		t.Fatalf("root's exchange: %v", err)
	}
	// Sticky: root's file in a sticky directory, either side.
	s := mk(t, n, fid.Root, "s", syscall.S_IFDIR|0o1777)
	mk(t, n, s, "rootfile", 0o666)
	mk(t, u, a, "g", 0o644)
	wantErrno(t, "exchange with root's file in a sticky directory", u.Rename(a, "g", s, "rootfile", renameExchange), syscall.EPERM)
	wantErrno(t, "exchange of root's file in a sticky directory", u.Rename(s, "rootfile", a, "g", renameExchange), syscall.EPERM)
}

// Only the owner of a sticky directory and root write its user xattrs
// (EPERM for others, who may write the directory), as Linux's
// xattr_permission.
func TestUserXattrOnStickyDirectory(t *testing.T) {
	n, u := permNS(t)
	tmp := mk(t, n, fid.Root, "tmp", syscall.S_IFDIR|0o1777)
	open := mk(t, n, fid.Root, "open", syscall.S_IFDIR|0o777)
	mine := mk(t, u, fid.Root, "mine", syscall.S_IFDIR|0o1777)
	wantErrno(t, "uid 1000 setting user.k on root's sticky directory", u.Setxattr(tmp, "user.k", []byte("v"), 0), syscall.EPERM)
	if err := n.Setxattr(tmp, "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "uid 1000 removing user.k of root's sticky directory", u.Removexattr(tmp, "user.k"), syscall.EPERM)
	if err := u.Setxattr(open, "user.k", []byte("v"), 0); err != nil {
		t.Errorf("uid 1000 setting user.k on a 0777 directory: %v", err)
	}
	if err := u.Setxattr(mine, "user.k", []byte("v"), 0); err != nil {
		t.Errorf("uid 1000 setting user.k on its own sticky directory: %v", err)
	}
	if v, err := u.Getxattr(tmp, "user.k"); err != nil || string(v) != "v" {
		t.Errorf("uid 1000 reading user.k of root's sticky directory: %q %v", v, err)
	}
}

// O_TMPFILE makes a file in a directory as create does: it needs write and
// search permission there (EACCES), as on Linux (vfs_tmpfile).
func TestTmpfileNeedsWriteAndSearch(t *testing.T) {
	n, u := permNS(t)
	for _, c := range []struct {
		mode uint32
		ok   bool
	}{{0o755, false}, {0o776, false}, {0o733, true}, {0o777, true}} {
		d := mk(t, n, fid.Root, fmt.Sprintf("d%o", c.mode), syscall.S_IFDIR|c.mode)
		_, err := u.do(&pb.TmpfileOp{Parent: d.PB(), Mode: 0o600})
		if c.ok && err != nil {
			t.Errorf("uid 1000's tmpfile in a %o directory: %v", c.mode, err)
		}
		if !c.ok {
			wantErrno(t, fmt.Sprintf("uid 1000's tmpfile in a %o directory", c.mode), err, syscall.EACCES)
		}
	}
}
