package itest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/test/testcluster"
	"nacre/test/wait"
)

// getfacl runs getfacl as root and returns its output (numeric ids).
func getfacl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("getfacl", append([]string{"-n", "-p"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("getfacl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func setfacl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("setfacl", args...).CombinedOutput(); err != nil {
		t.Fatalf("setfacl %v: %v\n%s", args, err, out)
	}
}

func wantACL(t *testing.T, acl string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(acl, l+"\n") {
			t.Errorf("ACL lacks %q:\n%s", l, acl)
		}
	}
}

// TestFusePOSIXACLs: access ACLs grant named users and groups what the
// mode bits do not (limited by the mask, which chmod moves), default ACLs
// are inherited in place of the umask, only the owner sets them, and they
// are the file system's: another mount sees them, cp -a copies them.
func TestFusePOSIXACLs(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("setfacl"); err != nil {
		t.Fatal("setfacl is not installed (Debian package acl; scripts/install-deps.sh installs it)")
	}
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl, "allow_other")
	must := mustOf(t)
	root := m.Dir

	// A named user.
	must(os.Mkdir(m.Path("shared"), 0o750))
	mustFailUser(t, root, "touch shared/x", "Permission denied")
	setfacl(t, "-m", "u:65534:rwx", m.Path("shared"))
	wantACL(t, getfacl(t, m.Path("shared")), "user:65534:rwx", "mask::rwx", "group::r-x", "other::---")
	mustUser(t, root, "echo hi > shared/x && cat shared/x && ls shared")
	if out, err := cl.Run("ls", "-l", "/"); err != nil || !strings.Contains(out, "drwxrwx---+") {
		t.Errorf("nacre ls -l does not mark the directory with an ACL (drwxrwx---+): %v\n%s", err, out)
	}
	var st syscall.Stat_t
	must(syscall.Stat(m.Path("shared"), &st))
	if st.Mode&0o777 != 0o770 {
		t.Errorf("the directory's mode with mask rwx is %o, want 770", st.Mode&0o777)
	}
	// chmod moves the mask: the named user keeps r-x only.
	must(os.Chmod(m.Path("shared"), 0o750))
	wantACL(t, getfacl(t, m.Path("shared")), "user:65534:rwx\t#effective:r-x", "mask::r-x")
	mustFailUser(t, root, "touch shared/y", "Permission denied")
	mustUser(t, root, "cat shared/x")
	// Only the owner (or root) sets an ACL.
	mustFailUser(t, root, "setfacl -m u:65534:rwx shared", "Operation not permitted")

	// A named group (the user's supplementary group 100).
	must(os.Mkdir(m.Path("team"), 0o700))
	mustFailUser(t, root, "ls team", "Permission denied")
	setfacl(t, "-m", "g:100:rwx", m.Path("team"))
	mustUser(t, root, "touch team/t && ls team")

	// A default ACL: inherited by new files and directories, in place of
	// the umask.
	must(os.Mkdir(m.Path("proj"), 0o755))
	setfacl(t, "-d", "-m", "u:65534:rw", m.Path("proj"))
	old := syscall.Umask(0o077)
	err := os.WriteFile(m.Path("proj", "f"), []byte("data\n"), 0o666)
	if err == nil {
		err = os.Mkdir(m.Path("proj", "sub"), 0o777)
	}
	syscall.Umask(old)
	must(err)
	wantACL(t, getfacl(t, m.Path("proj", "f")), "user:65534:rw-", "mask::rw-")
	must(syscall.Stat(m.Path("proj", "f"), &st))
	if st.Mode&0o777 != 0o664 {
		t.Errorf("a file made with 0666 under umask 077 in a directory with a default ACL: mode %o, want 664 (the default ACL replaces the umask)", st.Mode&0o777)
	}
	mustUser(t, root, "echo more >> proj/f")
	sub := getfacl(t, m.Path("proj", "sub"))
	wantACL(t, sub, "user:65534:rw-", "default:user:65534:rw-")
	// Without a default ACL the umask applies as before.
	old = syscall.Umask(0o027)
	err = os.WriteFile(m.Path("plain"), nil, 0o666)
	syscall.Umask(old)
	must(err)
	must(syscall.Stat(m.Path("plain"), &st))
	if st.Mode&0o777 != 0o640 {
		t.Errorf("a file made with 0666 under umask 027: mode %o, want 640", st.Mode&0o777)
	}

	// cp -a copies ACLs (before: "Operation not supported").
	if out, err := exec.Command("cp", "-a", m.Path("proj", "f"), m.Path("copy")).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v\n%s", err, out)
	}
	wantACL(t, getfacl(t, m.Path("copy")), "user:65534:rw-")

	// Another mount sees the same ACLs and enforces them.
	m2 := mountFuse(t, cl, "allow_other")
	wantACL(t, getfacl(t, m2.Path("shared")), "user:65534:rwx\t#effective:r-x")
	mustUser(t, m2.Dir, "echo again >> proj/f")
	mustFailUser(t, m2.Dir, "touch shared/z", "Permission denied")
	// Removing the ACL leaves the mode bits.
	setfacl(t, "-b", m.Path("shared"))
	if acl := getfacl(t, m.Path("shared")); strings.Contains(acl, "65534") {
		t.Errorf("after setfacl -b:\n%s", acl)
	}
	mustFailUser(t, root, "cat shared/x", "Permission denied")

	// A change made through one mount reaches a mount that had checked
	// the directory before, once its attributes expire (1 s), as other
	// attributes do.
	must(os.Mkdir(m.Path("late"), 0o700))
	mustFailUser(t, m2.Dir, "touch late/a", "Permission denied")
	setfacl(t, "-m", "u:65534:rwx", m.Path("late"))
	wait.NoErr(t, 5*time.Second, "the other mount to follow an ACL set through one", func() error {
		if out, ok := asUser(t, m2.Dir, "touch late/a"); !ok {
			return errors.New(out)
		}
		return nil
	})
}
