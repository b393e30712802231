package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/localcluster"
	"nacre/internal/pki"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestNodemapSquashesRootAndMapsIds: on a cluster with TLS, an admin
// sets nodemaps with `nacre nodemap set` (a client certificate may not);
// within seconds the MDS applies them to every request of the
// certificates they name. Root through a client whose root is squashed
// cannot read, truncate, chmod, chown or remove another user's 0600
// file, and what it creates is the squash user's; through a client with
// a uid map, a user owns its files under the mapped id on the file
// system and sees its own ids, ACLs included, and a uid the map does not
// name is refused (deny_unknown). A FUSE mount with the squashed
// certificate refuses root the same. Removing the nodemap gives root
// back within seconds.
func TestNodemapSquashesRootAndMapsIds(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1, TLS: true})
	ctx := context.Background()
	admin := cl.Client(t) // admin certificate, root: no nodemap names it
	run := func(tlsDir string, args ...string) (string, error) {
		cmd := exec.Command(cl.Bin, args...)
		cmd.Env = append(os.Environ(), "NACRE_MGS="+cl.MGS, "NACRE_TLS_DIR="+tlsDir)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	issue := func(name string) string {
		dir, err := localcluster.IssueClient(cl.Dir, name, false)
		if err != nil {
			t.Fatal(err)
		}
		return dir
	}
	connect := func(tlsDir string, cred *pb.Cred) *client.Client {
		t.Helper()
		creds, err := pki.Load(tlsDir)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(ctx, client.Config{MGS: cl.MGS, Timeout: 30 * time.Second, Cred: cred, TLS: creds})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	setattr := func(c *client.Client, f fid.FID, op *pb.SetattrOp) error {
		op.Fid = f.PB()
		_, err := c.Setattr(ctx, op)
		return err
	}
	owner := func(c *client.Client, f fid.FID) string {
		t.Helper()
		ino, err := c.Getattr(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d:%d", ino.Uid, ino.Gid)
	}
	const (
		uidMode = uint32(pb.SetattrValid_SETATTR_MODE)
		uidGID  = uint32(pb.SetattrValid_SETATTR_UID | pb.SetattrValid_SETATTR_GID)
	)
	alice, lab := issue("alice"), issue("lab")

	// uid 1000's home (0755) with its 0600 secret, and a directory for all.
	home, err := admin.Mkdir(ctx, fid.Root, "home1000", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	homeF := fid.FromPB(home.Fid)
	data := []byte("for uid 1000 only\n")
	secretF := fid.FromPB(createIn(t, admin, homeF, "secret", data).Fid)
	for _, f := range []fid.FID{homeF, secretF} {
		if err := setattr(admin, f, &pb.SetattrOp{Valid: uidGID, Uid: 1000, Gid: 1000}); err != nil {
			t.Fatal(err)
		}
	}
	if err := setattr(admin, secretF, &pb.SetattrOp{Valid: uidMode, Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	// And one whose ACL lets uid 1000 alone read it.
	aclF := fid.FromPB(createIn(t, admin, homeF, "acl-secret", data).Fid)
	if err := setattr(admin, aclF, &pb.SetattrOp{Valid: uidGID, Uid: 1000, Gid: 1000}); err != nil {
		t.Fatal(err)
	}
	only1000 := acl.ACL{{Tag: acl.UserObj, Perm: 6}, {Tag: acl.User, Perm: 4, ID: 1000}, {Tag: acl.GroupObj}, {Tag: acl.Mask, Perm: 4}, {Tag: acl.Other}}
	if err := admin.Setxattr(ctx, aclF, acl.XattrAccess, only1000.Encode(), 0); err != nil {
		t.Fatal(err)
	}
	shared, err := admin.Mkdir(ctx, fid.Root, "shared", 0o777)
	if err != nil {
		t.Fatal(err)
	}
	sharedF := fid.FromPB(shared.Fid)
	if err := setattr(admin, sharedF, &pb.SetattrOp{Valid: uidMode, Mode: 0o777}); err != nil {
		t.Fatal(err)
	}
	readAll := func(c *client.Client, f fid.FID) ([]byte, error) {
		fl, err := c.Open(ctx, f, syscall.O_RDONLY)
		if err != nil {
			return nil, err
		}
		defer fl.Close(ctx)
		buf := make([]byte, 100)
		n, err := fl.ReadAt(ctx, buf, 0)
		if n > 0 {
			err = nil
		}
		return buf[:n], err
	}

	// Before any nodemap, root through alice is root.
	if got, err := readAll(connect(alice, &pb.Cred{}), secretF); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("root through alice without a nodemap reads %q, %v; want the secret", got, err)
	}

	// A client certificate may not change the nodemaps; an admin's may.
	if out, err := run(alice, "nodemap", "set", "--client", "alice"); err == nil || !strings.Contains(out, "needs the admin role") || !strings.Contains(out, "nacre cert add --client NAME --admin") {
		t.Fatalf("nodemap set with a client certificate: %v, want a refusal naming the admin role and the fix:\n%s", err, out)
	}
	for _, args := range [][]string{
		{"nodemap", "set", "--client", "alice", "--squash-root", "--trusted"},
		{"nodemap", "set", "--client", "lab", "--squash-root", "--uid-map", "1000:5000", "--gid-map", "1000:5000", "--deny-unknown"},
	} {
		if out, err := run(cl.TLSDir, args...); err != nil {
			t.Fatalf("nacre %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	out, err := run(cl.TLSDir, "nodemap", "--json")
	var rows []cli.NodemapRow
	if err != nil || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 2 || rows[0].Client != "alice" || !rows[0].SquashRoot || rows[1].Client != "lab" || rows[1].UIDMap[0] != (cli.IDPair{Client: 1000, FS: 5000}) {
		t.Fatalf("nodemap --json: %v\n%s", err, out)
	}
	if out, err := run(cl.TLSDir, "nodemap", "set", "--client", "x", "--uid-map", "1000:5000,1001:5000"); err == nil || !strings.Contains(out, "file system uid 5000 is mapped twice") {
		t.Errorf("a map with an fs id twice: %v\n%s", err, out)
	}

	// Within seconds the MDS squashes root through alice: what it
	// creates is 65534's.
	aliceRoot := connect(alice, &pb.Cred{})
	start := time.Now()
	var probe *pb.Inode
	if !wait.Poll(10*time.Second, func() bool {
		ino, _, err := aliceRoot.Create(ctx, sharedF, fmt.Sprintf("probe-%d", time.Now().UnixNano()), 0o644, client.CreateOpts{Exclusive: true})
		probe = ino
		return err == nil && ino.Uid == nobody
	}) {
		t.Fatalf("10 s after nodemap set, root through alice creates files owned by %v", probe)
	}
	t.Logf("the MDS squashed alice's root %v after nodemap set returned", time.Since(start).Round(time.Millisecond))
	if got := owner(admin, fid.FromPB(probe.Fid)); got != "65534:65534" {
		t.Errorf("root through alice made a file owned by %s on the file system, want 65534:65534", got)
	}
	if aliceRoot.Nodemap().GetClient() != "alice" {
		t.Errorf("alice's client was not told its nodemap: %v", aliceRoot.Nodemap())
	}

	// Root through alice cannot read or change uid 1000's 0600 file.
	for _, f := range []fid.FID{secretF, aclF} {
		if got, err := readAll(aliceRoot, f); !errors.Is(err, syscall.EACCES) {
			t.Errorf("root through alice read %s: %q, %v; want EACCES", f, got, err)
		}
	}
	for what, op := range map[string]*pb.SetattrOp{
		"chown":    {Valid: uidGID, Uid: 0, Gid: 0},
		"chmod":    {Valid: uidMode, Mode: 0o644},
		"truncate": {Valid: uint32(pb.SetattrValid_SETATTR_SIZE), Size: 0},
	} {
		if err := setattr(aliceRoot, secretF, op); !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EACCES) {
			t.Errorf("%s of the secret by root through alice: %v, want EPERM or EACCES", what, err)
		}
	}
	if _, err := aliceRoot.Unlink(ctx, homeF, "secret"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("unlink of the secret by root through alice: %v, want EACCES", err)
	}
	if _, err := aliceRoot.Fid2Path(ctx, secretF); !errors.Is(err, syscall.EPERM) {
		t.Errorf("fid2path by root through alice: %v, want EPERM (root's only)", err)
	}
	if got, err := readAll(admin, secretF); err != nil || !bytes.Equal(got, data) || owner(admin, secretF) != "1000:1000" {
		t.Fatalf("the secret after alice's attempts: %q, %v, owner %s", got, err, owner(admin, secretF))
	}
	if got := owner(aliceRoot, secretF); got != "1000:1000" {
		t.Errorf("alice (trusted) sees the secret owned by %s, want 1000:1000", got)
	}
	if got := owner(aliceRoot, fid.Root); got != "65534:65534" {
		t.Errorf("alice sees / owned by %s; a squashed client sees root's files as the squash user's, as Lustre", got)
	}

	// Through lab, uid 1000 is 5000 on the file system and sees its own
	// ids; fs uid 1000 is no one there.
	lab1000 := connect(lab, &pb.Cred{Uid: 1000, Gid: 1000})
	mine, _, err := lab1000.Create(ctx, sharedF, "labfile", 0o600, client.CreateOpts{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	mineF := fid.FromPB(mine.Fid)
	if mine.Uid != 1000 || mine.Gid != 1000 || owner(admin, mineF) != "5000:5000" {
		t.Errorf("lab's uid 1000 created a file it sees owned by %d:%d and the file system by %s; want 1000:1000 and 5000:5000", mine.Uid, mine.Gid, owner(admin, mineF))
	}
	f := lab1000.OpenInode(mine)
	if _, err := f.WriteAt(ctx, []byte("lab's"), 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := readAll(lab1000, mineF); err != nil || string(got) != "lab's" {
		t.Errorf("lab's uid 1000 reads its own 0600 file: %q, %v", got, err)
	}
	ents, err := lab1000.ReadDirAll(ctx, sharedF, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if string(e.Name) == "labfile" && (e.Inode.GetUid() != 1000 || e.Inode.GetGid() != 1000) {
			t.Errorf("readdir through lab shows labfile owned by %d:%d, want 1000:1000", e.Inode.GetUid(), e.Inode.GetGid())
		}
	}
	if got, err := readAll(lab1000, secretF); !errors.Is(err, syscall.EACCES) {
		t.Errorf("lab's uid 1000 (fs 5000) read fs uid 1000's secret: %q, %v; want EACCES", got, err)
	}
	if got := owner(lab1000, secretF); got != "65534:65534" {
		t.Errorf("lab sees fs uid 1000's secret owned by %s; want the squash ids (fs 1000 is no one there)", got)
	}
	// An ACL naming lab's uid 1000 names fs uid 5000.
	a := acl.ACL{{Tag: acl.UserObj, Perm: 6}, {Tag: acl.User, Perm: 4, ID: 1000}, {Tag: acl.GroupObj}, {Tag: acl.Mask, Perm: 4}, {Tag: acl.Other}}
	if err := lab1000.Setxattr(ctx, mineF, acl.XattrAccess, a.Encode(), 0); err != nil {
		t.Fatal(err)
	}
	for who, want := range map[*client.Client]uint32{admin: 5000, lab1000: 1000} {
		v, err := who.Getxattr(ctx, mineF, acl.XattrAccess)
		got, perr := acl.Parse(v)
		if err != nil || perr != nil || len(got) != 5 || got[1].ID != want {
			t.Errorf("the ACL reads %v (%v, %v); want user %d", got, err, perr, want)
		}
	}
	// deny_unknown: a uid lab's map does not name is refused.
	if _, err := connect(lab, &pb.Cred{Uid: 1234, Gid: 1000}).Lookup(ctx, fid.Root, "shared"); !errors.Is(err, syscall.EACCES) {
		t.Errorf("lookup by uid 1234 through lab (deny_unknown): %v, want EACCES", err)
	}

	// A mount with alice's certificate: root is squashed there too.
	if _, err := os.Stat("/dev/fuse"); err == nil && os.Geteuid() == 0 {
		t.Setenv("NACRE_TLS_DIR", alice)
		m := mountFuse(t, cl)
		for _, name := range []string{"secret", "acl-secret"} {
			if b, err := os.ReadFile(m.Path("home1000", name)); !errors.Is(err, syscall.EACCES) {
				t.Errorf("cat of %s by root on alice's mount: %q, %v; want EACCES", name, b, err)
			}
		}
		if err := os.Chown(m.Path("home1000", "secret"), 0, 0); !errors.Is(err, syscall.EPERM) {
			t.Errorf("chown of the secret by root on alice's mount: %v, want EPERM", err)
		}
		p := m.Path("shared", "by-root-on-mount")
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Sys().(*syscall.Stat_t).Uid != nobody {
			t.Errorf("a file root made on alice's mount: %v, %v; want it owned by %d", fi, err, nobody)
		}
		if err := m.Umount(); err != nil {
			t.Error(err)
		}
	} else {
		t.Log("no FUSE here (or not root): the mount's part is left out")
	}

	// Removed: root through alice is root again within seconds.
	if out, err := run(cl.TLSDir, "nodemap", "remove", "--client", "alice"); err != nil {
		t.Fatalf("nodemap remove: %v\n%s", err, out)
	}
	if !wait.Poll(10*time.Second, func() bool {
		ino, _, err := aliceRoot.Create(ctx, sharedF, fmt.Sprintf("probe-%d", time.Now().UnixNano()), 0o644, client.CreateOpts{Exclusive: true})
		return err == nil && ino.Uid == 0
	}) {
		t.Fatal("10 s after nodemap remove, root through alice is still squashed")
	}
	if out, err := run(cl.TLSDir, "nodemap", "remove", "--client", "alice"); err == nil || !strings.Contains(out, `no nodemap for client "alice"`) {
		t.Errorf("remove of a client without a nodemap: %v\n%s", err, out)
	}
}

// TestNodemapNeedsTLS: a cluster without TLS has no certificate names,
// and `nacre nodemap` says so and how to fix it.
func TestNodemapNeedsTLS(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	for _, args := range [][]string{{"nodemap"}, {"nodemap", "set", "--client", "alice", "--squash-root", "--trusted"}} {
		out, err := cl.Run(args...)
		if err == nil || !strings.Contains(out, "no TLS") || !strings.Contains(out, "nacre up --tls") {
			t.Errorf("nacre %s without TLS: %v, want a refusal naming the fix:\n%s", strings.Join(args, " "), err, out)
		}
	}
}
