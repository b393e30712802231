package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/lfsck"
	"nacre/internal/lfsck/admin"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestCLIWorkflow drives the nacre binary as a user would.
func TestCLIWorkflow(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 3})
	run := func(args ...string) string {
		t.Helper()
		out, err := cl.Run(args...)
		if err != nil {
			t.Fatalf("nacre %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	fail := func(want string, args ...string) {
		t.Helper()
		out, err := cl.Run(args...)
		if err == nil || !strings.Contains(out, want) {
			t.Fatalf("nacre %s: want an error containing %q, got %v\n%s", strings.Join(args, " "), want, err, out)
		}
	}
	local := filepath.Join(t.TempDir(), "src")
	data := make([]byte, 5<<20+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	os.WriteFile(local, data, 0o640)

	run("mkdir", "-p", "/a/b/c")
	run("setstripe", "-c", "2", "-S", "128K", "/a/b")
	var dflt cli.StripeJSON
	json.Unmarshal([]byte(run("getstripe", "--json", "/a/b")), &dflt)
	if dflt.StripeCount != 2 || dflt.StripeSize != 128<<10 || !dflt.Default {
		t.Fatalf("directory default %+v", dflt)
	}
	run("put", local, "/a/b/file")
	var gs cli.StripeJSON
	json.Unmarshal([]byte(run("getstripe", "--json", "/a/b/file")), &gs)
	if gs.StripeCount != 2 || gs.StripeSize != 128<<10 || len(gs.Objects) != 2 || gs.Objects[0].OST == gs.Objects[1].OST {
		t.Fatalf("inherited layout %+v", gs)
	}
	run("put", "-c", "-1", "-S", "1M", local, "/wide")
	json.Unmarshal([]byte(run("getstripe", "--json", "/wide")), &gs)
	if gs.StripeCount != 3 {
		t.Fatalf("-c -1 gave %d stripes", gs.StripeCount)
	}
	out := filepath.Join(t.TempDir(), "out")
	run("get", "/a/b/file", out)
	if got, _ := os.ReadFile(out); string(got) != string(data) {
		t.Fatal("get returned other bytes than put stored")
	}
	if got := run("cat", "/wide"); got != string(data) {
		t.Fatal("cat returned other bytes")
	}
	if ls := run("ls", "/a/b"); ls != "c\nfile\n" {
		t.Fatalf("ls: %q", ls)
	}
	if ls := run("ls", "-l", "/a/b"); !strings.Contains(ls, "-rw-r-----") || !strings.Contains(ls, "5243003") {
		t.Fatalf("ls -l: %q", ls)
	}
	run("mv", "/a/b/file", "/a/renamed")
	run("ln", "/a/renamed", "/hard")
	run("ln", "-s", "/a/renamed", "/soft")
	var st cli.StatInfo
	json.Unmarshal([]byte(run("stat", "--json", "/hard")), &st)
	if st.Nlink != 2 || st.Size != uint64(len(data)) {
		t.Fatalf("stat of hard link %+v", st)
	}
	json.Unmarshal([]byte(run("stat", "--json", "/soft")), &st)
	if st.Type != "symbolic link" || st.Target != "/a/renamed" {
		t.Fatalf("stat of symlink %+v", st)
	}
	if got := run("cat", "/soft"); got != string(data) {
		t.Fatal("cat through a symlink")
	}
	f := strings.TrimSpace(run("path2fid", "/a/renamed"))
	paths := run("fid2path", f)
	if paths != "/a/renamed\n/hard\n" && paths != "/hard\n/a/renamed\n" {
		t.Fatalf("fid2path %s: %q", f, paths)
	}
	var df cli.DfJSON
	json.Unmarshal([]byte(run("df", "--json")), &df)
	if len(df.Targets) != 4 || df.Total.BytesTotal == 0 || df.Total.InodesUsed < 6 {
		t.Fatalf("df %+v", df)
	}
	var status cli.ClusterStatus
	json.Unmarshal([]byte(run("status", "--json")), &status)
	if len(status.Targets) != 5 {
		t.Fatalf("status lists %d targets", len(status.Targets))
	}
	for _, ts := range status.Targets {
		if ts.State != "up" || ts.Pid == 0 || !strings.HasPrefix(ts.MetricsURL, "http://127.0.0.1:") {
			t.Fatalf("target %+v", ts)
		}
	}
	fail("is a directory", "rm", "/a")
	run("rm", "-r", "/a")
	fail("stat /a: no such file or directory", "stat", "/a")
	fail("stripe size", "setstripe", "-S", "1000", "/x")
}

// TestCLIErrorsNameTheProblem checks the messages of common mistakes.
func TestCLIErrorsNameTheProblem(t *testing.T) {
	bin := testcluster.Binary(t)
	// Not an MGS: a web server's address given by mistake.
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	webAddr := strings.TrimPrefix(web.URL, "http://")
	cases := []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"ls", "/"}, "NACRE_MGS=", "NACRE_MGS"},
		// In a few words: not gRPC's `connection error: desc =
		// "transport: Error while dialing: dial tcp ...`.
		{[]string{"ls", "/"}, "NACRE_MGS=127.0.0.1:1", "cannot reach the MGS at 127.0.0.1:1: connection refused (is the cluster up?"},
		// Pasted with a blank: dialled without it (it was "unknown port").
		{[]string{"ls", "/"}, "NACRE_MGS=127.0.0.1:1 ", "connection refused"},
		{[]string{"status"}, "NACRE_MGS=127.0.0.1:1", "MGS at 127.0.0.1:1 does not answer: connection refused (is the cluster up?)"},
		{[]string{"ls", "/"}, "NACRE_MGS=" + webAddr, webAddr + " answers but is not an MGS"},
		{[]string{"status"}, "NACRE_MGS=" + webAddr, webAddr + " answers but is not an MGS"},
		{[]string{"setstripe", "-c", "-5", "/f"}, "NACRE_MGS=127.0.0.1:1", "stripe count -5"},
		{[]string{"format", "--type", "disk", "--dir", "/tmp/x"}, "", "use mgs, mdt or ost"},
		{[]string{"serve", "--dir", t.TempDir()}, "", "nacre format"},
		{[]string{"down", "--dir", t.TempDir()}, "", "not a local Nacre cluster"},
	}
	formatted := t.TempDir()
	if out, err := exec.Command(bin, "format", "--type", "mdt", "--fsname", "alpha", "--dir", formatted, "--mgsnode", "127.0.0.1:1").CombinedOutput(); err != nil {
		t.Fatalf("format: %v %s", err, out)
	}
	cases = append(cases, struct {
		args []string
		env  string
		want string
	}{[]string{"format", "--type", "ost", "--fsname", "beta", "--index", "1", "--dir", formatted, "--mgsnode", "127.0.0.1:1"}, "",
		`already holds MDT0000 of file system "alpha"`})
	for _, c := range cases {
		cmd := exec.Command(bin, c.args...)
		cmd.Env = append(os.Environ(), c.env)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("nacre %s: want failure mentioning %q, got %v: %s", strings.Join(c.args, " "), c.want, err, out)
		}
		// A mistake is reported at once: an MGS that refuses connections
		// took 10 s (the wait a mount makes for an MGS coming up).
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("nacre %s (%s) took %v to fail", strings.Join(c.args, " "), c.env, d.Round(time.Millisecond))
		}
	}
}

// nacreIn runs the nacre binary in directory dir with extra environment
// (NACRE_MGS is the cluster's unless env sets it) and returns its
// standard output and standard error apart.
func nacreIn(cl *testcluster.Cluster, dir string, env []string, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(cl.Bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "NACRE_MGS="+cl.MGS), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// TestCLIPathsOnAMount checks that client commands take paths on a Nacre
// mount, relative ones from a current directory on the mount, and refuse
// relative paths elsewhere (`cd /mnt/nacre/m1; nacre rm x` removes /m1/x).
func TestCLIPathsOnAMount(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 3})
	m := mountFuse(t, cl)
	run := func(dir string, env []string, args ...string) string {
		t.Helper()
		out, errOut, err := nacreIn(cl, dir, env, args...)
		if err != nil {
			t.Fatalf("in %s: nacre %s: %v\n%s%s", dir, strings.Join(args, " "), err, out, errOut)
		}
		return out
	}
	fail := func(dir string, env []string, want string, args ...string) {
		t.Helper()
		out, errOut, err := nacreIn(cl, dir, env, args...)
		if err == nil || !strings.Contains(errOut, want) {
			t.Fatalf("in %s: nacre %s: want an error containing %q, got %v\n%s%s", dir, strings.Join(args, " "), want, err, out, errOut)
		}
	}
	local := filepath.Join(t.TempDir(), "src")
	os.WriteFile(local, []byte("relative data\n"), 0o644)
	elsewhere := t.TempDir()

	run("/", nil, "mkdir", "/m1")
	run("/", nil, "put", local, "/x") // must survive `rm x` in /m1
	m1 := m.Path("m1")
	run(m1, nil, "put", local, "x")
	if got := run("/", nil, "cat", "/m1/x"); got != "relative data\n" {
		t.Fatalf("put x in %s wrote /m1/x = %q", m1, got)
	}
	if got := run(m1, nil, "ls"); got != "x\n" {
		t.Fatalf("ls in %s: %q", m1, got)
	}
	if got := run(m1, nil, "ls", ".."); got != "m1\nx\n" {
		t.Fatalf("ls .. in %s: %q", m1, got)
	}
	run(m1, nil, "setstripe", "-c", "2", "striped")
	var gs cli.StripeJSON
	json.Unmarshal([]byte(run("/", nil, "getstripe", "--json", m.Path("m1", "striped"))), &gs)
	if gs.StripeCount != 2 || len(gs.Objects) != 2 {
		t.Fatalf("setstripe -c 2 striped in %s, getstripe by mount path: %+v", m1, gs)
	}
	want := run("/", nil, "path2fid", "/m1/x")
	if got := run("/", nil, "path2fid", m.Path("m1", "x")); got != want {
		t.Fatalf("path2fid %s = %q, path2fid /m1/x = %q", m.Path("m1", "x"), got, want)
	}
	// No NACRE_MGS: the mount's.
	if got := run(m1, []string{"NACRE_MGS="}, "stat", "--json", "x"); !strings.Contains(got, `"size": 14`) {
		t.Fatalf("stat x without NACRE_MGS: %s", got)
	}
	fail(m1, []string{"NACRE_MGS=127.0.0.1:1"}, "give --mgs "+cl.MGS, "rm", "x")
	// df MOUNTPOINT, as lfs df: the mount's file system, no --mgs needed.
	var df cli.DfJSON
	if err := json.Unmarshal([]byte(run("/", []string{"NACRE_MGS="}, "df", "--json", m.Dir)), &df); err != nil || len(df.Targets) < 4 {
		t.Fatalf("df --json %s: %v %+v", m.Dir, err, df)
	}
	fail("/", nil, "/tmp is not on a Nacre mount", "df", "/tmp")
	run(m1, nil, "mv", "x", "y")
	run(m1, nil, "ln", "y", "z")
	run(m1, nil, "rm", "y", "z", "striped")
	if got := run("/", nil, "ls", "/m1"); got != "" {
		t.Fatalf("/m1 after rm in it: %q", got)
	}
	if got := run("/", nil, "cat", "/x"); got != "relative data\n" {
		t.Fatalf("/x after rm x in %s: %q", m1, got)
	}
	fail(elsewhere, nil, "relative path x is not under a Nacre mount", "rm", "x")
	fail(m.Dir, nil, "relative path ../x is not under a Nacre mount", "stat", "../x")
	run("/", nil, "get", m.Path("x"), filepath.Join(elsewhere, "x"))
	if got, _ := os.ReadFile(filepath.Join(elsewhere, "x")); string(got) != "relative data\n" {
		t.Fatalf("get by mount path: %q", got)
	}
}

// TestCLIPutNeverLeavesAPartialFile interrupts a put, and makes one fail
// after all its data is written: the destination keeps its old bytes and
// no temporary file is left.
func TestCLIPutNeverLeavesAPartialFile(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()
	old := filepath.Join(t.TempDir(), "old")
	os.WriteFile(old, []byte("old contents\n"), 0o644)
	if out, err := cl.Run("put", old, "/dst"); err != nil {
		t.Fatalf("put: %v %s", err, out)
	}
	names := func() []string {
		ents, err := c.ReadDirAll(ctx, fid.Root, false)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range ents {
			out = append(out, string(e.Name))
		}
		return out
	}
	checkLeftAlone := func(what string) {
		t.Helper()
		if got, err := cl.Run("cat", "/dst"); err != nil || got != "old contents\n" {
			t.Fatalf("%s: /dst now holds %q (%v)", what, got, err)
		}
		for _, n := range names() {
			if strings.Contains(n, "nacre-partial") {
				t.Fatalf("%s left %s behind: %v", what, n, names())
			}
		}
	}

	// Interrupted: the source is a FIFO that stalls after 17 MiB.
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	put := exec.Command(cl.Bin, "put", fifo, "/dst")
	put.Env = append(os.Environ(), "NACRE_MGS="+cl.MGS)
	var putOut bytes.Buffer
	put.Stdout, put.Stderr = &putOut, &putOut
	if err := put.Start(); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Not zeros: put would leave them as a hole, and the partial file's
	// size would not show how far it got.
	go w.Write(bytes.Repeat([]byte("data"), 17<<18)) // fails once w is closed
	var partial string
	if !wait.Poll(30*time.Second, func() bool {
		for _, n := range names() {
			if strings.HasPrefix(n, ".dst.nacre-partial-") {
				if ino, err := c.Resolve(ctx, "/"+n, false); err == nil && ino.Size >= 16<<20 {
					partial = n
					return true
				}
			}
		}
		return false
	}) {
		t.Fatalf("no 16 MiB partial file after 30 s: %v\n%s", names(), putOut.String())
	}
	if got, _ := cl.Run("cat", "/dst"); got != "old contents\n" {
		t.Fatalf("while put writes %s, /dst holds %d bytes", partial, len(got))
	}
	// The writer keeps the FIFO open and sends nothing more: the put,
	// waiting to read, must end on the interrupt all the same.
	put.Process.Signal(syscall.SIGINT)
	waited := make(chan error, 1)
	go func() { waited <- put.Wait() }()
	var werr error
	select {
	case werr = <-waited:
	case <-time.After(5 * time.Second):
		w.Close() // the put's read returns
		werr = <-waited
		t.Errorf("an interrupted put waited for its input: it ended only once the FIFO's writer closed it")
	}
	w.Close()
	if werr == nil {
		t.Fatalf("interrupted put succeeded:\n%s", putOut.String())
	}
	if !strings.Contains(putOut.String(), "nacre: interrupted") || strings.Contains(putOut.String(), "context canceled") {
		t.Errorf("an interrupted put should say it was interrupted:\n%s", putOut.String())
	}
	checkLeftAlone("an interrupted put")

	// Failed after writing everything: the final name is a directory.
	if out, err := cl.Run("mkdir", "-p", "/d/src/sub"); err != nil {
		t.Fatalf("mkdir: %v %s", err, out)
	}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, make([]byte, 1<<20), 0o644)
	if out, err := cl.Run("put", src, "/d"); err == nil {
		t.Fatalf("put over a directory succeeded: %s", out)
	}
	if got, _ := cl.Run("ls", "/d"); got != "src\n" {
		t.Fatalf("failed put left /d with %q", got)
	}
	// The parent is missing.
	if out, err := cl.Run("put", src, "/missing/f"); err == nil || !strings.Contains(out, "missing") {
		t.Fatalf("put into a missing directory: %v %s", err, out)
	}
	checkLeftAlone("failed puts")

	// A put that completes replaces the file.
	if out, err := cl.Run("put", src, "/dst"); err != nil {
		t.Fatalf("put: %v %s", err, out)
	}
	if ino, err := c.Resolve(ctx, "/dst", false); err != nil || ino.Size != 1<<20 {
		t.Fatalf("/dst after a complete put: %v %v", ino, err)
	}
	if n := names(); len(n) != 2 {
		t.Fatalf("root after a complete put: %v", n)
	}
	// Replacing a file keeps its layout (setstripe, then put into it).
	for _, args := range [][]string{{"setstripe", "-c", "2", "-S", "128K", "/laid"}, {"put", src, "/laid"}} {
		if out, err := cl.Run(args...); err != nil {
			t.Fatalf("nacre %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	if ino, err := c.Resolve(ctx, "/laid", false); err != nil || ino.Size != 1<<20 || ino.Layout.StripeCount != 2 || ino.Layout.StripeSize != 128<<10 {
		t.Fatalf("/laid after setstripe -c 2 -S 128K and put: %v %v", ino, err)
	}
}

// TestCLIStripeIndexAndChecker checks that setstripe and put refuse an
// OST index the file system does not have, and that `lfsck start --json`
// prints only JSON on standard output.
func TestCLIStripeIndexAndChecker(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 3})
	for _, args := range [][]string{{"setstripe", "-i", "7", "/f"}, {"put", "-i", "3", "/etc/hostname", "/g"}} {
		out, err := cl.Run(args...)
		if err == nil || !strings.Contains(out, "valid indexes are 0, 1, 2") {
			t.Fatalf("nacre %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	if out, err := cl.Run("ls", "/"); err != nil || out != "" {
		t.Fatalf("refused commands created files: %q %v", out, err)
	}
	if out, err := cl.Run("setstripe", "-i", "2", "/f"); err != nil {
		t.Fatalf("setstripe -i 2: %v %s", err, out)
	}

	out, errOut, err := nacreIn(cl, "/", nil, "lfsck", "start", "--json")
	var started admin.LfsckStarted
	if err != nil || json.Unmarshal([]byte(out), &started) != nil || len(started.Started) != 1 ||
		started.Started[0].MDT != 0 || started.Started[0].Message == "" {
		t.Fatalf("lfsck start --json: %v %+v\nstdout: %s\nstderr: %s", err, started, out, errOut)
	}
	if out, err := cl.Run("lfsck", "query", "--wait"); err != nil {
		t.Fatalf("lfsck query --wait: %v %s", err, out)
	}
	out, errOut, err = nacreIn(cl, "/", nil, "lfsck", "start", "--wait", "--json", "-r")
	var rep lfsck.Report
	if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Target == "" {
		t.Fatalf("lfsck start --wait --json: stdout is not one report: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	if rep.Running || rep.Components["namespace"] == nil {
		t.Fatalf("report %+v", rep)
	}
	if strings.TrimSpace(errOut) == "" {
		t.Fatalf("the start message is gone: stderr %q", errOut)
	}
}

// TestCLIDfLeavesDownTargetsOut checks df's USE% (used / (used + avail))
// and that a target that is down has no figures and is not in the total.
func TestCLIDfLeavesDownTargetsOut(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	df := func() cli.DfJSON {
		t.Helper()
		out, errOut, err := nacreIn(cl, "/", nil, "df", "--json")
		var d cli.DfJSON
		if err != nil || json.Unmarshal([]byte(out), &d) != nil {
			t.Fatalf("df --json: %v\n%s%s", err, out, errOut)
		}
		return d
	}
	pct := func(used, avail uint64) int { return int((used*100 + used + avail - 1) / (used + avail)) }
	d := df()
	var sum uint64
	for _, r := range d.Targets {
		if r.State != "up" || r.UsePercent == nil || *r.UsePercent != pct(r.BytesUsed, r.BytesAvail) {
			t.Fatalf("row %+v", r)
		}
		if r.Kind == "ost" {
			sum += r.BytesTotal
		}
	}
	if d.Total.BytesTotal != sum || d.Total.UsePercent == nil || *d.Total.UsePercent != pct(d.Total.BytesUsed, d.Total.BytesAvail) {
		t.Fatalf("total %+v", d.Total)
	}
	cl.Kill("ost1", syscall.SIGKILL)
	wait.NoErr(t, 30*time.Second, "df to show OST0001 down", func() error {
		d = df()
		var down *cli.DfRow
		var up uint64
		for i, r := range d.Targets {
			if strings.HasSuffix(r.Name, "OST0001") && r.State == "down" {
				down = &d.Targets[i]
			} else if r.Kind == "ost" {
				up += r.BytesTotal
			}
		}
		if down == nil {
			return fmt.Errorf("df: %+v", d)
		}
		if down.BytesTotal != 0 || down.UsePercent != nil || d.Total.BytesTotal != up || d.Total.State != "1 down" {
			t.Fatalf("df with OST0001 down: %+v", d)
		}
		return nil
	})
	out, err := cl.Run("df")
	if err != nil || !strings.Contains(out, "1 down") {
		t.Fatalf("df: %v\n%s", err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "OST0001") && strings.Contains(l, "%") {
			t.Fatalf("down OST shows figures: %s", out)
		}
	}
}

// TestDirectoryStripeIndexPlacesItsFiles: files created in a directory
// whose default layout names a first OST (setstripe -i) start on that OST,
// whether made through the CLI (put) or the library with no layout of
// their own; a file that names its own index keeps it. The MDS ordered
// the OSTs of a create by the request alone, so such files started on
// every OST in turn.
func TestDirectoryStripeIndexPlacesItsFiles(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 3})
	if out, err := cl.Run("mkdir", "/d"); err != nil {
		t.Fatalf("mkdir: %v %s", err, out)
	}
	if out, err := cl.Run("setstripe", "-c", "1", "-i", "2", "/d"); err != nil {
		t.Fatalf("setstripe -i 2 /d: %v %s", err, out)
	}
	c := cl.Client(t)
	ctx := context.Background()
	d, err := c.Lookup(ctx, fid.Root, "d")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("lib%d", i)
		if _, _, err := c.Create(ctx, fid.FromPB(d.Fid), name, 0o644, client.CreateOpts{}); err != nil {
			t.Fatal(err)
		}
		if out, err := cl.Run("put", "/etc/hostname", fmt.Sprintf("/d/put%d", i)); err != nil {
			t.Fatalf("put: %v %s", err, out)
		}
	}
	if out, err := cl.Run("put", "-i", "0", "/etc/hostname", "/d/own"); err != nil {
		t.Fatalf("put -i 0: %v %s", err, out)
	}
	check := func(name string, want int) {
		t.Helper()
		out, err := cl.Run("getstripe", "--json", "/d/"+name)
		if err != nil {
			t.Fatalf("getstripe %s: %v %s", name, err, out)
		}
		var s cli.StripeJSON
		if err := json.Unmarshal([]byte(out), &s); err != nil || len(s.Objects) != 1 {
			t.Fatalf("getstripe %s: %v %s", name, err, out)
		}
		if got := int(s.Objects[0].OST); got != want {
			t.Errorf("%s is on OST %d, want %d (the first OST it asks for)", name, got, want)
		}
	}
	for i := 0; i < 6; i++ {
		check(fmt.Sprintf("lib%d", i), 2)
		check(fmt.Sprintf("put%d", i), 2)
	}
	check("own", 0)
}

// TestCLINamesAndStripeMistakes: mistakes with a running cluster fail
// with the reason a user can act on. Before: "file/" listed the file; an
// empty symlink target was "file name too long"; a 256-byte name failed
// only after the data was copied; asking more stripes than there are OSTs
// said to wait for OSTs to come up.
func TestCLINamesAndStripeMistakes(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	if out, err := cl.Run("put", "/etc/hostname", "/h"); err != nil {
		t.Fatalf("put: %v\n%s", err, out)
	}
	long := "/" + strings.Repeat("n", 256)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"ls", "/h/"}, []string{"not a directory"}},
		{[]string{"stat", "/h/"}, []string{"not a directory"}},
		{[]string{"ln", "-s", "", "/empty"}, []string{"no such file or directory"}},
		{[]string{"put", "/etc/hostname", long}, []string{"256 bytes (at most 255)"}},
		{[]string{"put", "-c", "3", "/etc/hostname", "/c3"}, []string{"has only 2 OSTs", "give -c 2"}},
		{[]string{"setstripe", "-c", "5", "/c5"}, []string{"has only 2 OSTs", "give -c 2"}},
	} {
		out, err := cl.Run(c.args...)
		for _, w := range c.want {
			if err == nil || !strings.Contains(out, w) {
				t.Errorf("nacre %q: want a failure saying %q, got %v: %s", c.args, w, err, out)
			}
		}
		if strings.Contains(out, "once the OSTs are up") {
			t.Errorf("nacre %q: tells the user to wait for OSTs: %s", c.args, out)
		}
	}
	out, err := cl.Run("ls", "/")
	if err != nil || strings.TrimSpace(out) != "h" {
		t.Errorf("after the refused commands, / holds %q (%v), want only h", out, err)
	}
}

// TestCLIJSONFailuresAreJSON: a command asked for --json that fails before
// printing its document prints {"error": ...} on standard output (scripts
// parse it), the message on standard error, and exits 1.
func TestCLIJSONFailuresAreJSON(t *testing.T) {
	bin := testcluster.Binary(t)
	for _, args := range [][]string{{"status", "--json"}, {"df", "--json"}, {"lfsck", "query", "--json"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "NACRE_MGS=127.0.0.1:1")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var doc struct {
			Error string `json:"error"`
		}
		if jerr := json.Unmarshal(stdout.Bytes(), &doc); jerr != nil || !strings.Contains(doc.Error, "127.0.0.1:1") {
			t.Errorf("nacre %s with no MGS: standard output %q is not {\"error\": ...} naming the MGS (%v)", strings.Join(args, " "), stdout.String(), jerr)
		}
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "127.0.0.1:1") {
			t.Errorf("nacre %s with no MGS: %v, standard error %q", strings.Join(args, " "), err, stderr.String())
		}
	}
}
