package itest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// TestClientsAskBeforeTheOSTs: the OSTs serve and cut any object, so the
// client asks the MDT's rules first. Before, `nacre cat` and `nacre get`
// as any user printed another user's 0600 file, and a truncate the MDT
// then refused (EACCES) had already zeroed the file's data.
func TestClientsAskBeforeTheOSTs(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	ctx := context.Background()
	root := cl.Client(t)
	data := []byte("0123456789 only for its owner\n")
	ino := createIn(t, root, fid.Root, "private", data)
	f := fid.FromPB(ino.Fid)
	if _, err := root.Setattr(ctx, &pb.SetattrOp{Fid: f.PB(), Valid: uint32(pb.SetattrValid_SETATTR_MODE | pb.SetattrValid_SETATTR_UID | pb.SetattrValid_SETATTR_GID),
		Mode: 0o600, Uid: 1001, Gid: 1001}); err != nil {
		t.Fatal(err)
	}
	other, err := client.New(ctx, client.Config{MGS: cl.MGS, Timeout: 30 * time.Second, Cred: &pb.Cred{Uid: nobody, Gid: nobody}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	if _, err := other.Setattr(ctx, &pb.SetattrOp{Fid: f.PB(), Valid: uint32(pb.SetattrValid_SETATTR_SIZE), Size: 2}); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("truncate of another user's 0600 file: %v, want EACCES", err)
	}
	if _, err := other.Open(ctx, f, syscall.O_RDONLY); !errors.Is(err, syscall.EACCES) {
		t.Fatalf("open of another user's 0600 file: %v, want EACCES", err)
	}
	buf := make([]byte, 100)
	n, err := root.OpenInode(ino).ReadAt(ctx, buf, 0)
	if !bytes.Equal(buf[:n], data) {
		t.Fatalf("the file reads %q (%v), want %q", buf[:n], err, data)
	}

	// The test binary's directory is root's: a copy the user may run.
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	bin := filepath.Join(dir, "nacre")
	if b, err := os.ReadFile(cl.Bin); err != nil || os.WriteFile(bin, b, 0o755) != nil {
		t.Fatalf("copy the binary: %v", err)
	}
	for _, args := range [][]string{{"cat", "/private"}, {"get", "/private", "-"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "NACRE_MGS=" + cl.MGS}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
		out, err := cmd.CombinedOutput()
		if err == nil || strings.Contains(string(out), "only for its owner") || !strings.Contains(strings.ToLower(string(out)), "permission denied") {
			t.Errorf("nacre %s as uid %d: %v\n%s", strings.Join(args, " "), nobody, err, out)
		}
	}
}

// TestCLIModesFollowTheUmask: `nacre mkdir` makes 0777 less the umask, as
// mkdir(1) (it made 0755 whatever the umask), -m exactly, -p parents with
// u+wx; in a directory with a default ACL, mkdir and `put -` leave the
// umask to the ACL, as the kernel does (they applied it themselves, so
// the ACL's mask came out r-x and r-- instead of rwx and rw-).
func TestCLIModesFollowTheUmask(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	ctx := context.Background()
	c := cl.Client(t)
	run := func(stdin string, args ...string) {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", `umask 077; exec "$0" "$@"`, cl.Bin)
		cmd.Args = append(cmd.Args, args...)
		cmd.Env = append(os.Environ(), "NACRE_MGS="+cl.MGS)
		cmd.Stdin = strings.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("nacre %v: %v\n%s", args, err, out)
		}
	}
	mode := func(p string) uint32 {
		t.Helper()
		ino, err := c.Resolve(ctx, p, false)
		if err != nil {
			t.Fatal(err)
		}
		return ino.Mode & 0o7777
	}
	run("", "mkdir", "/plain")
	run("", "mkdir", "-m", "751", "/given")
	run("", "mkdir", "-p", "/p1/p2")
	for p, want := range map[string]uint32{"/plain": 0o700, "/given": 0o751, "/p1": 0o700, "/p1/p2": 0o700} {
		if got := mode(p); got != want {
			t.Errorf("%s: mode %o, want %o (umask 077)", p, got, want)
		}
	}
	acl := []byte{2, 0, 0, 0, // POSIX ACL xattr version 2: user::rwx group::rwx mask::rwx other::---
		1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
		4, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
		0x10, 0, 7, 0, 0xff, 0xff, 0xff, 0xff,
		0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	d, err := c.Resolve(ctx, "/plain", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Setxattr(ctx, fid.FromPB(d.Fid), "system.posix_acl_default", acl, 0); err != nil {
		t.Fatal(err)
	}
	run("", "mkdir", "/plain/sub")
	run("data", "put", "-", "/plain/f")
	if got := mode("/plain/sub"); got != 0o770 {
		t.Errorf("mkdir under a default ACL: mode %o, want 770 (the ACL, not the umask)", got)
	}
	if got := mode("/plain/f"); got != 0o660 {
		t.Errorf("put - under a default ACL: mode %o, want 660", got)
	}
}
