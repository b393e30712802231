package itest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// Remote directories (issue 28): a directory made on another MDT with
// nacre mkdir -i, used through the library, the CLI and a FUSE mount.

// waitInodes waits until the objects each MDT holds are want, as the
// MDTs answer statfs now.
func waitInodes(t *testing.T, cl *testcluster.Cluster, c *client.Client, what string, want map[uint32]uint64) {
	t.Helper()
	var got map[uint32]uint64
	if !wait.Poll(10*time.Second, func() bool {
		got = mdtInodes(t, c)
		return maps.Equal(got, want)
	}) {
		t.Fatalf("objects per MDT %s: %v, want %v (transactions open: %v)", what, got, want, dtxOpen(t, cl))
	}
}

// mdtInodes is the number of objects each MDT holds, by index.
func mdtInodes(t *testing.T, c *client.Client) map[uint32]uint64 {
	t.Helper()
	st, err := c.MDTStatfs(context.Background())
	if err != nil {
		t.Fatalf("statfs of the MDTs: %v", err)
	}
	m := map[uint32]uint64{}
	for idx, s := range st {
		m[idx] = s.InodesTotal - s.InodesFree
	}
	return m
}

// dtxOpen is what each MDT's nacre_mds_dtx_open says, by index.
func dtxOpen(t *testing.T, cl *testcluster.Cluster) map[uint32]float64 {
	t.Helper()
	var st cli.ClusterStatus
	out, _ := cl.Run("status", "--json")
	json.Unmarshal([]byte(out), &st)
	m := map[uint32]float64{}
	for _, ts := range st.Targets {
		if ts.Kind == "mdt" && ts.MetricsURL != "" {
			m[ts.Index] += scrapeFamilies(t, ts.MetricsURL).sum("nacre_mds_dtx_open", nil)
		}
	}
	return m
}

// checkerClean runs the checker (a dry run) on both MDTs and fails the
// test on any inconsistency either reports.
func checkerClean(t *testing.T, cl *testcluster.Cluster) {
	t.Helper()
	for _, mdt := range []string{"0", "1"} {
		r := lfsckRun(t, cl, "--mdt", mdt, "-n")
		if inc, _ := found(r); inc != 0 {
			t.Fatalf("the checker found %d inconsistencies on MDT%s: %s", inc, mdt, summary(r))
		}
	}
}

func TestRemoteDirectories(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of two MDTs")
	}
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{MDTs: 2, OSTs: 1})
	c := cl.Client(t)
	ctx := context.Background()
	must := mustOf(t)

	if out, err := cl.Run("mkdir", "-i", "1", "/r"); err != nil {
		t.Fatalf("nacre mkdir -i 1 /r: %v\n%s", err, out)
	}
	if out, err := cl.Run("mkdir", "-i", "5", "/x"); err == nil || !strings.Contains(out, "no MDT0005") {
		t.Fatalf("mkdir -i 5 with two MDTs: %v\n%s", err, out)
	}
	waitInodes(t, cl, c, "after one remote mkdir (the root on MDT0, the directory on MDT1)", map[uint32]uint64{0: 1, 1: 1})

	m := mountFuse(t, cl)
	r := m.Path("r")
	must(os.WriteFile(filepath.Join(r, "f"), []byte("on MDT1"), 0o644))
	must(os.MkdirAll(filepath.Join(r, "d", "e"), 0o755))
	must(os.Mkdir(m.Path("local"), 0o755))
	if b, err := os.ReadFile(filepath.Join(r, "f")); err != nil || string(b) != "on MDT1" {
		t.Fatalf("read a file of the remote directory: %q %v", b, err)
	}
	ents, err := os.ReadDir(m.Path())
	if err != nil || len(ents) != 2 {
		t.Fatalf("readdir of the root: %v %v", ents, err)
	}
	var st syscall.Stat_t
	must(syscall.Stat(r, &st))
	if st.Mode&syscall.S_IFMT != syscall.S_IFDIR || st.Nlink != 3 {
		t.Fatalf("stat of the remote directory: mode %o nlink %d, want a directory with nlink 3", st.Mode, st.Nlink)
	}
	must(syscall.Stat(m.Path(), &st))
	if st.Nlink != 4 {
		t.Fatalf("root nlink %d with two subdirectories (one remote), want 4", st.Nlink)
	}
	waitInodes(t, cl, c, "(root and local on MDT0; r, f, d, e on MDT1)", map[uint32]uint64{0: 2, 1: 4})
	// Files the mount opened and closed on both MDTs, then removed by
	// another client, are kept while the mount may have them open and
	// destroyed once its (batched) closes reach each file's own MDT.
	lf, err := c.Resolve(ctx, "/local", false)
	must(err)
	rf, err := c.Resolve(ctx, "/r", false)
	must(err)
	for i := 0; i < 4; i++ {
		must(os.WriteFile(m.Path("local", fmt.Sprint("c", i)), []byte("x"), 0o644))
		must(os.WriteFile(filepath.Join(r, fmt.Sprint("c", i)), []byte("x"), 0o644))
	}
	for i := 0; i < 4; i++ {
		if _, err := c.Unlink(ctx, fid.FromPB(lf.Fid), fmt.Sprint("c", i)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Unlink(ctx, fid.FromPB(rf.Fid), fmt.Sprint("c", i)); err != nil {
			t.Fatal(err)
		}
	}
	// And removed by the mount itself, its closes still batched.
	for round := 0; round < 10; round++ {
		for i := 0; i < 2; i++ {
			must(os.WriteFile(m.Path("local", fmt.Sprint("m", i)), []byte("x"), 0o644))
			must(os.WriteFile(filepath.Join(r, fmt.Sprint("m", i)), []byte("x"), 0o644))
		}
		for i := 0; i < 2; i++ {
			must(os.Remove(m.Path("local", fmt.Sprint("m", i))))
			must(os.Remove(filepath.Join(r, fmt.Sprint("m", i))))
		}
	}
	waitInodes(t, cl, c, "after files closed by the mount and removed by it or another client", map[uint32]uint64{0: 2, 1: 4})
	// Where each directory's entries live: the CLI and the mount agree.
	for _, d := range []struct {
		path string
		mdt  int
	}{{"/r", 1}, {"/local", 0}, {"/", 0}} {
		out, err := cl.Run("getdirstripe", "--json", d.path)
		var ds cli.DirStripeJSON
		if err != nil || json.Unmarshal([]byte(out), &ds) != nil || ds.StripeCount != 0 || ds.StripeIndex != d.mdt {
			t.Fatalf("getdirstripe --json %s: %v %q, want stripe_index %d", d.path, err, out, d.mdt)
		}
		buf := make([]byte, 128)
		n, err := syscall.Getxattr(m.Path(d.path), "nacre.lmv", buf)
		if want := fmt.Sprintf("stripe_count=0 stripe_index=%d hash=none", d.mdt); err != nil || string(buf[:n]) != want {
			t.Fatalf("nacre.lmv of %s: %q %v, want %q", d.path, buf[:max(n, 0)], err, want)
		}
	}
	if out, err := cl.Run("getdirstripe", "/r/f"); err == nil || !strings.Contains(out, "not a directory") {
		t.Fatalf("getdirstripe of a file: %v %q", err, out)
	}
	// Within the remote directory, renames and links are on one MDT.
	must(os.Rename(filepath.Join(r, "f"), filepath.Join(r, "d", "g")))
	must(os.Link(filepath.Join(r, "d", "g"), filepath.Join(r, "h")))
	// Across MDTs they are not supported yet: EXDEV, which mv turns
	// into a copy.
	if err := os.Rename(filepath.Join(r, "h"), m.Path("local", "h")); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("rename across MDTs: %v, want EXDEV", err)
	}
	if err := os.Link(filepath.Join(r, "h"), m.Path("local", "h")); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("link across MDTs: %v, want EXDEV", err)
	}
	// A remote directory's own name moves between directories of its
	// parent's MDT (its linkEA on MDT1 follows); not below itself.
	must(os.Rename(r, m.Path("local", "r2")))
	if b, err := os.ReadFile(m.Path("local", "r2", "h")); err != nil || string(b) != "on MDT1" {
		t.Fatalf("read through the moved remote directory: %q %v", b, err)
	}
	if err := os.Rename(m.Path("local"), m.Path("local", "r2", "inside")); err == nil {
		t.Fatal("a directory moved below a remote directory of its own")
	}
	must(os.Rename(m.Path("local", "r2"), r))
	// Renames in a row: each waits for the one before to finish on MDT1
	// (its linkEA), not refused.
	cur := "/r"
	for i := 0; i < 20; i++ {
		next := fmt.Sprintf("/r-%d", i)
		if err := c.Rename(ctx, fid.Root, cur[1:], fid.Root, next[1:], 0); err != nil {
			t.Fatalf("rename %d of a remote directory in a row: %v", i, err)
		}
		cur = next
	}
	if err := c.Rename(ctx, fid.Root, cur[1:], fid.Root, "r", 0); err != nil {
		t.Fatal(err)
	}
	if paths, err := c.Fid2Path(ctx, fid.FromPB(mustResolve(t, c, "/r/d/g").Fid)); err != nil || len(paths) != 2 {
		t.Fatalf("fid2path after moving the remote directory there and back: %v %v", paths, err)
	}
	// fid2path crosses MDTs both ways.
	if out, err := cl.Run("mkdir", "-i", "0", "/r/back"); err != nil {
		t.Fatalf("mkdir -i 0 below a directory of MDT1: %v\n%s", err, out)
	}
	must(os.WriteFile(filepath.Join(r, "back", "z"), []byte("z"), 0o644))
	z, err := c.Resolve(ctx, "/r/back/z", false)
	must(err)
	paths, err := c.Fid2Path(ctx, fid.FromPB(z.Fid))
	if err != nil || len(paths) != 1 || paths[0] != "/r/back/z" {
		t.Fatalf("fid2path of a file two MDT crossings down: %v %v", paths, err)
	}
	g, err := c.Resolve(ctx, "/r/d/g", false)
	must(err)
	paths, err = c.Fid2Path(ctx, fid.FromPB(g.Fid))
	if err != nil || len(paths) != 2 {
		t.Fatalf("fid2path of a file with two names on MDT1: %v %v", paths, err)
	}
	checkerClean(t, cl)

	// rmdir of a remote directory: refused while it has entries, then
	// both halves go.
	if err := syscall.Rmdir(r); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a remote directory with entries: %v, want ENOTEMPTY", err)
	}
	must(os.RemoveAll(r))
	if _, err := os.Stat(r); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the remote directory is still there: %v", err)
	}
	waitInodes(t, cl, c, "after removing the remote tree", map[uint32]uint64{0: 2, 1: 0})
	must(syscall.Stat(m.Path(), &st))
	if st.Nlink != 3 {
		t.Fatalf("root nlink %d after the rmdir, want 3", st.Nlink)
	}
	// -i -1: the MDT with the most free inodes; on one device, the one
	// that holds fewer (MDT1 holds none now).
	if out, err := cl.Run("mkdir", "-i", "-1", "/auto"); err != nil {
		t.Fatalf("mkdir -i -1: %v\n%s", err, out)
	}
	if out, err := cl.Run("getdirstripe", "/auto"); err != nil || !strings.Contains(out, "lmv_stripe_offset: 1") {
		t.Fatalf("mkdir -i -1 with MDT1 empty made: %v %s", err, out)
	}
	checkerClean(t, cl)
}

// TestRemoteDirectoryCrashes kills MDT0's server (the coordinator) at each
// step of a remote mkdir, rmdir and rename, and MDT1's (the participant)
// once it applied its first step: after the restart the operation is done
// exactly once, nothing is left half done on either MDT, and the checker
// finds nothing.
func TestRemoteDirectoryCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("crashes an MDT of a cluster of two, again and again")
	}
	// An intent waits 1 s, not 5, before its MDT asks the coordinator.
	cl := testcluster.Start(t, testcluster.Options{MDTs: 2, OSTs: 1, Env: []string{"NACRE_DTX_RESOLVE_AFTER=1s"}})
	c := cl.Client(t)
	ctx := context.Background()
	// Each point crashes MDT0's server (the coordinator), but the last,
	// which crashes MDT1's (the participant) once it applied a step.
	points := []string{"mds.dtx.before_prepare", "mds.dtx.after_prepare", "mds.dtx.after_commit", "mds.dtx.after_finish", "mds.dtx.served"}
	for i, point := range points {
		victim := "mdt0"
		if point == "mds.dtx.served" {
			victim = "mdt1"
		}
		for _, op := range []string{"mkdir", "rmdir", "rename"} {
			name := fmt.Sprintf("d%d", i)
			if op != "mkdir" {
				// The directory to remove, made without a fault.
				if _, _, err := c.Create(ctx, fid.Root, name, syscall.S_IFDIR|0o755, client.CreateOpts{Exclusive: true, MDT: ptr(uint32(1))}); err != nil {
					t.Fatalf("%s: make %s: %v", point, name, err)
				}
			}
			if out, err := cl.Run("fault", "arm", point+"=crash*1", "--target", victim); err != nil {
				t.Fatalf("arm %s: %v\n%s", point, err, out)
			}
			done := make(chan error, 1)
			go func() {
				switch op {
				case "mkdir":
					_, _, err := c.Create(ctx, fid.Root, name, syscall.S_IFDIR|0o755, client.CreateOpts{Exclusive: true, MDT: ptr(uint32(1))})
					done <- err
				case "rmdir":
					done <- c.Rmdir(ctx, fid.Root, name)
				default:
					done <- c.Rename(ctx, fid.Root, name, fid.Root, name+"m", 0)
				}
			}()
			pid := cl.Pid(victim)
			if !wait.Poll(20*time.Second, func() bool { return !procAlive(pid) }) {
				t.Fatalf("%s %s: %s did not crash at %s", op, name, victim, point)
			}
			cl.Restart()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s %s with a crash at %s: %v", op, name, point, err)
				}
			case <-time.After(90 * time.Second):
				t.Fatalf("%s %s with a crash at %s: no answer", op, name, point)
			}
			_, err := c.Lookup(ctx, fid.Root, name)
			if op == "mkdir" && err != nil {
				t.Fatalf("after mkdir with a crash at %s: %v", point, err)
			}
			if op != "mkdir" && !errors.Is(err, syscall.ENOENT) {
				t.Fatalf("after %s with a crash at %s: the name is there (%v)", op, point, err)
			}
			want := uint64(0)
			if op != "rmdir" {
				want = 1
			}
			if op == "rename" {
				moved, err := c.Lookup(ctx, fid.Root, name+"m")
				if err != nil {
					t.Fatalf("after rename with a crash at %s: the new name: %v", point, err)
				}
				if !wait.Poll(30*time.Second, func() bool {
					ino, err := c.GetattrLinks(ctx, fid.FromPB(moved.Fid))
					return err == nil && len(ino.Links) == 1 && string(ino.Links[0].Name) == name+"m"
				}) {
					t.Fatalf("after rename with a crash at %s: the linkEA on MDT1 never followed", point)
				}
			}
			// What the crash left open is finished within seconds.
			if !wait.Poll(30*time.Second, func() bool {
				o := dtxOpen(t, cl)
				return o[0] == 0 && o[1] == 0 && mdtInodes(t, c)[1] == want
			}) {
				t.Fatalf("%s %s, crash at %s: transactions still open: %v", op, name, point, dtxOpen(t, cl))
			}
			switch op {
			case "mkdir":
				if err := c.Rmdir(ctx, fid.Root, name); err != nil {
					t.Fatal(err)
				}
			case "rename":
				if err := c.Rmdir(ctx, fid.Root, name+"m"); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	checkerClean(t, cl)
}

func ptr[T any](v T) *T { return &v }

func procAlive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// TestRemoteDirectoryDamage: the two kinds of damage to a remote
// directory's halves, each found by the checker of the MDT that holds
// the half left, in a dry run without changing anything, repaired by a
// real run, and clean after.
func TestRemoteDirectoryDamage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of two MDTs")
	}
	cl := testcluster.Start(t, testcluster.Options{MDTs: 2, OSTs: 1})
	c := cl.Client(t)
	ctx := context.Background()
	cases := []struct {
		kind, counter string
		finder        string // the MDT whose checker finds it
		back          bool   // the repair gives the directory back
	}{
		{"remote_dangling", "remote_dangling", "0", false},
		{"remote_lost_name", "remote_lost_dirent", "1", true},
	}
	for i, tc := range cases {
		t.Run(tc.kind, func(t *testing.T) {
			name := fmt.Sprintf("r%d", i)
			if out, err := cl.Run("mkdir", "-i", "1", "/"+name); err != nil {
				t.Fatalf("mkdir -i 1: %v\n%s", err, out)
			}
			checkerClean(t, cl)
			if out, err := cl.Run("fault", "inject", tc.kind, "--path", "/"+name); err != nil {
				t.Fatalf("inject %s: %v\n%s", tc.kind, err, out)
			}
			dry := lfsckRun(t, cl, "--mdt", tc.finder, "-n")
			if got := dry.Components["namespace"].Counters[tc.counter]; got.Inconsistent != 1 || got.Repaired != 0 {
				t.Fatalf("dry run on MDT%s: want 1 namespace.%s found, none repaired; got %s", tc.finder, tc.counter, summary(dry))
			}
			if f, _ := found(dry); f != 1 {
				t.Fatalf("dry run on MDT%s: %s", tc.finder, summary(dry))
			}
			real := lfsckRun(t, cl, "--mdt", tc.finder)
			if got := real.Components["namespace"].Counters[tc.counter]; got.Repaired != 1 {
				t.Fatalf("real run on MDT%s: want namespace.%s repaired; got %s", tc.finder, tc.counter, summary(real))
			}
			checkerClean(t, cl)
			_, err := c.Lookup(ctx, fid.Root, name)
			if !tc.back {
				if !errors.Is(err, syscall.ENOENT) {
					t.Fatalf("after the repair the dangling name is still there: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("after the repair the directory has no name: %v", err)
			}
			d, err := c.Resolve(ctx, "/"+name, false)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.Create(ctx, fid.FromPB(d.Fid), "f", syscall.S_IFREG|0o644, client.CreateOpts{}); err != nil {
				t.Fatalf("create in the directory given back: %v", err)
			}
			root, _ := c.Getattr(ctx, fid.Root)
			if root.Nlink != 3 {
				t.Fatalf("root nlink %d after the name came back, want 3", root.Nlink)
			}
		})
	}
}

func mustResolve(t *testing.T, c *client.Client, p string) *pb.Inode {
	t.Helper()
	ino, err := c.Resolve(context.Background(), p, false)
	if err != nil {
		t.Fatalf("resolve %s: %v", p, err)
	}
	return ino
}

// TestRemoteDirectoryRaces: one client makes and removes a remote
// directory again and again while another creates and removes files in
// it. Every create lands in a directory that exists until its rmdir (an
// rmdir either finds it empty and holds it, or answers ENOTEMPTY), nothing
// is left behind, and the checker finds nothing.
func TestRemoteDirectoryRaces(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of two MDTs")
	}
	cl := testcluster.Start(t, testcluster.Options{MDTs: 2, OSTs: 1})
	a, b := cl.Client(t), cl.Client(t)
	ctx := context.Background()
	one := uint32(1)
	stop := time.Now().Add(4 * time.Second)
	var made, removed, created int
	errs := make(chan error, 2)
	go func() {
		for time.Now().Before(stop) {
			if _, _, err := a.Create(ctx, fid.Root, "x", syscall.S_IFDIR|0o777, client.CreateOpts{Exclusive: true, MDT: &one}); err != nil && !errors.Is(err, syscall.EEXIST) {
				errs <- fmt.Errorf("mkdir: %w", err)
				return
			} else if err == nil {
				made++
			}
			err := a.Rmdir(ctx, fid.Root, "x")
			switch {
			case err == nil:
				removed++
			case errors.Is(err, syscall.ENOTEMPTY):
			default:
				errs <- fmt.Errorf("rmdir: %w", err)
				return
			}
		}
		errs <- nil
	}()
	go func() {
		for i := 0; time.Now().Before(stop); i++ {
			x, err := b.Lookup(ctx, fid.Root, "x")
			if errors.Is(err, syscall.ENOENT) {
				continue
			}
			if err != nil {
				errs <- fmt.Errorf("lookup: %w", err)
				return
			}
			name := fmt.Sprint("f", i)
			_, _, err = b.Create(ctx, fid.FromPB(x.Fid), name, syscall.S_IFREG|0o644, client.CreateOpts{Exclusive: true})
			if errors.Is(err, syscall.ENOENT) {
				continue // removed (or being removed) in between
			}
			if err != nil {
				errs <- fmt.Errorf("create: %w", err)
				return
			}
			created++
			if _, err := b.Unlink(ctx, fid.FromPB(x.Fid), name); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs <- fmt.Errorf("unlink: %w", err)
				return
			}
		}
		errs <- nil
	}()
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d mkdirs, %d rmdirs, %d files made inside", made, removed, created)
	if made < 10 || removed < 5 || created < 10 {
		t.Fatalf("too little happened to race: %d mkdirs, %d rmdirs, %d creates", made, removed, created)
	}
	if err := a.Rmdir(ctx, fid.Root, "x"); err != nil && !errors.Is(err, syscall.ENOENT) {
		t.Fatal(err)
	}
	if !wait.Poll(15*time.Second, func() bool {
		o := dtxOpen(t, cl)
		return o[0] == 0 && o[1] == 0 && maps.Equal(mdtInodes(t, a), map[uint32]uint64{0: 1, 1: 0})
	}) {
		t.Fatalf("left behind: objects %v, transactions %v", mdtInodes(t, a), dtxOpen(t, cl))
	}
	checkerClean(t, cl)
}
