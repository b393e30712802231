package itest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestPowerCutClientsGiveBackWhatTheMDTLost: the durability contract. The
// MDT answers creates, renames and removals before its log is synced (a
// commit window of an hour: nothing syncs by time), then loses its log's
// unsynced tail in an emulated power cut (raft.log.powercut) and restarts
// in another boot; with every client back, the recovery ends before its
// window. The clients that were answered give the entries back,
// and every acknowledged change is there again with the FID it was
// answered with, the idle client's too (it checks on what it keeps).
// The early client closed before the cut: its changes are durable.
func TestPowerCutClientsGiveBackWhatTheMDTLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	t.Setenv("NACRE_BOOT_ID", "boot-1")
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2, Env: []string{
		"NACRE_COMMIT_WINDOW=1h", "NACRE_RECOVERY_WINDOW=60s"}})
	ctx := context.Background()

	// The early client closes before the cut, which syncs its changes.
	early := cl.Client(t)
	d, err := early.Mkdir(ctx, fid.Root, "d", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	dir := fid.FromPB(d.Fid)

	early.Close()
	var mu sync.Mutex
	fids := map[string]fid.FID{} // acknowledged names under d, with their FIDs
	var gone []string            // removed or renamed away, acknowledged
	c := [2]*client.Client{cl.Client(t), cl.Client(t)}
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 60 {
				if i == 40 {
					// The removals' objects are destroyed once the
					// removals are synced (a sync every 200 ms while any
					// wait): what follows stays unsynced.
					time.Sleep(time.Second)
				}
				name := fmt.Sprintf("w%d-%03d", w, i)
				ino, _, err := c[w].Create(ctx, dir, name, 0o644, client.CreateOpts{Exclusive: true})
				if err != nil {
					t.Errorf("create %s: %v", name, err)
					return
				}
				mu.Lock()
				fids[name] = fid.FromPB(ino.Fid)
				mu.Unlock()
				switch i % 10 {
				case 3, 7:
					if i >= 40 {
						continue
					}
				}
				switch i % 10 {
				case 3:
					if _, err := c[w].Unlink(ctx, dir, name); err != nil {
						t.Errorf("unlink %s: %v", name, err)
						return
					}
					mu.Lock()
					delete(fids, name)
					gone = append(gone, name)
					mu.Unlock()
				case 7:
					to := name + ".moved"
					if err := c[w].Rename(ctx, dir, name, dir, to, 0); err != nil {
						t.Errorf("rename %s: %v", name, err)
						return
					}
					mu.Lock()
					fids[to] = fids[name]
					delete(fids, name)
					gone = append(gone, name)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	if out, err := cl.Run("fault", "arm", "raft.log.powercut=error*1", "--target", "mdt0"); err != nil {
		t.Fatalf("arm the power cut: %v\n%s", err, out)
	}
	pid := cl.Pid("mdt0")
	// The next change reaches the log and the cut takes it: it is in
	// flight, and c[0] retries it through the restart and the recovery.
	inflight := make(chan error, 1)
	go func() {
		ino, _, err := c[0].Create(ctx, dir, "inflight", 0o644, client.CreateOpts{Exclusive: true})
		if err == nil {
			mu.Lock()
			fids["inflight"] = fid.FromPB(ino.Fid)
			mu.Unlock()
		}
		inflight <- err
	}()
	if !wait.Poll(15*time.Second, func() bool { return !proc.Running(pid) }) {
		t.Fatal("the MDT is still running after its power cut")
	}
	t.Setenv("NACRE_BOOT_ID", "boot-2")
	restarted := time.Now()
	cl.Restart()
	// nacre status says the MDT recovers, and what it has, while it does.
	var status string
	shown := wait.Poll(5*time.Second, func() bool {
		status, _ = cl.Run("status", "--json")
		return strings.Contains(status, `"recovering":`)
	})
	if !shown {
		t.Errorf("nacre status --json never showed the MDT recovering; last:\n%s", status)
	}
	if err := <-inflight; err != nil {
		t.Fatalf("the create in flight at the cut: %v", err)
	}
	// Every client whose changes came back gave back its own: the
	// recovery ends after its 5 s minimum, not at its 60 s window.
	if took := time.Since(restarted); took > 30*time.Second {
		t.Errorf("the recovery took %s with every client back; it waited out its window", took.Round(time.Second))
	}

	log, err := os.ReadFile(filepath.Join(cl.TargetDir("mdt0"), proc.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`recovery: done[^\n]*replayed[=":]+(\d+)`).FindSubmatch(log)
	if m == nil {
		t.Fatalf("the restarted MDT logged no recovery:\n%s", tail(string(log), 20))
	}
	// The MDS's own synced proposals (pools filling up) sync what came
	// before them: the last creates stay unsynced whatever the timing.
	if n, _ := strconv.Atoi(string(m[1])); n < 10 {
		t.Fatalf("recovery replayed %d entries; the cut should have lost more of the last 40 creates", n)
	}

	v := cl.Client(t)
	mu.Lock()
	defer mu.Unlock()
	for name, want := range fids {
		ino, err := v.Lookup(ctx, dir, name)
		if err != nil {
			t.Errorf("acknowledged %s lost after the power cut: %v", name, err)
			continue
		}
		if got := fid.FromPB(ino.Fid); got != want {
			t.Errorf("%s is %s after recovery; it was answered as %s", name, got, want)
		}
	}
	for _, name := range gone {
		if _, err := v.Lookup(ctx, dir, name); err == nil {
			t.Errorf("%s was removed or renamed away, and is back after the power cut", name)
		}
	}
	// The MDT serves changes again, after the recovered ones.
	if _, _, err := v.Create(ctx, dir, "after", 0o644, client.CreateOpts{Exclusive: true}); err != nil {
		t.Fatalf("create after recovery: %v", err)
	}
	t.Logf("%d names checked, recovery replayed %s entries", len(fids), m[1])
}

// TestKill9OnTheSameBootNeedsNoRecovery: a process crash keeps the log's
// unsynced writes (the page cache has them), so a restart in the same
// boot serves at once with everything, and recovers nothing.
func TestKill9OnTheSameBootNeedsNoRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster")
	}
	t.Setenv("NACRE_BOOT_ID", "boot-1")
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1, Env: []string{"NACRE_COMMIT_WINDOW=1h"}})
	ctx := context.Background()
	c := cl.Client(t)
	var made []string
	for i := range 50 {
		name := fmt.Sprintf("f%d", i)
		if _, _, err := c.Create(ctx, fid.Root, name, 0o644, client.CreateOpts{Exclusive: true}); err != nil {
			t.Fatal(err)
		}
		made = append(made, name)
	}
	c.Close()
	cl.Kill("mdt0", syscall.SIGKILL)
	cl.Restart()
	v := cl.Client(t)
	for _, name := range made {
		if _, err := v.Lookup(ctx, fid.Root, name); err != nil {
			t.Errorf("%s lost by kill -9: %v", name, err)
		}
	}
	log, err := os.ReadFile(filepath.Join(cl.TargetDir("mdt0"), proc.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	if regexp.MustCompile(`waiting for clients to give back`).Match(log) {
		t.Error("a restart in the same boot waited for clients")
	}
}
