package itest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// highBytes is n bytes cycling through 0x80..0xff: not UTF-8 anywhere.
func highBytes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 0x80 + byte(i%128)
	}
	return string(b)
}

// variant derives another name of at most 255 bytes from name.
func variant(prefix, name string) string {
	s := prefix + name
	if len(s) > 255 {
		s = s[:255]
	}
	return s
}

// nameCases are POSIX names that are not UTF-8 (and one that is), with
// symlink targets of the same kind.
var nameCases = []struct {
	desc, name, target string
}{
	{"latin-1", "caf\xe9", "../caf\xe9/na\xefve"},
	{"ff fe", "\xff\xfe", "/\xff\xfe/\xfe\xff"},
	{"255 high bytes", highBytes(255), highBytes(4095)},
	{"utf-8", "café ☕", "/tmp/café"},
}

func sortedStrings(s ...string) []string {
	sort.Strings(s)
	return s
}

func sameStrings(got, want []string) bool {
	return len(got) == len(want) && strings.Join(got, "\x00") == strings.Join(want, "\x00")
}

// TestNamesAreBytesThroughServers: names that are not UTF-8 go through the
// client library and the servers (gRPC, Raft, the MDT store) and come back
// byte for byte: lookup, readdir, linkEA, fid2path, symlink targets,
// xattr names, rename, link, unlink; and through the CLI.
func TestNamesAreBytesThroughServers(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	c := cl.Client(t)
	ctx := client.WithCred(context.Background(), &pb.Cred{})
	ns := clientNS{c: c, ctx: ctx}
	for i, tc := range nameCases {
		t.Run(tc.desc, func(t *testing.T) {
			must := func(err error, what string) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			wantErrno := func(err error, want syscall.Errno, what string) {
				t.Helper()
				if !errors.Is(err, want) {
					t.Fatalf("%s: got %v, want %v", what, err, want)
				}
			}
			eq := func(what string, got, want []string) {
				t.Helper()
				if !sameStrings(got, want) {
					t.Fatalf("%s: got %q, want %q", what, got, want)
				}
			}
			dirName := "\xe9t\xe9" + string(rune('0'+i))
			di, err := c.Mkdir(ctx, fid.Root, dirName, 0o755)
			must(err, "mkdir")
			dir := fid.FromPB(di.Fid)
			readdir := func() []string {
				t.Helper()
				names, err := ns.Readdir(dir) // pages of 13: cookies
				must(err, "readdir")
				sort.Strings(names)
				return names
			}
			links := func(f fid.FID) []string {
				t.Helper()
				ino, err := c.GetattrLinks(ctx, f)
				must(err, "getattr with links")
				var out []string
				for _, l := range ino.Links {
					out = append(out, string(l.Name))
				}
				sort.Strings(out)
				return out
			}
			paths := func(f fid.FID) []string {
				t.Helper()
				p, err := c.Fid2Path(ctx, f)
				must(err, "fid2path")
				sort.Strings(p)
				return p
			}
			in := func(n string) string { return "/" + dirName + "/" + n }

			fi, _, err := c.Create(ctx, dir, tc.name, 0o644, client.CreateOpts{Exclusive: true})
			must(err, "create")
			f := fid.FromPB(fi.Fid)
			li, err := c.Lookup(ctx, dir, tc.name)
			must(err, "lookup")
			if fid.FromPB(li.Fid) != f {
				t.Fatalf("lookup finds %s, created %s", fid.FromPB(li.Fid), f)
			}
			ri, err := c.Resolve(ctx, in(tc.name), false)
			must(err, "resolve the path")
			if fid.FromPB(ri.Fid) != f {
				t.Fatalf("resolve finds %s, created %s", fid.FromPB(ri.Fid), f)
			}
			eq("readdir", readdir(), []string{tc.name})
			plus, err := c.ReadDirAll(ctx, dir, true)
			must(err, "readdirplus")
			if len(plus) != 1 || string(plus[0].Name) != tc.name || plus[0].Inode == nil || fid.FromPB(plus[0].Fid) != f {
				t.Fatalf("readdirplus: %v", plus)
			}
			eq("linkEA", links(f), []string{tc.name})
			eq("fid2path", paths(f), []string{in(tc.name)})

			symName := variant("s", tc.name)
			si, err := c.Symlink(ctx, dir, symName, tc.target)
			must(err, "symlink")
			target, err := c.Readlink(ctx, fid.FromPB(si.Fid))
			must(err, "readlink")
			if target != tc.target {
				t.Fatalf("readlink %q, want %q", target, tc.target)
			}

			linkName := variant("h", tc.name)
			_, err = c.Link(ctx, f, dir, linkName)
			must(err, "link")
			eq("linkEA after link", links(f), sortedStrings(tc.name, linkName))
			eq("fid2path after link", paths(f), sortedStrings(in(tc.name), in(linkName)))

			renamed := variant("r", tc.name)
			must(c.Rename(ctx, dir, tc.name, dir, renamed, 0), "rename")
			_, err = c.Lookup(ctx, dir, tc.name)
			wantErrno(err, syscall.ENOENT, "lookup of the old name")
			eq("readdir after rename", readdir(), sortedStrings(renamed, linkName, symName))
			eq("linkEA after rename", links(f), sortedStrings(renamed, linkName))
			eq("fid2path after rename", paths(f), sortedStrings(in(renamed), in(linkName)))

			xname := variant("user.", tc.name)
			must(c.Setxattr(ctx, f, xname, []byte("v"), 1), "setxattr")
			xv, err := c.Getxattr(ctx, f, xname)
			must(err, "getxattr")
			if string(xv) != "v" {
				t.Fatalf("getxattr %q", xv)
			}
			xl, err := c.Listxattr(ctx, f)
			must(err, "listxattr")
			eq("listxattr", xl, []string{xname})
			must(c.Removexattr(ctx, f, xname), "removexattr")

			long := tc.name + highBytes(256-len(tc.name))
			_, _, err = c.Create(ctx, dir, long, 0o644, client.CreateOpts{Exclusive: true})
			wantErrno(err, syscall.ENAMETOOLONG, "create of a 256-byte name")
			_, err = c.Lookup(ctx, dir, long)
			wantErrno(err, syscall.ENAMETOOLONG, "lookup of a 256-byte name")
			wantErrno(c.Rename(ctx, dir, renamed, dir, long, 0), syscall.ENAMETOOLONG, "rename to a 256-byte name")

			_, err = c.Unlink(ctx, dir, linkName)
			must(err, "unlink")
			eq("linkEA after unlink", links(f), []string{renamed})
			_, err = c.Unlink(ctx, dir, renamed)
			must(err, "unlink the last name")
			_, err = c.Unlink(ctx, dir, symName)
			must(err, "unlink the symlink")
			eq("readdir at the end", readdir(), nil)
			must(c.Rmdir(ctx, fid.Root, dirName), "rmdir")
		})
	}

	// The CLI: plain output prints the names' bytes; JSON stays valid
	// (bytes that are not UTF-8 become U+FFFD).
	run := func(args ...string) string {
		t.Helper()
		out, err := cl.Run(args...)
		if err != nil {
			t.Fatalf("nacre %q: %v\n%s", args, err, out)
		}
		return out
	}
	local := filepath.Join(t.TempDir(), "src")
	os.WriteFile(local, []byte("bytes, not UTF-8\n"), 0o644)
	run("mkdir", "/cli\xe9")
	run("put", local, "/cli\xe9/caf\xe9")
	run("ln", "-s", "caf\xe9", "/cli\xe9/\xff\xfe")
	if got := run("cat", "/cli\xe9/\xff\xfe"); got != "bytes, not UTF-8\n" {
		t.Fatalf("cat through the symlink: %q", got)
	}
	if got := run("ls", "/cli\xe9"); got != "caf\xe9\n\xff\xfe\n" {
		t.Fatalf("ls: %q", got)
	}
	if got := run("ls", "-l", "/cli\xe9"); !strings.Contains(got, " caf\xe9\n") || !strings.Contains(got, " \xff\xfe -> caf\xe9\n") {
		t.Fatalf("ls -l: %q", got)
	}
	f := strings.TrimSpace(run("path2fid", "/cli\xe9/caf\xe9"))
	if got := run("fid2path", f); got != "/cli\xe9/caf\xe9\n" {
		t.Fatalf("fid2path: %q", got)
	}
	if got := run("stat", "/cli\xe9/\xff\xfe"); !strings.Contains(got, "File: /cli\xe9/\xff\xfe -> caf\xe9\n") {
		t.Fatalf("stat: %q", got)
	}
	var st cli.StatInfo
	if err := json.Unmarshal([]byte(run("stat", "--json", "/cli\xe9/\xff\xfe")), &st); err != nil {
		t.Fatalf("stat --json is not JSON: %v", err)
	}
	if st.Path != "/cli\uFFFD/\uFFFD\uFFFD" || st.Target != "caf\uFFFD" {
		t.Fatalf("stat --json: path %q target %q", st.Path, st.Target)
	}
	// ls --json carries the bytes of a name that is not UTF-8 too.
	var ents []cli.LsEntry
	if err := json.Unmarshal([]byte(run("ls", "--json", "/cli\xe9")), &ents); err != nil {
		t.Fatalf("ls --json is not JSON: %v", err)
	}
	for _, en := range ents {
		b, err := base64.StdEncoding.DecodeString(en.NameBase64)
		if err != nil || (string(b) != "caf\xe9" && string(b) != "\xff\xfe") {
			t.Errorf("ls --json entry %q: name_base64 %q (%v) does not hold its bytes", en.Name, en.NameBase64, err)
		}
	}
	run("mv", "/cli\xe9/caf\xe9", "/cli\xe9/"+highBytes(255))
	if got := run("ls", "/cli\xe9"); got != highBytes(255)+"\n\xff\xfe\n" {
		t.Fatalf("ls after mv: %q", got)
	}
	if out, err := cl.Run("mv", "/cli\xe9/"+highBytes(255), "/cli\xe9/"+highBytes(256)); err == nil {
		t.Fatalf("mv to a 256-byte name succeeded: %s", out)
	}
	run("rm", "-r", "/cli\xe9")
}

// TestFuseNamesAreBytes: through the mount, a file named with Latin-1
// bytes is created, listed, renamed and read back with its exact bytes;
// a name of 256 bytes is ENAMETOOLONG.
func TestFuseNamesAreBytes(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl)
	data := []byte("caf\xe9 au lait\n")
	if err := os.WriteFile(m.Path("caf\xe9"), data, 0o644); err != nil {
		t.Fatalf("create caf\\xe9: %v", err)
	}
	list := func() []string {
		t.Helper()
		ents, err := os.ReadDir(m.Dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		sort.Strings(names)
		return names
	}
	if got := list(); !sameStrings(got, []string{"caf\xe9"}) {
		t.Fatalf("readdir: %q", got)
	}
	// The servers hold the same bytes.
	c := cl.Client(t)
	ctx := context.Background()
	if _, err := c.Lookup(ctx, fid.Root, "caf\xe9"); err != nil {
		t.Fatalf("lookup through the client library: %v", err)
	}
	if _, err := c.Lookup(ctx, fid.Root, "caf\u00e9"); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("the UTF-8 spelling café must be another name: %v", err)
	}

	long := highBytes(255)
	for _, mv := range [][2]string{{"caf\xe9", "\xff\xfe"}, {"\xff\xfe", long}} {
		if err := os.Rename(m.Path(mv[0]), m.Path(mv[1])); err != nil {
			t.Fatalf("rename %q to %q: %v", mv[0], mv[1], err)
		}
		if got := list(); !sameStrings(got, []string{mv[1]}) {
			t.Fatalf("readdir after rename to %q: %q", mv[1], got)
		}
		got, err := os.ReadFile(m.Path(mv[1]))
		if err != nil || string(got) != string(data) {
			t.Fatalf("read %q: %q %v", mv[1], got, err)
		}
		if _, err := os.Stat(m.Path(mv[0])); !errors.Is(err, syscall.ENOENT) {
			t.Fatalf("old name %q after rename: %v", mv[0], err)
		}
	}

	// Links, symlinks and xattr names with such bytes.
	if err := os.Link(m.Path(long), m.Path("h\xe9")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../caf\xe9/\xff", m.Path("s\xe9")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(m.Path("s\xe9")); err != nil || got != "../caf\xe9/\xff" {
		t.Fatalf("readlink: %q %v", got, err)
	}
	if err := unix.Setxattr(m.Path("h\xe9"), "user.caf\xe9", []byte("x"), 0); err != nil {
		t.Fatalf("setxattr: %v", err)
	}
	buf := make([]byte, 256)
	if n, err := unix.Listxattr(m.Path(long), buf); err != nil || !strings.Contains(string(buf[:n]), "user.caf\xe9\x00") {
		t.Fatalf("listxattr: %q %v", buf[:max(n, 0)], err)
	}
	if got := list(); !sameStrings(got, sortedStrings(long, "h\xe9", "s\xe9")) {
		t.Fatalf("readdir: %q", got)
	}

	// One byte more than NAME_MAX.
	if err := os.WriteFile(m.Path(highBytes(256)), data, 0o644); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("create of a 256-byte name: %v", err)
	}
	if _, err := os.Stat(m.Path(highBytes(256))); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("stat of a 256-byte name: %v", err)
	}
	if err := os.Rename(m.Path(long), m.Path(highBytes(256))); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("rename to a 256-byte name: %v", err)
	}

	for _, n := range []string{long, "h\xe9", "s\xe9"} {
		if err := os.Remove(m.Path(n)); err != nil {
			t.Fatalf("remove %q: %v", n, err)
		}
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("readdir at the end: %q", got)
	}
}
