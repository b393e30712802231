package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/testcluster"
)

func replicaList(t *testing.T, cl *testcluster.Cluster, group string) []cli.ReplicaRow {
	t.Helper()
	out, err := cl.Run("replica", "list", "--dir", cl.Dir, "--target", group, "--json")
	if err != nil {
		t.Fatalf("nacre replica list: %v\n%s", err, out)
	}
	var rows []cli.ReplicaRow
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &rows); err != nil {
		t.Fatalf("replica list: %v\n%s", err, out)
	}
	return rows
}

func voters(rows []cli.ReplicaRow) (ids []uint64, leader uint64) {
	for _, r := range rows {
		if r.Role == "voter" {
			ids = append(ids, r.Replica)
		}
		if r.State == "leader" {
			leader = r.Replica
		}
	}
	return ids, leader
}

// TestReplicaAddRemoveReplaceOnline changes the MDT's group with `nacre
// replica` while clients work: a fourth replica joins (from a snapshot)
// and votes, a follower leaves, and then the leader itself is replaced
// (it hands over first). The MGS's group is replaced one replica too.
func TestReplicaAddRemoveReplaceOnline(t *testing.T) {
	cl := startReplicated(t)
	log := &opLog{}
	var ws []*nsWorker
	for i := 0; i < 2; i++ {
		ws = append(ws, newNSWorker(t, cl.Client(t), "w"+string(rune('a'+i)), log))
	}
	stop := make(chan struct{})
	errs := make(chan error, len(ws))
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.run(stop)
		}()
	}
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			wg.Wait()
		}
	}()
	time.Sleep(time.Second)
	run := func(args ...string) string {
		t.Helper()
		start := time.Now()
		out, err := cl.Run(append([]string{"replica"}, append(args, "--dir", cl.Dir)...)...)
		if err != nil {
			t.Fatalf("nacre replica %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("nacre replica %s (%.1fs):\n%s", strings.Join(args, " "), time.Since(start).Seconds(), strings.TrimSpace(out))
		return out
	}

	run("add", "--target", "mdt0")
	rows := replicaList(t, cl, "mdt0")
	ids, leader := voters(rows)
	if len(ids) != 4 {
		t.Fatalf("after add: voters %v, want 4\n%+v", ids, rows)
	}
	for _, r := range rows {
		if r.Replica == 4 && r.SnapsRecv == 0 {
			t.Errorf("replica 4 joined without a snapshot: %+v", r)
		}
	}
	// Remove a follower.
	var follower uint64
	for _, id := range ids {
		if id != leader {
			follower = id
			break
		}
	}
	run("remove", "--target", "mdt0", "--id", fmt.Sprint(follower))
	if ids, _ = voters(replicaList(t, cl, "mdt0")); len(ids) != 3 {
		t.Fatalf("after remove: voters %v, want 3", ids)
	}
	// Replace the leader.
	_, leader = voters(replicaList(t, cl, "mdt0"))
	run("replace", "--target", "mdt0", "--id", fmt.Sprint(leader))
	rows = replicaList(t, cl, "mdt0")
	ids, nl := voters(rows)
	if len(ids) != 3 || nl == leader || nl == 0 {
		t.Fatalf("after replacing the leader %d: voters %v, leader %d\n%+v", leader, ids, nl, rows)
	}
	for _, id := range ids {
		if id == leader || id == follower {
			t.Fatalf("replica %d is still a voter: %v", id, ids)
		}
	}
	// And one replica of the MGS.
	_, mgsLeader := voters(replicaList(t, cl, "mgs"))
	run("replace", "--target", "mgs", "--id", fmt.Sprint(mgsLeader))
	if ids, l := voters(replicaList(t, cl, "mgs")); len(ids) != 3 || l == mgsLeader {
		t.Fatalf("MGS after replacing its leader %d: voters %v, leader %d", mgsLeader, ids, l)
	}
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("workload: %v", err)
		}
	}
	log.mu.Lock()
	t.Logf("%d operations acknowledged during the changes; slowest %v (%s)", len(log.done), log.slow.Round(time.Millisecond), log.slowW)
	slow, slowW := log.slow, log.slowW
	log.mu.Unlock()
	if slow > maxStall {
		t.Errorf("a client waited %v for one operation (%s)", slow, slowW)
	}
	c := cl.Client(t)
	for _, w := range ws {
		w.verify(t, c)
	}
	checkUniqueObjects(t, c)
	if !t.Failed() {
		checkClean(t, cl)
	}
}

// TestReplicaSingleTarget: on a file system formatted without replicas,
// nacre replica list shows each group's one replica as the leading voter
// (not "down"), and membership commands are refused with the reason.
func TestReplicaSingleTarget(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	c := cl.Client(t)
	if _, _, err := c.Create(context.Background(), fid.Root, "f", 0o644, client.CreateOpts{}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"mgs", "mdt0"} {
		rows := replicaList(t, cl, g)
		if len(rows) != 1 {
			t.Fatalf("%s: %d replicas listed, want 1: %+v", g, len(rows), rows)
		}
		r := rows[0]
		if r.Role != "voter" || r.State != "leader" || r.Term == 0 || r.Applied == 0 || r.Pid == 0 {
			t.Errorf("%s: listed as %+v, want the leading voter with a term, an applied index and a pid", g, r)
		}
	}
	out, err := cl.Run("replica", "transfer", "--target", "mdt0")
	if err == nil || !strings.Contains(out, "single replica") || !strings.Contains(out, "--peers") {
		t.Errorf("replica transfer on a single replica: err %v, output\n%s\nwant a refusal naming the single replica and --peers", err, out)
	}
}
