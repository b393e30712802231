package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
	"nacre/internal/localcluster"
	"nacre/internal/target"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
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
	time.Sleep(time.Second) // the workers get going
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
	// With --json: one document on standard output, the messages on
	// standard error.
	out, errOut, err := nacreIn(cl, "/", nil, "replica", "remove", "--target", "mdt0", "--id", fmt.Sprint(follower), "--dir", cl.Dir, "--json")
	var change cli.ReplicaChange
	if err != nil || json.Unmarshal([]byte(out), &change) != nil {
		t.Fatalf("replica remove --json: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if change.Action != "remove" || change.Target != "MDT0" || change.Replica != follower || !strings.Contains(errOut, "removed from MDT0") {
		t.Fatalf("replica remove --json: %+v\nstderr: %s", change, errOut)
	}
	if ids, _ = voters(change.Replicas); len(ids) != 3 || slices.Contains(ids, follower) {
		t.Fatalf("after remove, --json lists voters %v, want 3 without %d", ids, follower)
	}
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
	mgsRows := replicaList(t, cl, "mgs")
	if ids, l := voters(mgsRows); len(ids) != 3 || l == mgsLeader {
		t.Fatalf("MGS after replacing its leader %d: voters %v, leader %d", mgsLeader, ids, l)
	}
	// The targets record the MGS replicas they now follow, for their next
	// start (once every replica is replaced, the old list reaches none).
	var want []string
	for _, r := range mgsRows {
		if r.Role == "voter" {
			want = append(want, r.Addr)
		}
	}
	names := []string{"ost0"}
	mdts, _ := filepath.Glob(filepath.Join(cl.Dir, "mdt0-r*"))
	for _, d := range mdts {
		names = append(names, filepath.Base(d))
	}
	for _, name := range names {
		wait.NoErr(t, 15*time.Second, fmt.Sprintf("%s to record the MGS replicas %v", name, want), func() error {
			id, err := target.Load(cl.TargetDir(name))
			have := err == nil
			for _, a := range want {
				have = have && strings.Contains(id.MGSNode, a)
			}
			if !have {
				return fmt.Errorf("mgs_node %q (%v)", id.MGSNode, err)
			}
			return nil
		})
	}
	time.Sleep(time.Second) // the workers run on after the last change
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

// TestReplicaRefusesMembershipMistakes: `nacre replica add` of an id that
// is already a voter, at another address, used to report success and
// only change the leader's address for it, cutting that replica off; a
// remove or a transfer naming no replica reported success or timed out.
// Each is refused at once, by the CLI and by the leader itself, with the
// replica, the group and the way out; a learner cannot be handed
// leadership, and re-adding it at its own address promotes it.
func TestReplicaRefusesMembershipMistakes(t *testing.T) {
	cl := startReplicated(t)
	rows := replicaList(t, cl, "mdt0")
	ids, leader := voters(rows)
	if len(ids) != 3 || leader == 0 {
		t.Fatalf("voters %v, leader %d", ids, leader)
	}
	addrOf := map[uint64]string{}
	for _, r := range rows {
		addrOf[r.Replica] = r.Addr
	}
	var f uint64
	for _, id := range ids {
		if id != leader {
			f = id
			break
		}
	}
	refused := func(want []string, args ...string) string {
		t.Helper()
		start := time.Now()
		out, err := cl.Run(append([]string{"replica"}, args...)...)
		t.Logf("nacre replica %s (%.1fs): %v\n%s", strings.Join(args, " "), time.Since(start).Seconds(), err, strings.TrimSpace(out))
		if err == nil {
			t.Fatalf("nacre replica %s succeeded, want a refusal\n%s", strings.Join(args, " "), out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("nacre replica %s: output does not say %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("nacre replica %s took %v to refuse", strings.Join(args, " "), took)
		}
		return out
	}

	out := refused([]string{fmt.Sprintf("replica %d is already a voter of MDT0 at %s; to move it, use nacre replica replace", f, addrOf[f])},
		"add", "--target", "mdt0", "--id", fmt.Sprint(f), "--addr", "127.0.0.1:5")
	if strings.Contains(out, "learner first") || strings.Contains(out, "is a voter of") {
		t.Errorf("a refused add says it is adding:\n%s", out)
	}
	// The leader refuses too, for any client of its RaftAdmin service.
	cc, err := grpcx.Dial(addrOf[leader])
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = nacregrpc.NewRaftAdminClient(cc).AddReplica(ctx, &pb.RaftAddRequest{Id: f, Addr: "127.0.0.1:5"})
	if errno.CodeOf(err) != errno.AlreadyExists || !strings.Contains(err.Error(), fmt.Sprintf("replica %d is already a voter of MDT0000 at %s", f, addrOf[f])) {
		t.Errorf("RaftAdmin.AddReplica of voter %d at another address: %v, want AlreadyExists naming its address", f, err)
	}
	lv := members(addrOf[leader])
	if lv == nil {
		t.Fatal("the leader does not answer")
	}
	for _, m := range lv.Members {
		if m.Id == f && m.Addr != addrOf[f] {
			t.Fatalf("the refused add moved replica %d to %s in the leader's address book", f, m.Addr)
		}
	}

	// The address of a process of another group (an MGS replica), or of
	// another replica id: refused before anything is added.
	mgsRows := replicaList(t, cl, "mgs")
	refused([]string{fmt.Sprintf("%s serves replica %d of MGS of file system", mgsRows[0].Addr, mgsRows[0].Replica), "not a replica of MDT0"},
		"add", "--target", "mdt0", "--id", "9", "--addr", mgsRows[0].Addr)
	refused([]string{fmt.Sprintf("%s serves replica %d of MDT0000", addrOf[f], f), "not a replica of MGS"},
		"add", "--target", "mgs", "--id", "9", "--addr", addrOf[f])
	refused([]string{"no replica 9 in MDT0", "(replicas 1, 2, 3)"}, "remove", "--target", "mdt0", "--id", "9")
	refused([]string{"no replica 9 in MDT0", "(replicas 1, 2, 3)"}, "transfer", "--target", "mdt0", "--to", "9")
	// A replace of a replica that is not there adds nothing (before, it
	// formatted, started and added a fourth voter, then failed).
	refused([]string{"no replica 9 in MDT0", "(replicas 1, 2, 3)", "nothing was added"}, "replace", "--target", "mdt0", "--id", "9", "--dir", cl.Dir)
	if _, err := os.Stat(filepath.Join(cl.Dir, "mdt0-r4")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused replace made a replica directory: %v", err)
	}
	if ids, _ := voters(replicaList(t, cl, "mdt0")); len(ids) != 3 {
		t.Fatalf("voters after the refusals: %v", ids)
	}

	// A learner: no leadership for it; re-added at its address, it votes.
	out, err = cl.Run("replica", "add", "--target", "mdt0", "--learner", "--dir", cl.Dir)
	if err != nil {
		t.Fatalf("nacre replica add --learner: %v\n%s", err, out)
	}
	var learner struct {
		id   uint64
		addr string
	}
	for _, r := range replicaList(t, cl, "mdt0") {
		if r.Role == "learner" {
			learner.id, learner.addr = r.Replica, r.Addr
		}
	}
	if learner.id == 0 {
		t.Fatalf("no learner after add --learner:\n%s", out)
	}
	// status marks it (it showed as a plain "up" replica).
	wait.NoErr(t, 10*time.Second, fmt.Sprintf("status to mark learner %d", learner.id), func() error {
		if out, _ := cl.Run("status"); !strings.Contains(out, "(learner)") {
			return errors.New(out)
		}
		return nil
	})
	refused([]string{fmt.Sprintf("replica %d is a learner of MDT0000", learner.id), "promote it"},
		"transfer", "--target", "mdt0", "--to", fmt.Sprint(learner.id))
	refused([]string{fmt.Sprintf("replica %d is already a learner of MDT0 at %s; to move it", learner.id, learner.addr)},
		"add", "--target", "mdt0", "--id", fmt.Sprint(learner.id), "--addr", "127.0.0.1:5")
	out, err = cl.Run("replica", "add", "--target", "mdt0", "--id", fmt.Sprint(learner.id), "--addr", learner.addr)
	if err != nil || !strings.Contains(out, "promoting it to voter") {
		t.Fatalf("promoting learner %d: %v\n%s", learner.id, err, out)
	}
	if ids, _ := voters(replicaList(t, cl, "mdt0")); len(ids) != 4 {
		t.Fatalf("voters after promoting %d: %v", learner.id, ids)
	}

	// Addresses a replica cannot have, or another's, are refused.
	refused([]string{`--addr "notanaddr": want HOST:PORT`}, "add", "--target", "mdt0", "--id", "20", "--addr", "notanaddr")
	refused([]string{"not a number from 1 to 65535"}, "add", "--target", "mdt0", "--id", "20", "--addr", "127.0.0.1:99999")
	refused([]string{fmt.Sprintf("is the address of replica %d of MDT0", f)}, "add", "--target", "mdt0", "--id", "20", "--addr", addrOf[f])

	// A learner that never ran, removed: its id is the next one by the
	// members, and add --dir took it again (formatting and starting a
	// replica the group then refused, left running). Now add --dir skips
	// it, and asking for it is refused before anything is made.
	next := learner.id + 1
	if out, err := cl.Run("replica", "add", "--target", "mdt0", "--learner", "--id", fmt.Sprint(next), "--addr", "127.0.0.1:5"); err != nil {
		t.Fatalf("add learner %d: %v\n%s", next, err, out)
	}
	if out, err := cl.Run("replica", "remove", "--target", "mdt0", "--id", fmt.Sprint(next)); err != nil {
		t.Fatalf("remove learner %d: %v\n%s", next, err, out)
	}
	refused([]string{fmt.Sprintf("replica id %d was removed from MDT0, and ids are never reused", next)},
		"add", "--target", "mdt0", "--dir", cl.Dir, "--id", fmt.Sprint(next))
	if _, err := os.Stat(filepath.Join(cl.Dir, fmt.Sprintf("mdt0-r%d", next))); err == nil {
		t.Errorf("a refused add --dir made mdt0-r%d", next)
	}
	out, err = cl.Run("replica", "add", "--target", "mdt0", "--learner", "--dir", cl.Dir)
	if err != nil || !strings.Contains(out, fmt.Sprintf("mdt0-r%d", next+1)) {
		t.Fatalf("add --dir after removing %d: want replica %d, got %v\n%s", next, next+1, err, out)
	}

	// A replica left over by an add that failed after it started: it
	// runs and is registered, but is no member. remove clears it (it
	// said "no replica N" and nothing could).
	stray := next + 5
	d, _, _, err := localcluster.NewReplica(cl.Dir, "mdt0", stray, addrOf, testcluster.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	registered := func() bool {
		out, _ := cl.Run("status", "--json")
		return strings.Contains(out, fmt.Sprintf(`"replica_id": %d`, stray))
	}
	wait.For(t, 15*time.Second, fmt.Sprintf("the stray replica %d to register", stray), registered)
	out, err = cl.Run("replica", "remove", "--target", "mdt0", "--id", fmt.Sprint(stray), "--dir", cl.Dir)
	if err != nil || !strings.Contains(out, "the MGS forgot its registration") || !strings.Contains(out, "stopped it and moved its directory") {
		t.Fatalf("remove of the stray replica %d: %v\n%s", stray, err, out)
	}
	if _, err := os.Stat(d); err == nil {
		t.Errorf("the stray replica's directory %s is still there", d)
	}
	if registered() {
		t.Errorf("the MGS still lists the stray replica %d", stray)
	}

	// An add --dir that times out leaves its replica a learner; running
	// the same command again would make another replica, so the message
	// gives the command that promotes this one.
	// (The new replica's log syncs are slowed, so that it cannot catch
	// up within the timeout; the command passes its environment on.)
	slow := exec.Command(cl.Bin, "replica", "add", "--target", "mdt0", "--dir", cl.Dir, "--timeout", "1s")
	slow.Env = append(os.Environ(), "NACRE_MGS="+cl.MGS, "NACRE_FAULTS=raft.log.sync=delay:3s")
	b, err := slow.CombinedOutput()
	out = string(b)
	if err == nil || !strings.Contains(out, "stays a learner") || !strings.Contains(out, "with --dir, promote this one with: nacre replica add --target mdt0 --id ") {
		t.Fatalf("add --dir --timeout 1s with a slow replica: want a learner and the command that promotes it, got %v\n%s", err, out)
	}
	promote := out[strings.Index(out, "nacre replica add --target mdt0 --id "):]
	promote = strings.TrimSpace(strings.SplitN(promote, ")", 2)[0])
	args := strings.Fields(promote)[1:]
	if out, err := cl.Run(args...); err != nil || !strings.Contains(out, "promoting it to voter") {
		t.Fatalf("%s: %v\n%s", promote, err, out)
	}

	// A transfer to a voter that is down is refused at once, once the
	// leader has noticed (it used to wait out the whole deadline).
	rows = replicaList(t, cl, "mdt0")
	ids, leader = voters(rows)
	var down string
	var downID uint64
	for _, r := range rows {
		if r.Role == "voter" && r.Replica != leader {
			downID, down = r.Replica, fmt.Sprintf("mdt0-r%d", r.Replica)
			break
		}
	}
	cl.Kill(down, syscall.SIGKILL)
	wait.NoErr(t, 15*time.Second, fmt.Sprintf("a transfer to the killed replica %d refused at once", downID), func() error {
		start := time.Now()
		out, err := cl.Run("replica", "transfer", "--target", "mdt0", "--to", fmt.Sprint(downID))
		if took := time.Since(start); err == nil || !strings.Contains(out, "has not been heard from lately") || took >= 5*time.Second {
			return fmt.Errorf("after %v: %v\n%s", took, err, out)
		}
		return nil
	})
	cl.Restart()
}

// TestARemovedReplicaStopsAndLeavesStatus: a replica removed without
// --dir (its process is not the CLI's to stop) kept running, registered
// with the MGS again after the removal made it forget it, and showed in
// `nacre status` as up. Now it stops by itself, says why, and status no
// longer lists it; the group keeps serving.
func TestARemovedReplicaStopsAndLeavesStatus(t *testing.T) {
	cl := startReplicated(t)
	leader := waitLeader(t, cl, "mdt0")
	victim := aFollower(t, cl, "mdt0", leader)
	pid := pidOf(t, cl, victim)
	rid := strings.TrimPrefix(victim, "mdt0-r")
	out, err := cl.Run("replica", "remove", "--target", "mdt0", "--id", rid)
	if err != nil || !strings.Contains(out, "stops by itself") {
		t.Fatalf("replica remove: %v\n%s", err, out)
	}
	stopsAsRemoved(t, cl, victim, pid, 15*time.Second)
	c := cl.Client(t)
	if _, err := c.Mkdir(context.Background(), fid.Root, "after-removal", 0o755); err != nil {
		t.Fatalf("the group after the removal: %v", err)
	}
}

// TestAClientOfAnMDTWithoutQuorumNamesIt: with two of three MDT replicas
// killed, a metadata call waits for its timeout and then said
// "rpc error: code = DeadlineExceeded desc = context deadline exceeded",
// naming no MDT. Now it names the MDT and what to look at.
func TestAClientOfAnMDTWithoutQuorumNamesIt(t *testing.T) {
	cl := startReplicated(t)
	leader := waitLeader(t, cl, "mdt0")
	cl.Kill(leader, syscall.SIGKILL)
	cl.Kill(aFollower(t, cl, "mdt0", leader), syscall.SIGKILL) // one more: no majority left
	out, err := cl.Run("mkdir", "/no-quorum")
	if err == nil || !strings.Contains(out, "MDT0000") || !strings.Contains(out, "nacre status") || strings.Contains(out, "rpc error") {
		t.Fatalf("mkdir on an MDT without quorum: want an error naming MDT0000 and nacre status, got %v\n%s", err, out)
	}
}

// TestAReplicaRemovedWhileDownStopsWhenStarted: a replica removed while
// it was down never applies its removal. Started again (`nacre up` starts
// every directory), it campaigned for good, registered with the MGS and
// showed in status. Now it asks the others, learns it was removed, stops
// with the removed replica's message, and the MGS forgets it.
func TestAReplicaRemovedWhileDownStopsWhenStarted(t *testing.T) {
	cl := startReplicated(t)
	leader := waitLeader(t, cl, "mdt0")
	victim := aFollower(t, cl, "mdt0", leader)
	cl.Kill(victim, syscall.SIGKILL)
	rid := strings.TrimPrefix(victim, "mdt0-r")
	if out, err := cl.Run("replica", "remove", "--target", "mdt0", "--id", rid); err != nil {
		t.Fatalf("replica remove of the replica that is down: %v\n%s", err, out)
	}
	pid, err := localcluster.Start(cl.Bin, cl.TargetDir(victim))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	stopsAsRemoved(t, cl, victim, pid, 40*time.Second)
}

// stopsAsRemoved waits (up to within) for the removed replica victim
// (process pid) to stop by itself, saying why in its log, and checks that
// nothing registered it again (status does not list it).
func stopsAsRemoved(t *testing.T, cl *testcluster.Cluster, victim string, pid int, within time.Duration) {
	t.Helper()
	wait.For(t, within, fmt.Sprintf("removed replica %s (pid %d) to stop", victim, pid), func() bool { return !proc.Running(pid) })
	logb, _ := os.ReadFile(filepath.Join(cl.TargetDir(victim), "serve.log"))
	if !strings.Contains(string(logb), "was removed from its group") {
		t.Errorf("the removed replica's log does not say why it stopped:\n%s", logb)
	}
	// Past a heartbeat or two: nothing registered it again.
	time.Sleep(3 * time.Second)
	sout, err := cl.Run("status", "--json")
	if err != nil {
		t.Fatalf("status --json: %v\n%s", err, sout)
	}
	var st cli.ClusterStatus
	if err := json.Unmarshal([]byte(sout), &st); err != nil {
		t.Fatal(err)
	}
	for _, ts := range st.Targets {
		if filepath.Base(ts.Dir) == victim {
			t.Errorf("status still lists the removed replica %s: %+v", victim, ts)
		}
	}
}

// TestReplicaRemoveClearsAStrayGroup: a replica formatted for a group
// that does not exist (a mistyped --index) registers, and status showed
// that MDT without a leader for good; `replica remove` of it, once its
// process is stopped, has the MGS forget it. While it runs, remove says
// to stop it first.
func TestReplicaRemoveClearsAStrayGroup(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	dir := filepath.Join(t.TempDir(), "stray")
	if out, err := cl.Run("format", "--type", "mdt", "--index", "1", "--dir", dir, "--fsname", "nacre",
		"--replica-id", "8", "--peers", "1=127.0.0.1:9", "--mgsnode", cl.MGS); err != nil {
		t.Fatalf("format: %v\n%s", err, out)
	}
	srv := exec.Command(cl.Bin, "serve", "--dir", dir)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			srv.Process.Signal(syscall.SIGTERM)
			srv.Wait()
		}
	}
	defer stop()
	listed := func() bool {
		out, err := cl.Run("status", "--json")
		if err != nil {
			t.Fatalf("status: %v\n%s", err, out)
		}
		return strings.Contains(out, "MDT0001")
	}
	wait.For(t, 15*time.Second, "the stray replica to register", listed)
	if out, err := cl.Run("replica", "remove", "--target", "mdt1", "--id", "8"); err == nil || !strings.Contains(out, "stop its process") {
		t.Fatalf("remove of a running stray replica: %v\n%s", err, out)
	}
	stop()
	if out, err := cl.Run("replica", "remove", "--target", "mdt1", "--id", "8"); err != nil || !strings.Contains(out, "the MGS forgot its registration") {
		t.Fatalf("remove of the stopped stray replica: %v\n%s", err, out)
	}
	if listed() {
		t.Fatal("status still lists MDT0001 after the remove")
	}
}

// TestAWipedReplicaFormattedAgainStops: a replica whose directory was
// lost and formatted again under its old id (the same --replica-id and
// --peers) is told by the leader's heartbeat that it had acknowledged
// more of the log than it holds: it stops, naming the fix, where raft
// panicked (or, had the leader changed meanwhile, its empty log could
// have elected a candidate lacking what it had acknowledged: it then
// votes for nobody, raftgroup's TestWipedReplicaDoesNotElect...). The
// group goes on without it.
func TestAWipedReplicaFormattedAgainStops(t *testing.T) {
	cl := startReplicated(t)
	c := cl.Client(t)
	if _, err := c.Mkdir(context.Background(), fid.Root, "before", 0o755); err != nil {
		t.Fatal(err)
	}
	_, leader := voters(replicaList(t, cl, "mdt0"))
	victim := uint64(1)
	if victim == leader {
		victim = 2
	}
	name := fmt.Sprintf("mdt0-r%d", victim)
	dir := cl.TargetDir(name)
	id, err := target.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	cl.Kill(name, syscall.SIGKILL)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	var peers []string
	for pid, a := range id.Peers {
		peers = append(peers, fmt.Sprintf("%d=%s", pid, a))
	}
	if out, err := cl.Run("format", "--type", "mdt", "--index", "0", "--dir", dir, "--fsname", id.Fsname,
		"--replica-id", fmt.Sprint(victim), "--peers", strings.Join(peers, ","), "--listen", id.Listen,
		"--data-listen", id.DataListen, "--mgsnode", id.MGSNode, "--created", id.Created.Format(time.RFC3339Nano)); err != nil {
		t.Fatalf("format again: %v\n%s", err, out)
	}
	srv := exec.Command(cl.Bin, "serve", "--dir", dir)
	var out bytes.Buffer
	srv.Stdout, srv.Stderr = &out, &out
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		want := fmt.Sprintf("nacre replica replace --id %d", victim)
		// Whichever finds it first: the leader's heartbeat, or the MGS
		// that knows the replica id under the old store's uuid.
		found := strings.Contains(out.String(), "lost entries it had acknowledged") || strings.Contains(out.String(), "formatted again after its store was lost")
		if err == nil || !found || !strings.Contains(out.String(), want) {
			t.Fatalf("the wiped replica: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		srv.Process.Kill()
		<-done
		t.Fatalf("the wiped replica kept running:\n%s", out.String())
	}
	if _, err := c.Mkdir(context.Background(), fid.Root, "after", 0o755); err != nil {
		t.Fatal(err)
	}
}
