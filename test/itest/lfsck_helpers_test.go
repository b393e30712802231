package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/lfsck"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// lfsckRun runs `nacre lfsck start ARGS --wait --json` and returns the
// report it prints at the end.
func lfsckRun(t *testing.T, cl *testcluster.Cluster, args ...string) *lfsck.Report {
	t.Helper()
	out, err := cl.Run(append([]string{"lfsck", "start", "--wait", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("nacre lfsck start %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return parseReport(t, out)
}

func parseReport(t *testing.T, out string) *lfsck.Report {
	t.Helper()
	i := strings.Index(out, "{")
	if i < 0 {
		t.Fatalf("no JSON in:\n%s", out)
	}
	r := &lfsck.Report{}
	// Decode only the first value: a message may follow it (start
	// --wait's on a run that did not complete).
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(r); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	return r
}

func lfsckQuery(t *testing.T, cl *testcluster.Cluster) *lfsck.Report {
	t.Helper()
	out, err := cl.Run("lfsck", "query", "--json")
	if err != nil {
		t.Fatalf("nacre lfsck query: %v\n%s", err, out)
	}
	return parseReport(t, out)
}

func storeDigests(t *testing.T, cl *testcluster.Cluster) string {
	t.Helper()
	out, err := cl.Run("lfsck", "digest")
	if err != nil {
		t.Fatalf("nacre lfsck digest: %v\n%s", err, out)
	}
	return out
}

func found(r *lfsck.Report) (inconsistent, repaired uint64) {
	for _, c := range r.Components {
		inconsistent += c.Inconsistent
		repaired += c.Repaired
	}
	return
}

func summary(r *lfsck.Report) string {
	var b strings.Builder
	for _, name := range []string{"scrub", "namespace", "layout"} {
		c := r.Components[name]
		fmt.Fprintf(&b, "%s[%s", name, c.Status)
		for k, v := range c.Counters {
			fmt.Fprintf(&b, " %s=%d/%d", k, v.Inconsistent, v.Repaired)
		}
		b.WriteString("] ")
	}
	return b.String()
}

// ltree is a small tree for damage: d/{f1 (2 stripes), f2 (2 stripes),
// h1 = h2 (hard links), s/ (empty), e/only}.
type ltree struct {
	path                   string
	f1, f2, h1, s, e, only fid.FID
	data1, data2, dataOnly []byte
}

func patterned(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*13) ^ seed
	}
	return b
}

func writeFile(t *testing.T, ctx context.Context, c *client.Client, parent fid.FID, name string, stripes int32, data []byte) fid.FID {
	t.Helper()
	ino, _, err := c.Create(ctx, parent, name, 0o644, client.CreateOpts{Exclusive: true,
		Layout: &pb.Layout{StripeCount: stripes, StripeSize: 64 << 10, StripeOffset: -1}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if len(data) > 0 {
		f := c.OpenInode(ino)
		if _, err := f.WriteAt(ctx, data, 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return fid.FromPB(ino.Fid)
}

func buildLTree(t *testing.T, ctx context.Context, c *client.Client, name string) *ltree {
	t.Helper()
	tr := &ltree{path: "/" + name, data1: patterned(200<<10+17, 1), data2: patterned(150<<10, 2), dataOnly: patterned(70<<10, 3)}
	d, err := c.Mkdir(ctx, fid.Root, name, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	df := fid.FromPB(d.Fid)
	tr.f1 = writeFile(t, ctx, c, df, "f1", 2, tr.data1)
	tr.f2 = writeFile(t, ctx, c, df, "f2", 2, tr.data2)
	tr.h1 = writeFile(t, ctx, c, df, "h1", 1, []byte("hard"))
	if _, err := c.Link(ctx, tr.h1, df, "h2"); err != nil {
		t.Fatal(err)
	}
	s, err := c.Mkdir(ctx, df, "s", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	tr.s = fid.FromPB(s.Fid)
	e, err := c.Mkdir(ctx, df, "e", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	tr.e = fid.FromPB(e.Fid)
	tr.only = writeFile(t, ctx, c, tr.e, "only", 1, tr.dataOnly)
	return tr
}

// target is the path a kind damages in tr.
func (tr *ltree) target(k fault.Damage) string {
	switch {
	case k.Kind == "nlink_less":
		return tr.path + "/h1"
	case k.Kind == "lost_parent":
		return tr.path + "/e/only"
	case k.Target == "dir":
		return tr.path + "/s"
	}
	return tr.path + "/f1"
}

func lfsckRead(t *testing.T, ctx context.Context, c *client.Client, path string) ([]byte, error) {
	t.Helper()
	ino, err := c.Resolve(ctx, path, true)
	if err != nil {
		return nil, err
	}
	f, err := c.Open(ctx, fid.FromPB(ino.Fid), syscall.O_RDONLY)
	if err != nil {
		return nil, err
	}
	size, err := f.Size(ctx)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(ctx, buf, 0)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return buf[:n], nil
}

func mustRead(t *testing.T, ctx context.Context, c *client.Client, path string, want []byte) {
	t.Helper()
	got, err := lfsckRead(t, ctx, c, path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	if !bytes.Equal(got, want) {
		at := min(len(got), len(want))
		for i := range at {
			if got[i] != want[i] {
				at = i
				break
			}
		}
		t.Fatalf("%s reads back %d bytes, want %d (first difference at %d)", path, len(got), len(want), at)
	}
}

// waitStatus polls until component has one of the statuses.
func waitStatus(t *testing.T, cl *testcluster.Cluster, component string, timeout time.Duration, statuses ...string) *lfsck.Report {
	t.Helper()
	var last *lfsck.Report
	wait.NoErr(t, timeout, fmt.Sprintf("%s to reach %v", component, statuses), func() error {
		out, err := cl.Run("lfsck", "query", "--json")
		if err != nil {
			return fmt.Errorf("lfsck query: %v", err)
		}
		last = parseReport(t, out)
		if slices.Contains(statuses, last.Components[component].Status) {
			return nil
		}
		return errors.New(summary(last))
	})
	return last
}

// quiesce waits until no target's store changes any more (the MDS
// destroys queued OST objects in the background after an injection).
func quiesce(t *testing.T, cl *testcluster.Cluster) string {
	t.Helper()
	last := storeDigests(t, cl)
	for i := 0; i < 50; i++ {
		time.Sleep(300 * time.Millisecond) // quiet: unchanged across this pause
		d := storeDigests(t, cl)
		if d == last {
			return d
		}
		last = d
	}
	t.Fatal("the stores keep changing")
	return ""
}
