package itest

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"nacre/test/testcluster"
)

const nobody = 65534

// asUser runs a shell script as uid/gid 65534 (with supplementary group
// 100) in dir and returns its combined output and whether it succeeded.
func asUser(t *testing.T, dir, script string) (string, bool) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{100}}}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

func mustUser(t *testing.T, dir, script string) {
	t.Helper()
	if out, ok := asUser(t, dir, script); !ok {
		t.Fatalf("as uid %d: %q failed: %s", nobody, script, out)
	}
}

func mustFailUser(t *testing.T, dir, script, want string) {
	t.Helper()
	out, ok := asUser(t, dir, script)
	if ok {
		t.Fatalf("as uid %d: %q succeeded, want %q", nobody, script, want)
	}
	if !strings.Contains(out, want) {
		t.Fatalf("as uid %d: %q: %s, want %q", nobody, script, out, want)
	}
}

// TestFuseUnprivilegedUser checks permissions, ownership, the sticky,
// set-group-ID and set-user-ID rules and xattr namespaces for an
// unprivileged user on a mount with allow_other (default_permissions is
// the default), and the same user's view on a mount without
// default_permissions (checks by the mount daemon and the MDT alone).
func TestFuseUnprivilegedUser(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	for i, opts := range [][]string{{"allow_other"}, {"allow_other,no_default_permissions"}} {
		t.Run(strings.ReplaceAll(opts[0], ",", "+"), func(t *testing.T) {
			mm := mountFuse(t, cl, opts...)
			must := mustOf(t)
			sub := string(rune('a' + i))
			must(os.Mkdir(mm.Path(sub), 0o755))
			m := &fuseMount{Dir: mm.Path(sub)}
			root := m.Dir
			// A private directory and a root-owned file.
			must(os.Mkdir(m.Path("priv"), 0o700))
			must(os.WriteFile(m.Path("rootfile"), []byte("root\n"), 0o644))
			mustFailUser(t, root, "ls priv", "Permission denied")
			mustFailUser(t, root, "touch priv/x", "Permission denied")
			mustFailUser(t, root, "touch newfile", "Permission denied") // root dir is 0755
			mustUser(t, root, "cat rootfile")
			mustFailUser(t, root, "echo x >> rootfile", "Permission denied")
			mustFailUser(t, root, "chmod 666 rootfile", "Operation not permitted")
			mustFailUser(t, root, "chown 65534 rootfile", "Operation not permitted")
			mustFailUser(t, root, "truncate -s 0 rootfile", "Permission denied")

			// A sticky world-writable directory.
			must(os.Mkdir(m.Path("tmp"), 0o777))
			must(syscall.Chmod(m.Path("tmp"), 0o1777))
			must(os.WriteFile(m.Path("tmp", "roots"), []byte("x"), 0o666))
			must(os.Chmod(m.Path("tmp", "roots"), 0o666))
			mustUser(t, root, "echo mine > tmp/mine && chmod 600 tmp/mine && cat tmp/mine && echo more >> tmp/roots")
			mustFailUser(t, root, "rm -f tmp/roots", "Operation not permitted")
			mustFailUser(t, root, "mv tmp/roots tmp/stolen", "Operation not permitted")
			// Exact as Linux's own checks (pjdfstest chown/07,
			// truncate/06): a non-owner may not chown to the owner the
			// file has; truncate(2) needs write access, the owner's too,
			// also while the file is open here; ftruncate through a file
			// opened for writing needs none.
			mustFailUser(t, root, "chown 0 rootfile", "Operation not permitted")
			mustFailUser(t, root, "echo x > tmp/ro && chmod 444 tmp/ro && truncate -s 0 tmp/ro", "Permission denied")
			mustFailUser(t, root, `python3 -c "import os; fd = os.open('tmp/ro', os.O_RDONLY); os.truncate('tmp/ro', 0)"`, "Permission denied")
			mustUser(t, root, `python3 -c "import os; fd = os.open('tmp/ft', os.O_RDWR | os.O_CREAT, 0o644); os.fchmod(fd, 0o444); os.ftruncate(fd, 5); assert os.fstat(fd).st_size == 5"`)
			mustUser(t, root, "mv tmp/mine tmp/mine2 && rm tmp/mine2")
			var st syscall.Stat_t
			must(syscall.Stat(m.Path("tmp", "roots"), &st))
			if st.Uid != 0 {
				t.Fatalf("roots owned by %d", st.Uid)
			}

			// Ownership of new files, and a set-group-ID directory.
			must(os.Mkdir(m.Path("sgid"), 0o777))
			must(os.Chown(m.Path("sgid"), 0, 100))
			must(syscall.Chmod(m.Path("sgid"), 0o2777))
			mustUser(t, root, "touch sgid/f && mkdir sgid/d")
			must(syscall.Stat(m.Path("sgid", "f"), &st))
			if st.Uid != nobody || st.Gid != 100 {
				t.Fatalf("file in a setgid dir: uid %d gid %d, want %d 100", st.Uid, st.Gid, nobody)
			}
			must(syscall.Stat(m.Path("sgid", "d"), &st))
			if st.Gid != 100 || st.Mode&syscall.S_ISGID == 0 {
				t.Fatalf("dir in a setgid dir: gid %d mode %o", st.Gid, st.Mode)
			}
			// chgrp to a supplementary group is allowed, to another not.
			mustUser(t, root, "chgrp 100 tmp 2>/dev/null; touch tmp/g && chgrp 100 tmp/g")
			mustFailUser(t, root, "chgrp 0 tmp/g", "Operation not permitted")

			// Writing to a set-user-ID file clears the bit.
			must(os.WriteFile(m.Path("tmp", "suid"), []byte("#!/bin/sh\n"), 0o777))
			must(syscall.Chmod(m.Path("tmp", "suid"), 0o6777))
			mustUser(t, root, "echo '# edit' >> tmp/suid")
			must(syscall.Stat(m.Path("tmp", "suid"), &st))
			if st.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0 {
				t.Fatalf("set-ID bits after a write by another user: mode %o", st.Mode)
			}
			// So does emptying it with O_TRUNC (the kernel leaves that
			// to the file system), by another user; root keeps them.
			must(syscall.Chmod(m.Path("tmp", "suid"), 0o6777))
			must(os.WriteFile(m.Path("tmp", "suid"), []byte("#!/bin/sh\n"), 0o777))
			if must(syscall.Stat(m.Path("tmp", "suid"), &st)); st.Mode&0o7777 != 0o6777 {
				t.Fatalf("set-ID bits after root's O_TRUNC: mode %o, want 6777", st.Mode&0o7777)
			}
			mustUser(t, root, ": > tmp/suid")
			if must(syscall.Stat(m.Path("tmp", "suid"), &st)); st.Mode&0o7777 != 0o777 {
				t.Fatalf("mode after another user's O_TRUNC: %o, want 777 (set-ID bits cleared)", st.Mode&0o7777)
			}
			// A user who may not write a set-user-ID file may not clear
			// its bit by chmod either (it looks like the kernel's
			// clearing when the kernel does not check permissions).
			must(os.WriteFile(m.Path("suidroot"), []byte("x"), 0o755))
			must(syscall.Chmod(m.Path("suidroot"), 0o4755))
			mustFailUser(t, root, "chmod 0755 suidroot", "Operation not permitted")
			if must(syscall.Stat(m.Path("suidroot"), &st)); st.Mode&0o7777 != 0o4755 {
				t.Fatalf("mode after another user's chmod: %o, want 4755", st.Mode&0o7777)
			}

			// Extended attribute namespaces.
			mustUser(t, root, "touch tmp/x && setfattr -n user.k -v v tmp/x && getfattr -n user.k tmp/x")
			mustFailUser(t, root, "setfattr -n trusted.k -v v tmp/x", "Operation not permitted")
			mustFailUser(t, root, "setfattr -n user.k -v v rootfile", "Permission denied")
			mustFailUser(t, root, "setfattr -n security.k -v v rootfile", "Operation not permitted")
			must(syscall.Setxattr(m.Path("rootfile"), "trusted.k", []byte("v"), 0))
			if out, _ := asUser(t, root, "getfattr -d -m - rootfile"); strings.Contains(out, "trusted.k") {
				t.Fatalf("unprivileged user sees trusted xattrs: %s", out)
			}
		})
	}
}
