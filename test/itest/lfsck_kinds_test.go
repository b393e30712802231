package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/layout"
	"nacre/test/testcluster"
)

func needsFlags(k fault.Damage) []string {
	var out []string
	for _, f := range strings.Fields(k.Needs) {
		out = append(out, f)
	}
	return out
}

// otherFlags are the repair options (-o -c -C) kind k does not need.
func otherFlags(k fault.Damage) []string {
	var out []string
	for _, f := range []string{"-o", "-c", "-C"} {
		if !strings.Contains(k.Needs, f) {
			out = append(out, f)
		}
	}
	return out
}

// lpfList lists .nacre/lost+found (empty before the first adoption).
func lpfList(t *testing.T, ctx context.Context, c *client.Client) map[string]fid.FID {
	t.Helper()
	out := map[string]fid.FID{}
	ino, err := c.Resolve(ctx, "/.nacre/lost+found", true)
	if err != nil {
		return out
	}
	ents, err := c.ReadDirAll(ctx, fid.FromPB(ino.Fid), false)
	if err != nil {
		t.Fatalf("readdir lost+found: %v", err)
	}
	for _, e := range ents {
		if n := string(e.Name); n != "." && n != ".." {
			out[n] = fid.FromPB(e.Fid)
		}
	}
	return out
}

// TestLfsckEveryFaultKind drives every kind of damage through the real
// servers and the nacre binary: `nacre fault inject` damages one object;
// a dry run reports exactly it and changes no byte of any target's store;
// for a kind whose repair needs -c, -C or -o, a real run with every other
// option reports it and repairs nothing; a real run repairs it; a second
// run finds nothing; lost+found gains exactly the entries the kind must
// produce; the files read back with their data.
func TestLfsckEveryFaultKind(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()
	if r := lfsckRun(t, cl, "-r"); func() bool { f, _ := found(r); return f != 0 }() {
		t.Fatalf("a new file system is inconsistent: %s", summary(r))
	}
	out, err := cl.Run("fault", "list", "--json")
	var kinds []struct{ Kind, Component, Target string }
	if err != nil || json.Unmarshal([]byte(out), &kinds) != nil || len(kinds) != len(fault.Kinds) || kinds[0].Kind == "" || kinds[0].Target == "" {
		t.Fatalf("fault list --json: %v\n%s", err, out)
	}
	if out, err := cl.Run("lfsck", "status", "-t", "namespace"); err != nil || !strings.Contains(out, "status: completed") {
		t.Fatalf("lfsck status: %v\n%s", err, out)
	}
	start := time.Now().Add(-time.Minute)
	for i, k := range fault.Kinds {
		k := k
		if fault.MDTsNeeded(k.Kind) > 1 {
			continue // TestRemoteDirectoryDamage
		}
		t.Run(string(k.Kind), func(t *testing.T) {
			tr := buildLTree(t, ctx, c, fmt.Sprintf("k%02d", i))
			if out, err := cl.Run("fault", "inject", string(k.Kind), "--path", tr.target(k)); err != nil {
				t.Fatalf("inject: %v\n%s", err, out)
			}
			want := uint64(1)
			if k.Count == "stripes" {
				want = 2
			}
			flags := needsFlags(k)
			before := quiesce(t, cl)
			dry := lfsckRun(t, cl, append([]string{"-r", "-n"}, flags...)...)
			if after := storeDigests(t, cl); after != before {
				t.Fatalf("the dry run changed a store:\n%s\n%s", before, after)
			}
			if f, r := found(dry); f != want || r != 0 || dry.Components[k.Component].Counters[k.Counter].Inconsistent != want {
				t.Fatalf("dry run: want %d %s.%s, got %s", want, k.Component, k.Counter, summary(dry))
			}
			lpf0 := lpfList(t, ctx, c)
			if k.Needs != "" {
				// Without its option the repair does not happen; OST
				// objects no layout names are looked for only with -o.
				wantFound, counter := want, k.Counter
				if k.Component == "layout" && k.Counter == "orphan" {
					wantFound = 0
				}
				others := otherFlags(k)
				if k.Kind == "slot_lost" {
					// Without -o the slot is only dangling; -c would give
					// it a new object (lfsck's own tests cover that).
					wantFound, counter, others = want, "dangling", []string{"-C"}
				}
				r := lfsckRun(t, cl, append([]string{"-r"}, others...)...)
				if got := r.Components[k.Component].Counters[counter]; got.Inconsistent != wantFound || got.Repaired != 0 {
					t.Fatalf("real run with %v (not %s): want %d %s.%s found, none repaired; got %s", others, k.Needs, wantFound, k.Component, counter, summary(r))
				}
				if f, rp := found(r); f != wantFound || rp != 0 {
					t.Fatalf("real run with %v: %s", others, summary(r))
				}
				if l := lpfList(t, ctx, c); fmt.Sprint(l) != fmt.Sprint(lpf0) {
					t.Fatalf("real run with %v (not %s) changed lost+found:\n%v\n%v", others, k.Needs, lpf0, l)
				}
			}
			real := lfsckRun(t, cl, append([]string{"-r"}, flags...)...)
			if got := real.Components[k.Component].Counters[k.Counter]; got.Repaired != want {
				t.Fatalf("real run: want %d %s.%s repaired, got %s", want, k.Component, k.Counter, summary(real))
			}
			if f, r := found(real); f != want || r != want {
				t.Fatalf("real run: %s", summary(real))
			}
			again := lfsckRun(t, cl, append([]string{"-r"}, flags...)...)
			if f, _ := found(again); f != 0 {
				t.Fatalf("second run: %s", summary(again))
			}
			added := map[string]fid.FID{}
			for n, f := range lpfList(t, ctx, c) {
				if _, ok := lpf0[n]; !ok {
					added[n] = f
				}
			}
			checkLTree(t, ctx, c, tr, k, added)
			checkTimes(t, ctx, c, start, "/", tr.path, "/.nacre", "/.nacre/lost+found")
		})
	}
}

// checkTimes checks that every object under the paths (the second
// path's whole tree, the others and their entries) has mtime and ctime
// from after start: a repair gives what it changes or makes the time of
// the repair (it gave 1970).
func checkTimes(t *testing.T, ctx context.Context, c *client.Client, start time.Time, paths ...string) {
	t.Helper()
	var walk func(path string, f fid.FID, depth int)
	walk = func(path string, f fid.FID, depth int) {
		ino, err := c.Getattr(ctx, f)
		if err != nil {
			return // dangling: a kind the run left to its option
		}
		for what, ns := range map[string]int64{"mtime": ino.MtimeNs, "ctime": ino.CtimeNs} {
			if time.Unix(0, ns).Before(start) {
				t.Errorf("%s %s is %s, before the test began", path, what, time.Unix(0, ns).UTC().Format(time.RFC3339))
			}
		}
		if depth == 0 || ino.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return
		}
		ents, err := c.ReadDirAll(ctx, f, false)
		if err != nil {
			return
		}
		for _, e := range ents {
			if n := string(e.Name); n != "." && n != ".." && e.Fid != nil {
				walk(path+"/"+n, fid.FromPB(e.Fid), depth-1)
			}
		}
	}
	for i, p := range paths {
		ino, err := c.Resolve(ctx, p, false)
		if err != nil {
			continue // not made (yet)
		}
		depth := 1
		if i == 1 {
			depth = 64
		}
		walk(p, fid.FromPB(ino.Fid), depth)
	}
}

// checkLTree checks what tr reads back after kind k was repaired; added
// is what the repair added to lost+found, which must be exactly the
// entries the kind produces (docs/lfsck.md, lost+found: <FID>-<type>-<n>).
func checkLTree(t *testing.T, ctx context.Context, c *client.Client, tr *ltree, k fault.Damage, added map[string]fid.FID) {
	t.Helper()
	const ss = 64 << 10
	lpf := "/.nacre/lost+found/"
	resolves := func(path string, want fid.FID) *pb.Inode {
		t.Helper()
		ino, err := c.Resolve(ctx, path, false)
		if err != nil || fid.FromPB(ino.Fid) != want {
			t.Fatalf("%s resolves to %v, %v; want %v", path, ino.GetFid(), err, want)
		}
		return ino
	}
	gone := func(path string) {
		t.Helper()
		if ino, err := c.Resolve(ctx, path, false); err == nil {
			t.Fatalf("%s is back (%v)", path, fid.FromPB(ino.Fid))
		}
	}
	mustRead(t, ctx, c, tr.path+"/f2", tr.data2)
	if k.Kind != "lost_parent" {
		mustRead(t, ctx, c, tr.path+"/e/only", tr.dataOnly)
	}

	want := map[string]fid.FID{}
	switch k.Kind {
	case "orphan":
		want[tr.f1.String()+"-O-0"] = tr.f1
	case "lost_mdt_object":
		want[tr.f1.String()+"-R-0"] = tr.f1
	case "orphan_dir":
		want[tr.s.String()+"-D-0"] = tr.s // the injection drops the linkEA: no old parent known
	case "lost_parent":
		want[tr.e.String()+"-P-0"] = tr.e
	case "slot_conflict":
		name := tr.f1.String() + "-C-0"
		if f, ok := added[name]; ok && f != tr.f1 && !f.IsZero() {
			want[name] = f
		} else {
			t.Fatalf("lost+found: want %s holding a new file, got %v", name, added)
		}
	case "orphan_nopfid":
		for n, f := range added {
			if n == f.String()+"-N-0" && f != tr.f1 {
				want[n] = f
			}
		}
		if len(want) != 2 {
			t.Fatalf("lost+found: want two <newFID>-N-0 files, got %v", added)
		}
	default:
		if k.Data == "lost+found" {
			t.Fatalf("checkLTree does not know what %s puts in lost+found", k.Kind)
		}
	}
	if fmt.Sprint(added) != fmt.Sprint(want) {
		t.Fatalf("lost+found gained %v, want %v", added, want)
	}

	switch k.Data {
	case "intact":
		switch {
		case k.Kind == "nlink_less":
			resolves(tr.path+"/h2", tr.h1)
			if ino := resolves(tr.path+"/h1", tr.h1); ino.Nlink != 2 {
				t.Fatalf("h1: nlink %d, want 2", ino.Nlink)
			}
			mustRead(t, ctx, c, tr.path+"/h1", []byte("hard"))
		case k.Target == "file":
			resolves(tr.path+"/f1", tr.f1)
			mustRead(t, ctx, c, tr.path+"/f1", tr.data1)
			if k.Kind == "dirent_alien" {
				gone(tr.path + "/f1.alien")
			}
		case k.Target == "dir":
			if ino := resolves(tr.path+"/s", tr.s); ino.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				t.Fatalf("s: mode %o", ino.Mode)
			}
			if k.Kind == "dir_second_name" {
				gone(tr.path + "/s.second")
			}
		}
	case "stripe-lost":
		// Stripe 0 of f1 lost its data: zeros, the file keeps its length.
		resolves(tr.path+"/f1", tr.f1)
		mustRead(t, ctx, c, tr.path+"/f1", layout.View(tr.data1, ss, 2, map[int]bool{1: true}, 0))
		if k.Kind == "slot_conflict" {
			// The object that lost the slot, adopted at its slot in a
			// new file whose other stripe is a hole.
			checkHoleFile(t, ctx, c, lpf+tr.f1.String()+"-C-0", tr.data1, ss, 2, 0)
		}
	case "lost+found":
		switch k.Kind {
		case "orphan", "lost_mdt_object":
			gone(tr.path + "/f1")
			for n := range want {
				mustRead(t, ctx, c, lpf+n, tr.data1)
			}
		case "orphan_dir":
			gone(tr.path + "/s")
			for n := range want {
				if ino := resolves(lpf+n, tr.s); ino.Mode&syscall.S_IFMT != syscall.S_IFDIR {
					t.Fatalf("%s: mode %o", n, ino.Mode)
				}
			}
		case "lost_parent":
			gone(tr.path + "/e")
			resolves(lpf+tr.e.String()+"-P-0/only", tr.only)
			mustRead(t, ctx, c, lpf+tr.e.String()+"-P-0/only", tr.dataOnly)
		case "orphan_nopfid":
			gone(tr.path + "/f1")
			objs := map[string]bool{}
			for s := 0; s < 2; s++ {
				objs[string(layout.ObjectData(tr.data1, ss, 2, s))] = true
			}
			for n := range want {
				got, err := lfsckRead(t, ctx, c, lpf+n)
				if err != nil || !objs[string(got)] {
					t.Fatalf("%s reads back %d bytes (%v), not the data of one of f1's objects", n, len(got), err)
				}
				delete(objs, string(got))
			}
		}
	case "empty":
		// Re-created by the checker (-C): empty, 0600 file or 0700
		// directory, owner root.
		path, typ, perm := tr.path+"/f1", uint32(syscall.S_IFREG), uint32(0o600)
		target := tr.f1
		if k.Target == "dir" {
			path, typ, perm, target = tr.path+"/s", syscall.S_IFDIR, 0o700, tr.s
		}
		ino := resolves(path, target)
		if ino.Mode&syscall.S_IFMT != typ || ino.Mode&0o7777 != perm || ino.Uid != 0 ||
			ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_LFSCK_CREATED) == 0 {
			t.Fatalf("re-created %s: mode %o uid %d flags %x", path, ino.Mode, ino.Uid, ino.Flags)
		}
		if typ == syscall.S_IFDIR {
			ents, err := c.ReadDirAll(ctx, target, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if n := string(e.Name); n != "." && n != ".." {
					t.Fatalf("re-created %s holds %q", path, n)
				}
			}
		} else {
			mustRead(t, ctx, c, path, nil)
		}
	default:
		t.Fatalf("checkLTree does not know data %q of %s", k.Data, k.Kind)
	}
}

// checkHoleFile checks a file of count stripes of size ss whose only
// object is stripe s, holding what stripe s of data held: it reads as
// data on stripe s, zeros in the slots without an object, up to the end
// of stripe s's data.
func checkHoleFile(t *testing.T, ctx context.Context, c *client.Client, path string, data []byte, ss uint64, count, s int) {
	t.Helper()
	want := layout.View(data, ss, count, map[int]bool{s: true}, layout.EndOfStripe(len(data), ss, count, s))
	got, err := lfsckRead(t, ctx, c, path)
	if err != nil {
		t.Fatalf("read %s (a file with holes in its layout): %v", path, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s reads back %d bytes, want %d (stripe %d's data, zeros elsewhere)", path, len(got), len(want), s)
	}
}
