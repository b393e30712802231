package mdt

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/fnv"
	"sort"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// highBytes is n bytes cycling through 0x80..0xff: no byte of it is ASCII
// and no prefix of it is valid UTF-8.
func highBytes(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 0x80 + byte(i%128)
	}
	return string(b)
}

// nameVariant is another name derived from name (prefix + name, cut to the
// longest allowed length).
func nameVariant(prefix, name string) string {
	s := prefix + name
	if len(s) > MaxNameLen {
		s = s[:MaxNameLen]
	}
	return s
}

// wireRoundTrip sends m through the protobuf encoding, as every command,
// reply and stored inode goes: a `string` field refuses bytes that are
// not UTF-8 here.
func wireRoundTrip[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatalf("marshal %T: %v", m, err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatalf("unmarshal %T: %v", m, err)
	}
	return out
}

// TestNamesAreBytes: names, symlink targets, xattr names and paths are
// POSIX byte strings. Names that are not UTF-8 are created, looked up,
// listed, linked, renamed and removed, and read back byte for byte from
// the dirent, the linkEA and fid2path.
func TestNamesAreBytes(t *testing.T) {
	cases := []struct {
		desc   string
		name   string
		target string
	}{
		{"latin-1", "caf\xe9", "../caf\xe9/na\xefve"},
		{"ff fe", "\xff\xfe", "/\xff\xfe/\xfe\xff"},
		{"255 high bytes", highBytes(MaxNameLen), highBytes(4095)},
		{"utf-8 still works", "café ☕", "/tmp/café"},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			d := newDirect(t, 2)
			var req uint64
			ns := directNS{d: d, cred: &pb.Cred{}, osts: []uint32{0, 1}, req: &req}
			must := func(err error, what string) {
				t.Helper()
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			wantErr := func(err error, want syscall.Errno, what string) {
				t.Helper()
				if !errors.Is(err, want) {
					t.Fatalf("%s: got %v, want %v", what, err, want)
				}
			}
			// The directory's name is not UTF-8 either: fid2path crosses it.
			const dirName = "\xe9t\xe9"
			di, err := ns.Mkdir(fid.Root, dirName, 0o755)
			must(err, "mkdir")
			dir := fid.FromPB(di.Fid)
			readdir := func() []string {
				t.Helper()
				ents, eof, err := d.T.Readdir(dir, 0, 1000, true, ns.cred)
				must(err, "readdir")
				if !eof {
					t.Fatal("readdir: no eof")
				}
				ents = wireRoundTrip(t, &pb.ReaddirReply{Entries: ents, Eof: eof}).Entries
				var names []string
				for _, e := range ents {
					names = append(names, string(e.Name))
				}
				sort.Strings(names)
				return names
			}
			linksOf := func(f fid.FID) []string {
				t.Helper()
				ino, err := d.T.Getattr(f, true)
				must(err, "getattr with links")
				ino = wireRoundTrip(t, ino)
				var out []string
				for _, l := range ino.Links {
					if fid.FromPB(l.Parent) != dir {
						t.Fatalf("linkEA entry %q names parent %s, want %s", l.Name, fid.FromPB(l.Parent), dir)
					}
					out = append(out, string(l.Name))
				}
				sort.Strings(out)
				return out
			}
			paths := func(f fid.FID) []string {
				t.Helper()
				p, _, err := d.T.Fid2Path(f)
				must(err, "fid2path")
				sort.Strings(p)
				return p
			}
			eq := func(what string, got, want []string) {
				t.Helper()
				if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
					t.Fatalf("%s: got %q, want %q", what, got, want)
				}
			}

			// Create and look up.
			fi, err := ns.Create(dir, tc.name, syscall.S_IFREG|0o644, true)
			must(err, "create")
			f := fid.FromPB(fi.Fid)
			li, err := ns.Lookup(dir, tc.name)
			must(err, "lookup")
			if fid.FromPB(li.Fid) != f {
				t.Fatalf("lookup found %s, created %s", fid.FromPB(li.Fid), f)
			}
			if _, err := ns.Create(dir, tc.name, syscall.S_IFREG|0o644, true); !errors.Is(err, syscall.EEXIST) {
				t.Fatalf("exclusive create of an existing name: %v", err)
			}
			eq("readdir", readdir(), []string{tc.name})
			eq("linkEA", linksOf(f), []string{tc.name})
			eq("fid2path", paths(f), []string{"/" + dirName + "/" + tc.name})
			eq("fid2path of the directory", paths(dir), []string{"/" + dirName})

			// The entry's key holds the name's bytes as they are.
			plocal, _, err := getInode(d.T.db, dir)
			must(err, "directory's local key")
			h := fnv.New64a()
			h.Write([]byte(tc.name))
			hash := h.Sum64() >> 1
			key := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64([]byte{'D'}, plocal), hash)
			key = append(key, tc.name...)
			v, err := d.T.db.Get(key)
			must(err, "read the entry by its raw key")
			if ef, _, ok := decodeDirent(v); !ok || ef != f {
				t.Fatalf("entry under the raw key names %s, want %s", ef, f)
			}

			// Symlink whose name and target are the test's bytes.
			symName := nameVariant("s", tc.name)
			si, err := ns.Symlink(dir, symName, tc.target)
			must(err, "symlink")
			sg, err := d.T.Getattr(fid.FromPB(si.Fid), false)
			must(err, "getattr symlink")
			sg = wireRoundTrip(t, sg)
			if !bytes.Equal(sg.Symlink, []byte(tc.target)) || sg.Size != uint64(len(tc.target)) {
				t.Fatalf("symlink target %q (size %d), want %q", sg.Symlink, sg.Size, tc.target)
			}
			eq("linkEA of the symlink", linksOf(fid.FromPB(si.Fid)), []string{symName})

			// Hard link.
			linkName := nameVariant("h", tc.name)
			_, err = ns.Link(f, dir, linkName)
			must(err, "link")
			eq("linkEA after link", linksOf(f), sorted(tc.name, linkName))
			eq("fid2path after link", paths(f), sorted("/"+dirName+"/"+tc.name, "/"+dirName+"/"+linkName))

			// Rename.
			renamed := nameVariant("r", tc.name)
			must(ns.Rename(dir, tc.name, dir, renamed, 0), "rename")
			_, err = ns.Lookup(dir, tc.name)
			wantErr(err, syscall.ENOENT, "lookup of the old name")
			li, err = ns.Lookup(dir, renamed)
			must(err, "lookup of the new name")
			if fid.FromPB(li.Fid) != f {
				t.Fatalf("renamed name finds %s, want %s", fid.FromPB(li.Fid), f)
			}
			eq("readdir after rename", readdir(), sorted(renamed, linkName, symName))
			eq("linkEA after rename", linksOf(f), sorted(renamed, linkName))
			eq("fid2path after rename", paths(f), sorted("/"+dirName+"/"+renamed, "/"+dirName+"/"+linkName))
			// And back over the symlink (replacing it).
			must(ns.Rename(dir, renamed, dir, symName, 0), "rename over the symlink")
			eq("readdir after rename over", readdir(), sorted(linkName, symName))
			eq("linkEA after rename over", linksOf(f), sorted(linkName, symName))

			// Extended attribute names are bytes too.
			xname := nameVariant("user.", tc.name)
			must(ns.Setxattr(f, xname, []byte("v\xff"), 1), "setxattr")
			xv, err := ns.Getxattr(f, xname)
			must(err, "getxattr")
			if string(xv) != "v\xff" {
				t.Fatalf("getxattr %q", xv)
			}
			xl, err := ns.Listxattr(f)
			must(err, "listxattr")
			eq("listxattr", xl, []string{xname})
			must(ns.Removexattr(f, xname), "removexattr")

			// Too long: ENAMETOOLONG everywhere a name comes in.
			long := tc.name + highBytes(MaxNameLen+1-len(tc.name))
			if len(long) != MaxNameLen+1 {
				t.Fatalf("long name of %d bytes", len(long))
			}
			_, err = ns.Create(dir, long, syscall.S_IFREG|0o644, true)
			wantErr(err, syscall.ENAMETOOLONG, "create of a 256-byte name")
			_, err = ns.Mkdir(dir, long, 0o755)
			wantErr(err, syscall.ENAMETOOLONG, "mkdir of a 256-byte name")
			_, err = ns.Lookup(dir, long)
			wantErr(err, syscall.ENAMETOOLONG, "lookup of a 256-byte name")
			_, err = ns.Link(f, dir, long)
			wantErr(err, syscall.ENAMETOOLONG, "link to a 256-byte name")
			wantErr(ns.Rename(dir, linkName, dir, long, 0), syscall.ENAMETOOLONG, "rename to a 256-byte name")

			// Unlink every name: the file is gone, the directory empty.
			must(ns.Unlink(dir, linkName), "unlink the hard link")
			eq("linkEA after unlink", linksOf(f), []string{symName})
			must(ns.Unlink(dir, symName), "unlink the last name")
			if _, err := d.T.Getattr(f, false); !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("getattr after the last unlink: %v", err)
			}
			eq("readdir at the end", readdir(), nil)
			must(ns.Rmdir(fid.Root, dirName), "rmdir")
		})
	}
}

func sorted(s ...string) []string {
	sort.Strings(s)
	return s
}

// TestDirentKeyBytesUnchanged pins the key schema: names go into entry and
// xattr keys as their bytes, so stores written before names became protobuf
// bytes stay readable.
func TestDirentKeyBytesUnchanged(t *testing.T) {
	for _, c := range []struct {
		key  []byte
		want string
	}{
		{DirentKey(5, "caf\u00e9"), "4400000000000000052474411d67d206c4636166c3a9"},
		{DirentKey(5, "caf\xe9"), "4400000000000000055a9c7cc8742cb16e636166e9"},
		{xattrKey(5, "user.caf\xe9"), "580000000000000005757365722e636166e9"},
	} {
		if got := hex.EncodeToString(c.key); got != c.want {
			t.Errorf("key %s, want %s", got, c.want)
		}
	}
}
