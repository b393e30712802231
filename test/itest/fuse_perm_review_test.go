package itest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// TestFuseExecOnlyBinary runs another user's execute-only (0711) program
// through the mount, as on ext4: the kernel's exec open asks for read
// access (O_RDONLY) marked __FMODE_EXEC, which needs execute permission
// only. With and without default_permissions.
func TestFuseExecOnlyBinary(t *testing.T) {
	needFUSE(t)
	prog, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true to copy")
	}
	cl := testcluster.Start(t, testcluster.Options{})
	for _, opts := range []string{"allow_other", "allow_other,no_default_permissions"} {
		t.Run(strings.ReplaceAll(opts, ",", "+"), func(t *testing.T) {
			m := mountFuse(t, cl, opts)
			p := m.Path("xonly")
			must := mustOf(t)
			must(os.WriteFile(p, prog, 0o711))
			must(os.Chmod(p, 0o711))
			if out, err := asNobody(p).CombinedOutput(); err != nil {
				t.Fatalf("uid %d running root's 0711 program: %v %s", nobody, err, out)
			}
			// Reading it stays refused.
			mustFailUser(t, m.Dir, "cat xonly >/dev/null", "Permission denied")
			// Without an execute bit for others, exec is refused.
			must(os.Chmod(p, 0o700))
			if err := asNobody(p).Run(); !errors.Is(err, syscall.EACCES) {
				t.Fatalf("uid %d running root's 0700 program: %v, want EACCES", nobody, err)
			}
		})
	}
}

// asNobody is the command p run as uid and gid 65534.
func asNobody(p string) *exec.Cmd {
	cmd := exec.Command(p)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// TestFuseNoDefaultPermissionsACL: without default_permissions the
// daemon's check of an open applies the file's access ACL (an ACL was a
// pass for anyone: any user read and wrote any file that had one).
func TestFuseNoDefaultPermissionsACL(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	acls := mountFuse(t, cl, "allow_other")
	must := mustOf(t)
	must(os.Mkdir(acls.Path("d"), 0o755))
	// f: another user named, so nobody (uid 65534) is "other", with no
	// access; g: nobody named, with read only.
	must(os.WriteFile(acls.Path("d", "f"), []byte("secret\n"), 0o600))
	must(os.WriteFile(acls.Path("d", "g"), []byte("shared\n"), 0o600))
	setfacl(t, "-m", "u:1234:rw", acls.Path("d", "f"))
	setfacl(t, "-m", "u:65534:r", acls.Path("d", "g"))

	m := mountFuse(t, cl, "allow_other,no_default_permissions")
	dir := m.Path("d")
	mustFailUser(t, dir, "cat f", "Permission denied")
	mustFailUser(t, dir, "echo x >> f", "Permission denied")
	mustUser(t, dir, "cat g")
	mustFailUser(t, dir, "echo x >> g", "Permission denied")
	if out, _ := asUser(t, dir, "test -r g && ! test -w g && ! test -r f && echo ok"); out != "ok" {
		t.Fatalf("access(2) as uid %d: %q, want g readable only and f not", nobody, out)
	}
	if b, err := os.ReadFile(m.Path("d", "f")); err != nil || string(b) != "secret\n" {
		t.Fatalf("root reading f: %q %v", b, err)
	}
}

// TestFuseNoDefaultPermissionsSearch: without default_permissions a name
// the kernel cached (from root's walk) does not let another user through
// a directory they may not search: the kernel checks no search permission
// there itself, the MDT's lookup does.
func TestFuseNoDefaultPermissionsSearch(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	m := mountFuse(t, cl, "allow_other,no_default_permissions")
	must := mustOf(t)
	must(os.Mkdir(m.Path("priv"), 0o700))
	must(os.WriteFile(m.Path("priv", "pub"), []byte("pub\n"), 0o644))
	for i := 0; i < 3; i++ {
		if _, err := os.ReadFile(m.Path("priv", "pub")); err != nil {
			t.Fatal(err)
		}
		mustFailUser(t, m.Dir, "cat priv/pub", "Permission denied")
	}
	mustFailUser(t, m.Dir, "cd priv", "can't cd")
}

// TestFuseWriterTimes: another user who may write a file sets both its
// times to now (touch) and changes it (O_TRUNC, truncate, fallocate), but
// setting one time alone to now is the owner's (EPERM, as on ext4), with
// and without default_permissions.
func TestFuseWriterTimes(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	for i, opts := range []string{"allow_other", "allow_other,no_default_permissions"} {
		t.Run(strings.ReplaceAll(opts, ",", "+"), func(t *testing.T) {
			m := mountFuse(t, cl, opts)
			name := string(rune('a' + i))
			must := mustOf(t)
			must(os.WriteFile(m.Path(name), nil, 0o666))
			must(os.Chmod(m.Path(name), 0o666))
			mustUser(t, m.Dir, ": > "+name+" && truncate -s 10 "+name+" && fallocate -l 8192 "+name+" && touch "+name)
			mustFailUser(t, m.Dir, "touch -m "+name, "Operation not permitted")
			mustFailUser(t, m.Dir, "touch -a "+name, "Operation not permitted")
		})
	}
}

// TestFidAccessIsRoots: an object reached by FID skips the search
// permissions of the directories on its path, so .nacre/fid/<FID> on a
// mount and fid2path are root's (EPERM for others, as Lustre without
// CAP_DAC_READ_SEARCH), also right after root used the same name.
func TestFidAccessIsRoots(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{})
	ctx := context.Background()
	for i, opts := range []string{"allow_other", "allow_other,no_default_permissions"} {
		t.Run(strings.ReplaceAll(opts, ",", "+"), func(t *testing.T) {
			m := mountFuse(t, cl, opts)
			must := mustOf(t)
			priv := fmt.Sprintf("priv%d", i)
			must(os.Mkdir(m.Path(priv), 0o700))
			must(os.WriteFile(m.Path(priv, "f"), []byte("secret\n"), 0o644))
			ino, err := cl.Client(t).Resolve(ctx, "/"+priv+"/f", false)
			must(err)
			name := fmt.Sprintf("[0x%x:0x%x:0x%x]", ino.Fid.Seq, ino.Fid.Oid, ino.Fid.Ver)
			for round := 0; round < 2; round++ {
				if b, err := os.ReadFile(m.Path(".nacre", "fid", name)); err != nil || string(b) != "secret\n" {
					t.Fatalf("root opening by FID: %q %v", b, err)
				}
				mustFailUser(t, m.Dir, "cat .nacre/fid/'"+name+"'", "Operation not permitted")
			}
		})
	}
	root := cl.Client(t)
	ino, err := root.Resolve(ctx, "/priv0/f", false)
	if err != nil {
		t.Fatal(err)
	}
	f := fid.FromPB(ino.Fid)
	other, err := client.New(ctx, client.Config{MGS: cl.MGS, Timeout: 30 * time.Second, Cred: &pb.Cred{Uid: nobody, Gid: nobody}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.Fid2Path(ctx, f); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("fid2path as uid %d: %v, want EPERM", nobody, err)
	}
	if p, err := root.Fid2Path(ctx, f); err != nil || len(p) != 1 || p[0] != "/priv0/f" {
		t.Fatalf("fid2path as root: %v %v", p, err)
	}
}
