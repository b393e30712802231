package itest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
	"nacre/test/testdisk"
)

// TestStatsCountOperations: the per-target counters behind `nacre stats`
// count exactly the operations and bytes a client causes (the metrics
// pages themselves: TestMetricsMoveWithOperations in metrics_test.go).
func TestStatsCountOperations(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	ctx := context.Background()
	before, err := cli.CollectStats(ctx, cl.MGS, "", 10*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := cl.Client(t)
	const files = 25
	for i := 0; i < files; i++ {
		ino, _, err := c.Create(ctx, fid.Root, fmt.Sprint("m", i), 0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: 1}})
		if err != nil {
			t.Fatal(err)
		}
		f := c.OpenInode(ino)
		if _, err := f.WriteAt(ctx, make([]byte, 100000), 0); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, err := cli.CollectStats(ctx, cl.MGS, "", 10*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	get := func(s *cli.StatsJSON, name string) cli.TargetStats {
		for _, ts := range s.Targets {
			if ts.Name == name {
				return ts
			}
		}
		t.Fatalf("no target %s in stats", name)
		return cli.TargetStats{}
	}
	m0, m1 := get(before, "nacre-MDT0000"), get(after, "nacre-MDT0000")
	if d := m1.Ops["create"].Count - m0.Ops["create"].Count; d != files {
		t.Fatalf("MDT create counter moved by %v, want %d", d, files)
	}
	if m1.Ops["create"].MeanUs <= 0 && m1.Ops["create"].Count == 0 {
		t.Fatal("no create latency recorded")
	}
	o0, o1 := get(before, "nacre-OST0000"), get(after, "nacre-OST0000")
	if d := o1.Counters["data_written_bytes"] - o0.Counters["data_written_bytes"]; d != files*100000 {
		t.Fatalf("OST written bytes moved by %v, want %d", d, files*100000)
	}
	if o1.Counters["net_received_bytes"]-o0.Counters["net_received_bytes"] < files*100000 {
		t.Fatal("OST network counter did not count the data")
	}
	if _, ok := m1.Gauges["precreate_pool"]; !ok {
		t.Fatal("MDT precreate pool gauge missing")
	}
}

// TestStatsDiskBytesMatchTheDevice: the disk bytes `nacre stats` and `top`
// show for the targets add up to what their device wrote. The cluster
// lives alone on a loop device, so the device's counters hold only its
// writes: data and creates each within 20 %. The kernel's per-process
// figure (/proc/PID/io write_bytes) counted 2 GiB for 9 MiB the disk
// wrote.
func TestStatsDiskBytesMatchTheDevice(t *testing.T) {
	dev := testdisk.Ext4Loop(t, 1<<30)
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1, Dir: filepath.Join(dev.Dir, "cluster")})
	ctx := context.Background()
	c := cl.Client(t)
	statsBytes := func() float64 {
		s, err := cli.CollectStats(ctx, cl.MGS, "", 10*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		sum := 0.0
		for _, ts := range s.Targets {
			if ts.Error != "" {
				t.Fatalf("stats of %s: %s", ts.Name, ts.Error)
			}
			sum += ts.Counters["disk_written_bytes"]
		}
		return sum
	}
	measure := func(what string, work func()) (counted, device float64) {
		t.Helper()
		c0, d0 := statsBytes(), float64(dev.Written(t))
		work()
		// The MDT syncs its log within its commit window; its own sync
		// counts what it writes, as a sync of the device would not.
		if err := c.SyncMDTs(ctx); err != nil {
			t.Fatal(err)
		}
		d1 := float64(dev.Written(t)) // syncs what the stores left unsynced
		c1 := statsBytes()
		t.Logf("%s: stats count %.1f MiB, the device wrote %.1f MiB", what, (c1-c0)/(1<<20), (d1-d0)/(1<<20))
		return c1 - c0, d1 - d0
	}
	create := func(name string, size int) {
		ino, _, err := c.Create(ctx, fid.Root, name, 0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if size == 0 {
			return
		}
		f := c.OpenInode(ino)
		buf := make([]byte, 1<<20)
		for off := 0; off < size; off += len(buf) {
			if _, err := f.WriteAt(ctx, buf, uint64(off)); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}

	got, want := measure("4 files of 16 MiB", func() {
		for i := range 4 {
			create(fmt.Sprint("data", i), 16<<20)
		}
	})
	if got < 0.8*want || got > 1.2*want {
		t.Fatalf("writing 64 MiB of data: stats count %.0f bytes, the device wrote %.0f; want within 20%%", got, want)
	}
	got, want = measure("3,000 creates", func() {
		for i := range 3000 {
			create(fmt.Sprint("empty", i), 0)
		}
	})
	if got < 0.8*want || got > 1.2*want {
		t.Fatalf("3,000 creates: stats count %.0f bytes, the device wrote %.0f; want within 20%%", got, want)
	}
}
