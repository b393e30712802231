// Package nstest is the namespace conformance suite: POSIX semantics of
// create, mkdir, link, unlink, rmdir, rename, setattr, symlinks, xattrs and
// permissions, written once as a table of scenarios and run against every
// implementation of NS: the bare MDT state machine (internal/mdt) and the
// client library talking to real servers (test/itest).
package nstest

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// NS is the namespace API under test. Errors must unwrap to syscall.Errno.
type NS interface {
	Create(parent fid.FID, name string, mode uint32, excl bool) (*pb.Inode, error)
	Mkdir(parent fid.FID, name string, mode uint32) (*pb.Inode, error)
	Symlink(parent fid.FID, name, target string) (*pb.Inode, error)
	Link(f, parent fid.FID, name string) (*pb.Inode, error)
	Unlink(parent fid.FID, name string) error
	Rmdir(parent fid.FID, name string) error
	Rename(sp fid.FID, sn string, dp fid.FID, dn string, flags uint32) error
	Lookup(parent fid.FID, name string) (*pb.Inode, error)
	Getattr(f fid.FID) (*pb.Inode, error)
	// Readdir returns every name of the directory.
	Readdir(f fid.FID) ([]string, error)
	Setattr(op *pb.SetattrOp) (*pb.Inode, error)
	Setxattr(f fid.FID, name string, value []byte, flags uint32) error
	Getxattr(f fid.FID, name string) ([]byte, error)
	Listxattr(f fid.FID) ([]string, error)
	Removexattr(f fid.FID, name string) error
	// As returns the same file system seen by another user.
	As(uid, gid uint32) NS
}

// env gives scenarios a fresh directory and helpers that fail the test.
type env struct {
	t   *testing.T
	ns  NS
	dir fid.FID
}

func (e *env) must(err error, what string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", what, err)
	}
}

func (e *env) wantErr(err error, want syscall.Errno, what string) {
	e.t.Helper()
	if !errors.Is(err, want) {
		e.t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

func (e *env) file(parent fid.FID, name string) *pb.Inode {
	e.t.Helper()
	ino, err := e.ns.Create(parent, name, syscall.S_IFREG|0o644, true)
	e.must(err, "create "+name)
	return ino
}

func (e *env) mkdir(parent fid.FID, name string) *pb.Inode {
	e.t.Helper()
	ino, err := e.ns.Mkdir(parent, name, 0o755)
	e.must(err, "mkdir "+name)
	return ino
}

func (e *env) lookup(parent fid.FID, name string) *pb.Inode {
	e.t.Helper()
	ino, err := e.ns.Lookup(parent, name)
	e.must(err, "lookup "+name)
	return ino
}

func (e *env) nlink(f fid.FID) uint32 {
	e.t.Helper()
	ino, err := e.ns.Getattr(f)
	e.must(err, "getattr")
	return ino.Nlink
}

func (e *env) names(d fid.FID) string {
	e.t.Helper()
	n, err := e.ns.Readdir(d)
	e.must(err, "readdir")
	sort.Strings(n)
	return strings.Join(n, ",")
}

func id(ino *pb.Inode) fid.FID { return fid.FromPB(ino.Fid) }

// Scenario is one named case of the suite.
type Scenario struct {
	Name string
	Run  func(e *env)
}

// Run runs every scenario in its own fresh directory under the root.
func Run(t *testing.T, ns NS) {
	for i, s := range Scenarios {
		t.Run(s.Name, func(t *testing.T) {
			dir, err := ns.Mkdir(fid.Root, fmt.Sprintf("case%03d", i), 0o777)
			if err != nil {
				t.Fatalf("make case directory: %v", err)
			}
			s.Run(&env{t: t, ns: ns, dir: id(dir)})
		})
	}
}

// Scenarios is the suite.
var Scenarios = []Scenario{
	{"CreateThenLookupGivesSameObject", func(e *env) {
		f := e.file(e.dir, "a")
		got := e.lookup(e.dir, "a")
		if id(got) != id(f) || got.Mode&syscall.S_IFMT != syscall.S_IFREG || got.Nlink != 1 {
			e.t.Fatalf("lookup gave %v", got)
		}
		if _, err := e.ns.Lookup(e.dir, "b"); !errors.Is(err, syscall.ENOENT) {
			e.t.Fatalf("missing name: %v", err)
		}
	}},
	{"CreateExclusiveAndOpenExisting", func(e *env) {
		f := e.file(e.dir, "a")
		_, err := e.ns.Create(e.dir, "a", syscall.S_IFREG|0o644, true)
		e.wantErr(err, syscall.EEXIST, "O_EXCL on an existing name")
		again, err := e.ns.Create(e.dir, "a", syscall.S_IFREG|0o644, false)
		e.must(err, "create without O_EXCL")
		if id(again) != id(f) {
			e.t.Fatal("create without O_EXCL made a new object")
		}
		e.mkdir(e.dir, "d")
		_, err = e.ns.Create(e.dir, "d", syscall.S_IFREG|0o644, false)
		e.wantErr(err, syscall.EISDIR, "open a directory for create")
	}},
	{"InvalidNamesRefused", func(e *env) {
		for _, n := range []string{"", ".", "..", "a/b"} {
			_, err := e.ns.Create(e.dir, n, 0o644, true)
			e.wantErr(err, syscall.EINVAL, fmt.Sprintf("create %q", n))
		}
		_, err := e.ns.Create(e.dir, strings.Repeat("x", 256), 0o644, true)
		e.wantErr(err, syscall.ENAMETOOLONG, "256-byte name")
		_, err = e.ns.Create(e.dir, strings.Repeat("x", 255), 0o644, true)
		e.must(err, "255-byte name")
	}},
	{"CreateUnderFileIsENOTDIR", func(e *env) {
		f := e.file(e.dir, "f")
		_, err := e.ns.Create(id(f), "x", 0o644, true)
		e.wantErr(err, syscall.ENOTDIR, "create below a file")
		_, err = e.ns.Lookup(id(f), "x")
		e.wantErr(err, syscall.ENOTDIR, "lookup below a file")
	}},
	{"MkdirCountsSubdirectoriesInParentNlink", func(e *env) {
		if n := e.nlink(e.dir); n != 2 {
			e.t.Fatalf("empty dir nlink %d", n)
		}
		d := e.mkdir(e.dir, "d1")
		e.mkdir(e.dir, "d2")
		e.file(e.dir, "f")
		if n := e.nlink(e.dir); n != 4 {
			e.t.Fatalf("nlink with two subdirs: %d, want 4", n)
		}
		if d.Nlink != 2 || d.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			e.t.Fatalf("new dir %v", d)
		}
		_, err := e.ns.Mkdir(e.dir, "d1", 0o755)
		e.wantErr(err, syscall.EEXIST, "mkdir existing")
		e.must(e.ns.Rmdir(e.dir, "d1"), "rmdir")
		if n := e.nlink(e.dir); n != 3 {
			e.t.Fatalf("nlink after rmdir: %d", n)
		}
	}},
	{"UnlinkAndRmdirTypeChecks", func(e *env) {
		e.file(e.dir, "f")
		d := e.mkdir(e.dir, "d")
		e.file(id(d), "inner")
		e.wantErr(e.ns.Unlink(e.dir, "d"), syscall.EISDIR, "unlink a directory")
		e.wantErr(e.ns.Rmdir(e.dir, "f"), syscall.ENOTDIR, "rmdir a file")
		e.wantErr(e.ns.Rmdir(e.dir, "d"), syscall.ENOTEMPTY, "rmdir non-empty")
		e.wantErr(e.ns.Unlink(e.dir, "nothing"), syscall.ENOENT, "unlink missing")
		e.must(e.ns.Unlink(id(d), "inner"), "unlink inner")
		e.must(e.ns.Rmdir(e.dir, "d"), "rmdir now empty")
		e.must(e.ns.Unlink(e.dir, "f"), "unlink file")
		if got := e.names(e.dir); got != "" {
			e.t.Fatalf("left behind: %s", got)
		}
		_, err := e.ns.Getattr(id(d))
		e.wantErr(err, syscall.ENOENT, "getattr of removed dir")
	}},
	{"HardLinksShareOneObject", func(e *env) {
		f := e.file(e.dir, "a")
		sub := e.mkdir(e.dir, "sub")
		l, err := e.ns.Link(id(f), id(sub), "b")
		e.must(err, "link")
		if l.Nlink != 2 || id(l) != id(f) {
			e.t.Fatalf("after link: %v", l)
		}
		_, err = e.ns.Link(id(f), e.dir, "sub")
		e.wantErr(err, syscall.EEXIST, "link onto existing name")
		_, err = e.ns.Link(id(sub), e.dir, "dirlink")
		e.wantErr(err, syscall.EPERM, "hard link to a directory")
		e.must(e.ns.Unlink(e.dir, "a"), "unlink first name")
		if n := e.nlink(id(f)); n != 1 {
			e.t.Fatalf("nlink after unlinking one name: %d", n)
		}
		if got := e.lookup(id(sub), "b"); id(got) != id(f) {
			e.t.Fatal("second name lost")
		}
		e.must(e.ns.Unlink(id(sub), "b"), "unlink last name")
		_, err = e.ns.Getattr(id(f))
		e.wantErr(err, syscall.ENOENT, "object after last unlink")
	}},
	{"RenameWithinAndAcrossDirectories", func(e *env) {
		f := e.file(e.dir, "a")
		e.must(e.ns.Rename(e.dir, "a", e.dir, "b", 0), "rename in place")
		if got := e.names(e.dir); got != "b" {
			e.t.Fatalf("names %s", got)
		}
		d := e.mkdir(e.dir, "d")
		e.must(e.ns.Rename(e.dir, "b", id(d), "c", 0), "rename across")
		if got := e.lookup(id(d), "c"); id(got) != id(f) {
			e.t.Fatal("moved file has another identity")
		}
		e.wantErr(e.ns.Rename(e.dir, "b", e.dir, "x", 0), syscall.ENOENT, "rename missing source")
		e.must(e.ns.Rename(id(d), "c", id(d), "c", 0), "rename onto itself")
	}},
	{"RenameReplacesTargetFile", func(e *env) {
		a := e.file(e.dir, "a")
		b := e.file(e.dir, "b")
		e.must(e.ns.Rename(e.dir, "a", e.dir, "b", 0), "replace")
		if got := e.lookup(e.dir, "b"); id(got) != id(a) {
			e.t.Fatal("target not replaced")
		}
		_, err := e.ns.Getattr(id(b))
		e.wantErr(err, syscall.ENOENT, "replaced object must be gone")
		if got := e.names(e.dir); got != "b" {
			e.t.Fatalf("names %s", got)
		}
	}},
	{"RenameDirectoryRules", func(e *env) {
		d1 := e.mkdir(e.dir, "d1")
		e.mkdir(e.dir, "d2")
		full := e.mkdir(e.dir, "full")
		e.file(id(full), "x")
		e.file(e.dir, "f")
		e.wantErr(e.ns.Rename(e.dir, "d1", e.dir, "full", 0), syscall.ENOTEMPTY, "dir onto non-empty dir")
		e.wantErr(e.ns.Rename(e.dir, "d1", e.dir, "f", 0), syscall.ENOTDIR, "dir onto file")
		e.wantErr(e.ns.Rename(e.dir, "f", e.dir, "d2", 0), syscall.EISDIR, "file onto dir")
		e.must(e.ns.Rename(e.dir, "d1", e.dir, "d2", 0), "dir onto empty dir")
		if n := e.nlink(e.dir); n != 4 { // . + d2 + full + parent's entry
			e.t.Fatalf("parent nlink after replacing a dir: %d", n)
		}
		if got := e.lookup(e.dir, "d2"); id(got) != id(d1) {
			e.t.Fatal("d2 is not the old d1")
		}
	}},
	{"RenameDirectoryIntoItselfRefused", func(e *env) {
		a := e.mkdir(e.dir, "a")
		b := e.mkdir(id(a), "b")
		c := e.mkdir(id(b), "c")
		e.wantErr(e.ns.Rename(e.dir, "a", id(c), "a", 0), syscall.EINVAL, "move a below a/b/c")
		e.wantErr(e.ns.Rename(e.dir, "a", id(a), "self", 0), syscall.EINVAL, "move a into a")
		// A legal move of a subtree keeps the link counts right.
		e.must(e.ns.Rename(id(b), "c", e.dir, "c", 0), "move c up")
		if n := e.nlink(id(b)); n != 2 {
			e.t.Fatalf("old parent nlink %d", n)
		}
		if n := e.nlink(e.dir); n != 4 {
			e.t.Fatalf("new parent nlink %d", n)
		}
	}},
	{"RenameNoReplaceAndExchange", func(e *env) {
		a := e.file(e.dir, "a")
		d := e.mkdir(e.dir, "d")
		e.wantErr(e.ns.Rename(e.dir, "a", e.dir, "d", 1), syscall.EEXIST, "RENAME_NOREPLACE")
		e.must(e.ns.Rename(e.dir, "a", e.dir, "d", 2), "RENAME_EXCHANGE")
		if id(e.lookup(e.dir, "a")) != id(d) || id(e.lookup(e.dir, "d")) != id(a) {
			e.t.Fatal("exchange did not swap")
		}
		e.wantErr(e.ns.Rename(e.dir, "a", e.dir, "nothing", 2), syscall.ENOENT, "exchange with missing")
	}},
	{"RenameWhiteoutLeavesACharacterDevice", func(e *env) {
		a := e.file(e.dir, "a")
		e.must(e.ns.Rename(e.dir, "a", e.dir, "b", 4), "RENAME_WHITEOUT")
		if id(e.lookup(e.dir, "b")) != id(a) {
			e.t.Fatal("the file did not move")
		}
		w := e.lookup(e.dir, "a")
		if w.Mode != syscall.S_IFCHR || w.Rdev != 0 || id(w) == id(a) || w.Nlink != 1 {
			e.t.Fatalf("the whiteout left at the old name: %v, want a character device 0:0 with mode 0", w)
		}
		if got := e.names(e.dir); got != "a,b" {
			e.t.Fatalf("names %s", got)
		}
		// It replaces what the new name held, with NOREPLACE refuses to.
		e.file(e.dir, "c")
		e.must(e.ns.Rename(e.dir, "b", e.dir, "c", 4), "RENAME_WHITEOUT over a file")
		e.wantErr(e.ns.Rename(e.dir, "c", e.dir, "a", 4|1), syscall.EEXIST, "RENAME_WHITEOUT|RENAME_NOREPLACE onto a name")
		e.wantErr(e.ns.Rename(e.dir, "c", e.dir, "a", 4|2), syscall.EINVAL, "RENAME_WHITEOUT|RENAME_EXCHANGE")
		if got := e.names(e.dir); got != "a,b,c" {
			e.t.Fatalf("names %s", got)
		}
	}},
	{"RenameBetweenHardLinksIsNoop", func(e *env) {
		f := e.file(e.dir, "a")
		_, err := e.ns.Link(id(f), e.dir, "b")
		e.must(err, "link")
		e.must(e.ns.Rename(e.dir, "a", e.dir, "b", 0), "rename between links")
		if got := e.names(e.dir); got != "a,b" {
			e.t.Fatalf("names %s", got)
		}
		if n := e.nlink(id(f)); n != 2 {
			e.t.Fatalf("nlink %d", n)
		}
	}},
	{"SymlinkKeepsTarget", func(e *env) {
		s, err := e.ns.Symlink(e.dir, "s", "../some/where")
		e.must(err, "symlink")
		got, err := e.ns.Getattr(id(s))
		e.must(err, "getattr")
		if got.Mode&syscall.S_IFMT != syscall.S_IFLNK || string(got.Symlink) != "../some/where" || got.Size != 13 {
			e.t.Fatalf("symlink attrs %v", got)
		}
		_, err = e.ns.Symlink(e.dir, "s", "x")
		e.wantErr(err, syscall.EEXIST, "symlink onto existing")
	}},
	{"SetattrModeOwnerSizeTimes", func(e *env) {
		f := e.file(e.dir, "f")
		got, err := e.ns.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o600})
		e.must(err, "chmod")
		if got.Mode != syscall.S_IFREG|0o600 {
			e.t.Fatalf("mode %o", got.Mode)
		}
		got, err = e.ns.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_UID | pb.SetattrValid_SETATTR_GID), Uid: 1000, Gid: 1000})
		e.must(err, "chown")
		if got.Uid != 1000 || got.Gid != 1000 {
			e.t.Fatalf("owner %d:%d", got.Uid, got.Gid)
		}
		got, err = e.ns.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_MTIME | pb.SetattrValid_SETATTR_ATIME), MtimeNs: 1e18, AtimeNs: 2e18})
		e.must(err, "utimes")
		if got.MtimeNs != 1e18 || got.AtimeNs != 2e18 {
			e.t.Fatalf("times %d %d", got.MtimeNs, got.AtimeNs)
		}
		d := e.mkdir(e.dir, "d")
		_, err = e.ns.Setattr(&pb.SetattrOp{Fid: d.Fid, Valid: uint32(pb.SetattrValid_SETATTR_SIZE), Size: 1})
		e.wantErr(err, syscall.EISDIR, "truncate a directory")
	}},
	{"NonOwnerMayNotChmodOrChown", func(e *env) {
		f := e.file(e.dir, "f")
		u := e.ns.As(1000, 1000)
		_, err := u.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o777})
		e.wantErr(err, syscall.EPERM, "chmod by non-owner")
		_, err = u.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_UID), Uid: 1000})
		e.wantErr(err, syscall.EPERM, "chown by non-root")
	}},
	{"OwnerChecksAreExact", func(e *env) {
		// As Linux: chown and chgrp by a non-owner fail even when they
		// set what is there; truncate(2) needs write access, the owner's
		// too, while a truncate through a file opened for writing
		// (ftruncate) was checked at the open.
		f := e.file(e.dir, "f")
		_, err := e.ns.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_UID | pb.SetattrValid_SETATTR_GID), Uid: 1000, Gid: 1000})
		e.must(err, "chown to 1000:1000")
		other, owner := e.ns.As(2000, 2000), e.ns.As(1000, 1000)
		_, err = other.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_UID), Uid: 1000})
		e.wantErr(err, syscall.EPERM, "chown to the owner it has, by a non-owner")
		_, err = other.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_GID), Gid: 1000})
		e.wantErr(err, syscall.EPERM, "chgrp to the group it has, by a non-owner")
		_, err = owner.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_UID | pb.SetattrValid_SETATTR_GID), Uid: 1000, Gid: 1000})
		e.must(err, "chown to itself by the owner")
		_, err = owner.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o444})
		e.must(err, "chmod 0444 by the owner")
		_, err = owner.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_SIZE), Size: 10})
		e.wantErr(err, syscall.EACCES, "truncate of a 0444 file by its owner")
		_, err = owner.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_SIZE | pb.SetattrValid_SETATTR_OPENED), Size: 10})
		e.must(err, "truncate of a 0444 file by its owner through a file opened for writing")
		got, err := e.ns.Setattr(&pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_SIZE), Size: 20})
		e.must(err, "truncate of a 0444 file by root")
		if got.Size != 20 {
			e.t.Fatalf("size %d after root's truncate to 20", got.Size)
		}
	}},
	{"PermissionsOnDirectories", func(e *env) {
		locked := e.mkdir(e.dir, "locked") // 0755, owned by root
		u := e.ns.As(1000, 1000)
		_, err := u.Create(id(locked), "x", 0o644, true)
		e.wantErr(err, syscall.EACCES, "create in a root 0755 dir as uid 1000")
		own, err := u.Mkdir(e.dir, "mine", 0o700) // case dir is 0777
		e.must(err, "mkdir in a 0777 dir")
		if own.Uid != 1000 || own.Gid != 1000 {
			e.t.Fatalf("new dir owner %d:%d", own.Uid, own.Gid)
		}
		_, err = u.Create(id(own), "x", 0o644, true)
		e.must(err, "create in own dir")
		other := e.ns.As(2000, 2000)
		_, err = other.Lookup(id(own), "x")
		e.wantErr(err, syscall.EACCES, "lookup in another user's 0700 dir")
	}},
	{"StickyDirectoryProtectsOthersFiles", func(e *env) {
		tmp := e.mkdir(e.dir, "tmp")
		_, err := e.ns.Setattr(&pb.SetattrOp{Fid: tmp.Fid, Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o1777})
		e.must(err, "chmod 1777")
		alice, bob := e.ns.As(1001, 1001), e.ns.As(1002, 1002)
		_, err = alice.Create(id(tmp), "a", 0o666, true)
		e.must(err, "alice creates")
		e.wantErr(bob.Unlink(id(tmp), "a"), syscall.EPERM, "bob removes alice's file")
		e.wantErr(bob.Rename(id(tmp), "a", id(tmp), "b", 0), syscall.EPERM, "bob renames alice's file")
		e.must(alice.Unlink(id(tmp), "a"), "alice removes her file")
	}},
	{"XattrsSetGetListRemove", func(e *env) {
		f := e.file(e.dir, "f")
		e.must(e.ns.Setxattr(id(f), "user.k", []byte("v1"), 0), "setxattr")
		e.wantErr(e.ns.Setxattr(id(f), "user.k", []byte("v2"), 1), syscall.EEXIST, "XATTR_CREATE on existing")
		e.wantErr(e.ns.Setxattr(id(f), "user.other", []byte("v"), 2), syscall.ENODATA, "XATTR_REPLACE on missing")
		e.must(e.ns.Setxattr(id(f), "user.k", []byte("v2"), 2), "XATTR_REPLACE")
		v, err := e.ns.Getxattr(id(f), "user.k")
		e.must(err, "getxattr")
		if string(v) != "v2" {
			e.t.Fatalf("value %q", v)
		}
		e.must(e.ns.Setxattr(id(f), "trusted.t", []byte("x"), 0), "trusted as root")
		names, err := e.ns.Listxattr(id(f))
		e.must(err, "listxattr")
		sort.Strings(names)
		if strings.Join(names, ",") != "trusted.t,user.k" {
			e.t.Fatalf("names %v", names)
		}
		e.wantErr(e.ns.As(1000, 1000).Setxattr(id(f), "trusted.u", []byte("x"), 0), syscall.EPERM, "trusted as non-root")
		e.must(e.ns.Removexattr(id(f), "user.k"), "removexattr")
		_, err = e.ns.Getxattr(id(f), "user.k")
		e.wantErr(err, syscall.ENODATA, "getxattr after remove")
		e.wantErr(e.ns.Removexattr(id(f), "user.k"), syscall.ENODATA, "remove missing")
	}},
	{"ReaddirListsEveryName", func(e *env) {
		want := []string{}
		for i := 0; i < 300; i++ {
			n := fmt.Sprintf("entry-%04d", i)
			want = append(want, n)
			if i%3 == 0 {
				e.mkdir(e.dir, n)
			} else {
				e.file(e.dir, n)
			}
		}
		sort.Strings(want)
		if got := e.names(e.dir); got != strings.Join(want, ",") {
			e.t.Fatalf("readdir gave %d names", len(strings.Split(got, ",")))
		}
	}},
}
