package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/localcluster"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// mdtsCluster runs the nacre binary against the local cluster in dir,
// started by `nacre up --detach` (upDetached stops it by pid when the test
// ends, pass or fail).
type mdtsCluster struct {
	t        *testing.T
	bin, dir string
}

// run runs a command of the nacre binary with NACRE_MGS set to the
// cluster's MGS (status, df and down are given --dir instead).
func (c mdtsCluster) run(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	switch args[0] {
	case "status", "df", "down":
		cmd.Args = append(cmd.Args, "--dir", c.dir)
	default:
		mgs, err := localcluster.MGSAddr(c.dir)
		if err != nil {
			c.t.Fatal(err)
		}
		cmd.Env = append(os.Environ(), "NACRE_MGS="+mgs)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// up runs `nacre up --detach` with args and checks its summary.
func (c mdtsCluster) up(summary string, args ...string) string {
	c.t.Helper()
	out, err := upDetached(c.t, c.bin, c.dir, args...)
	if err != nil || !strings.Contains(out, summary) {
		c.t.Fatalf("nacre up --detach %s: want %q, got %v\n%s", strings.Join(args, " "), summary, err, out)
	}
	return out
}

// mdtsUp checks, by `nacre status --json`, that MDT0000 to MDTn-1 of the
// cluster are all up, each led by one replica when replicated, and each
// serving its own metrics, labelled with its name.
func (c mdtsCluster) mdtsUp(n, replicas int) {
	c.t.Helper()
	var st cli.ClusterStatus
	if err := json.Unmarshal([]byte(c.run("status", "--json")), &st); err != nil {
		c.t.Fatal(err)
	}
	metrics := map[string]string{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-MDT%04x", st.Fsname, i)
		up, leaders := 0, 0
		for _, ts := range st.Targets {
			if ts.Name != name {
				continue
			}
			if ts.Kind != "mdt" || ts.Index != uint32(i) || ts.State != "up" || ts.MetricsURL == "" {
				c.t.Errorf("status lists %s r%d as %s %d, %s, metrics %q; want an MDT of index %d up with metrics", name, ts.ReplicaID, ts.Kind, ts.Index, ts.State, ts.MetricsURL, i)
			}
			up++
			if ts.Leader {
				leaders++
			}
			if other, dup := metrics[ts.MetricsURL]; dup {
				c.t.Errorf("%s r%d and %s share the metrics endpoint %s", name, ts.ReplicaID, other, ts.MetricsURL)
			}
			metrics[ts.MetricsURL] = name
			if leaders == 1 && ts.Leader {
				c.metricsOf(ts.MetricsURL, name)
			}
		}
		if up != replicas || leaders != 1 {
			c.t.Errorf("status lists %d processes of %s with %d leaders, want %d with 1:\n%+v", up, name, leaders, replicas, st.Targets)
		}
	}
}

// metricsOf checks that url serves the metrics of the MDS of MDT name.
func (c mdtsCluster) metricsOf(url, name string) {
	c.t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		c.t.Errorf("metrics of %s: %v", name, err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if want := fmt.Sprintf(`nacre_mds_precreate_pool_objects{ost="OST0000",target=%q}`, name); !strings.Contains(string(b), want) {
		c.t.Errorf("metrics of %s at %s lack %s", name, url, want)
	}
}

// dfLists checks that `nacre df --json` has a row for each of MDT0000 to
// MDTn-1, up, counted once however many replicas it has.
func (c mdtsCluster) dfLists(n int) {
	c.t.Helper()
	var df cli.DfJSON
	if err := json.Unmarshal([]byte(c.run("df", "--json")), &df); err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("%s-MDT%04x", df.Fsname, i)
		rows := 0
		for _, r := range df.Targets {
			if r.Name == name && r.Kind == "mdt" && r.State == "up" && r.InodesTotal > 0 {
				rows++
			}
		}
		if rows != 1 {
			c.t.Errorf("df has %d rows of %s up with inodes, want 1:\n%+v", rows, name, df.Targets)
		}
	}
}

// fldCovers waits until the MGS's FLD holds a sequence range of every MDT
// index below n: each MDS asks for its own once it runs.
func (c mdtsCluster) fldCovers(n int) {
	c.t.Helper()
	var st cli.ClusterStatus
	if err := json.Unmarshal([]byte(c.run("status", "--json")), &st); err != nil {
		c.t.Fatal(err)
	}
	ctx := context.Background()
	cl, err := client.New(ctx, client.Config{MGS: st.MGS, Timeout: 30 * time.Second})
	if err != nil {
		c.t.Fatalf("connect: %v", err)
	}
	defer cl.Close()
	wait.NoErr(c.t, 15*time.Second, fmt.Sprintf("a range of the FLD for each of %d MDTs", n), func() error {
		cfg, err := cl.Config(ctx)
		if err != nil {
			return err
		}
		owned := map[uint32]bool{}
		for _, r := range cfg.Fld {
			owned[r.Mdt] = true
		}
		for i := 0; i < n; i++ {
			if !owned[uint32(i)] {
				return fmt.Errorf("MDT%d has none; the FLD is %v", i, cfg.Fld)
			}
		}
		return nil
	})
}

// downStopsAll runs `nacre down` and checks that every target process
// that ran is gone.
func (c mdtsCluster) downStopsAll() {
	c.t.Helper()
	pids := servingPids(c.t, c.dir)
	c.run("down")
	for d, pid := range pids {
		if proc.Running(pid) {
			c.t.Errorf("%s (pid %d) still runs after nacre down", d, pid)
		}
	}
}

// TestUpRunsSeveralMDTs: `nacre up --mdts 2` makes and starts two MDTs;
// status and df list both, each has its own metrics, the FLD gets a
// range of each, a file stored through the namespace reads back, down
// stops both, a second up starts both again, a larger --mdts adds an
// empty MDT and a smaller one is noted as not applied.
func TestUpRunsSeveralMDTs(t *testing.T) {
	c := mdtsCluster{t: t, bin: testcluster.Binary(t), dir: filepath.Join(t.TempDir(), "c")}
	c.up("2 MDTs, 2 OSTs", "--mdts", "2")
	for _, d := range []string{"mdt0", "mdt1"} {
		if _, err := os.Stat(filepath.Join(c.dir, d, "nacre-target.json")); err != nil {
			t.Fatalf("no %s: %v", d, err)
		}
	}
	c.mdtsUp(2, 1)
	c.dfLists(2)
	c.fldCovers(2)
	src := filepath.Join(t.TempDir(), "f")
	os.WriteFile(src, []byte("two MDTs\n"), 0o644)
	c.run("put", src, "/f")
	c.downStopsAll()

	c.up("2 MDTs, 2 OSTs")
	c.mdtsUp(2, 1)
	if got := c.run("cat", "/f"); got != "two MDTs\n" {
		t.Errorf("after down and up, /f reads %q", got)
	}
	out := c.up("3 MDTs, 2 OSTs", "--mdts", "3")
	if !strings.Contains(out, "started MDT0002") {
		t.Errorf("up --mdts 3 on a cluster of 2 MDTs does not say it started MDT0002:\n%s", out)
	}
	c.mdtsUp(3, 1)
	c.fldCovers(3)
	out = c.up("3 MDTs, 2 OSTs", "--mdts", "1")
	if !strings.Contains(out, "note: --mdts 1 is ignored") {
		t.Errorf("up --mdts 1 on a cluster of 3 MDTs: no note that it is not applied:\n%s", out)
	}
	c.downStopsAll()
}

// TestUpRunsSeveralReplicatedMDTs: with --replicas 3 each MDT is a Raft
// group of its own, mdtI-r1..r3 with its own peers; status lists every
// replica with one leader per MDT, df one row per MDT, and after down a
// second up elects both again.
func TestUpRunsSeveralReplicatedMDTs(t *testing.T) {
	c := mdtsCluster{t: t, bin: testcluster.Binary(t), dir: filepath.Join(t.TempDir(), "c")}
	c.up("2 MDTs (MGS and each MDT: 3 replicas), 2 OSTs", "--mdts", "2", "--replicas", "3")
	c.mdtsUp(2, 3)
	c.dfLists(2)
	c.fldCovers(2)
	c.downStopsAll()
	c.up("2 MDTs (MGS and each MDT: 3 replicas), 2 OSTs")
	c.mdtsUp(2, 3)
	c.downStopsAll()
}
