package itest

import (
	"context"
	"fmt"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// TestStatsCountOperations: the per-target counters behind `nacre stats`
// count exactly the operations and bytes a client causes (the metrics
// pages themselves: TestMetricsMoveWithOperations in metrics_test.go).
func TestStatsCountOperations(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	ctx := context.Background()
	before, err := cli.CollectStats(ctx, cl.MGS, "", 10*time.Millisecond)
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
	after, err := cli.CollectStats(ctx, cl.MGS, "", 10*time.Millisecond)
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
