package itest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/cli"
	"nacre/internal/fusefs"
	"nacre/internal/localcluster"
	"nacre/test/testcluster"
)

// cliT runs the nacre binary against a test cluster.
type cliT struct {
	t  *testing.T
	cl *testcluster.Cluster
}

// run runs nacre in / and fails the test if it fails.
func (c cliT) run(args ...string) string {
	c.t.Helper()
	out, errOut, err := nacreIn(c.cl, "/", nil, args...)
	if err != nil {
		c.t.Fatalf("nacre %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// exit runs nacre in / and returns its output and exit status.
func (c cliT) exit(args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	out, errOut, err := nacreIn(c.cl, "/", nil, args...)
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		c.t.Fatalf("nacre %s: %v", strings.Join(args, " "), err)
	}
	return out, errOut, code
}

// failsFor runs a command that must exit 1 after reporting exactly the
// wanted lines on standard error, in order; it returns standard output.
func (c cliT) failsFor(want []string, args ...string) string {
	c.t.Helper()
	out, errOut, code := c.exit(args...)
	lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
	if code != 1 || !slices.Equal(lines, want) {
		c.t.Fatalf("nacre %s: exit %d, stderr\n%s\nwant exit 1 and\n%s", strings.Join(args, " "), code, errOut, strings.Join(want, "\n"))
	}
	return out
}

func (c cliT) names(dir string) []string {
	c.t.Helper()
	out := strings.TrimSpace(c.run("ls", dir))
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// TestCLISeveralOperandsAreAllTried checks that mkdir, rm, cat, stat,
// path2fid, fid2path, mv and ln go on past a bad operand, as coreutils
// do: one error line naming each bad operand, exit status 1 at the end.
func TestCLISeveralOperandsAreAllTried(t *testing.T) {
	c := cliT{t, testcluster.Start(t, testcluster.Options{OSTs: 2})}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("a\n"), 0o644)
	c.run("put", src, "/f")

	c.failsFor([]string{
		"nacre: mkdir /missing/x: no such file or directory: a parent directory is missing (-p makes parents)",
		"nacre: mkdir /f: file exists",
	}, "mkdir", "/d1", "/missing/x", "/d2", "/f", "/d3")
	if got := c.names("/"); !slices.Equal(got, []string{"d1", "d2", "d3", "f"}) {
		t.Fatalf("after mkdir: %v", got)
	}

	out := c.failsFor([]string{"nacre: cat /nope: no such file or directory", "nacre: cat /d1: is a directory"},
		"cat", "/f", "/nope", "/d1", "/f")
	if out != "a\na\n" {
		t.Fatalf("cat wrote %q", out)
	}

	out = c.failsFor([]string{"nacre: stat /nope: no such file or directory"}, "stat", "--json", "/f", "/nope", "/d1")
	// Every operand has its element, in order; the one that failed says
	// why and has no attributes (it was left out).
	var infos []map[string]any
	if err := json.Unmarshal([]byte(out), &infos); err != nil || len(infos) != 3 || infos[0]["path"] != "/f" || infos[0]["error"] != nil ||
		infos[1]["path"] != "/nope" || infos[1]["error"] != "no such file or directory" || infos[1]["mode"] != nil || infos[2]["type"] != "directory" {
		t.Fatalf("stat --json of 3 paths, one missing: %v %s", err, out)
	}
	if out := c.run("stat", "/f", "/d1"); strings.Count(out, "  File: ") != 2 {
		t.Fatalf("stat of two paths:\n%s", out)
	}

	out = c.failsFor([]string{"nacre: path2fid /nope: no such file or directory"}, "path2fid", "/f", "/nope", "/d1")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "/f: [0x") || !strings.HasPrefix(lines[1], "/d1: [0x") {
		t.Fatalf("path2fid: %q", out)
	}
	fidF := strings.TrimSpace(c.run("path2fid", "/f"))
	// A first argument that is not a FID is a mount point.
	if out, errOut, code := c.exit("fid2path", "nonsense", fidF); code != 1 || out != "" || !strings.Contains(errOut, "fid2path nonsense: relative path nonsense is not under a Nacre mount") {
		t.Fatalf("fid2path with a bad mount point: exit %d %q %q", code, out, errOut)
	}
	out = c.failsFor([]string{`nacre: fid2path 0xbad: invalid FID "0xbad": want [0xSEQ:0xOID:0xVER]`, "nacre: fid2path [0x200000400:0xfffff:0x0]: no such file or directory"},
		"fid2path", fidF, "0xbad", "[0x200000400:0xfffff:0x0]", fidF)
	if out != "/f\n/f\n" {
		t.Fatalf("fid2path printed %q", out)
	}
	// --json: an element per operand, the failed ones with their error
	// (they were left out, so a script could not pair them up).
	out = c.failsFor([]string{"nacre: path2fid /nope: no such file or directory"}, "path2fid", "--json", "/f", "/nope")
	var pfs []map[string]any
	if err := json.Unmarshal([]byte(out), &pfs); err != nil || len(pfs) != 2 || pfs[0]["fid"] != fidF || pfs[0]["error"] != nil ||
		pfs[1]["path"] != "/nope" || pfs[1]["error"] != "no such file or directory" || pfs[1]["fid"] != nil {
		t.Fatalf("path2fid --json of 2 paths, one missing: %v %s", err, out)
	}
	out = c.failsFor([]string{"nacre: fid2path [0x200000400:0xfffff:0x0]: no such file or directory"}, "fid2path", "--json", "[0x200000400:0xfffff:0x0]", fidF)
	var fps []map[string]any
	if err := json.Unmarshal([]byte(out), &fps); err != nil || len(fps) != 2 || fps[0]["error"] != "no such file or directory" ||
		fps[1]["fid"] != fidF || fps[1]["error"] != nil || fmt.Sprint(fps[1]["paths"]) != "[/f]" {
		t.Fatalf("fid2path --json of 2 FIDs, one missing: %v %s", err, out)
	}

	c.failsFor([]string{"nacre: ln /nope: no such file or directory"}, "ln", "/f", "/nope", "/d1")
	c.failsFor([]string{"nacre: ln /f as /d1/f: file exists"}, "ln", "-s", "/f", "/elsewhere", "/d1")
	if got := c.names("/d1"); !slices.Equal(got, []string{"elsewhere", "f"}) {
		t.Fatalf("/d1 after ln: %v", got)
	}
	c.failsFor([]string{"nacre: mv /nope: no such file or directory"}, "mv", "/d2", "/nope", "/d3", "/d1")
	if got := c.names("/d1"); !slices.Equal(got, []string{"d2", "d3", "elsewhere", "f"}) {
		t.Fatalf("/d1 after mv: %v", got)
	}
	if _, errOut, code := c.exit("mv", "/f", "/d1/f", "/g"); code != 1 || !strings.Contains(errOut, "target /g is not a directory") {
		t.Fatalf("mv of two files to a new name: exit %d %s", code, errOut)
	}

	c.failsFor([]string{
		"nacre: rm /nope: no such file or directory",
		"nacre: rm /d1: is a directory (use -r to remove it and its contents)",
		"nacre: rm /f/x: not a directory",
	}, "rm", "/nope", "/d1", "/f/x", "/f")
	if got := c.names("/"); !slices.Equal(got, []string{"d1"}) {
		t.Fatalf("after rm: %v", got)
	}
}

// TestCLIRmForceAndRecursive checks rm -f (a missing name is no error)
// and rm -r (a whole tree), and that rm refuses . and the root.
func TestCLIRmForceAndRecursive(t *testing.T) {
	c := cliT{t, testcluster.Start(t, testcluster.Options{OSTs: 2})}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("data\n"), 0o644)
	c.run("mkdir", "-p", "/t/a/b/c", "/t/e")
	for _, p := range []string{"/t/x", "/t/a/y", "/t/a/b/c/z", "/keep"} {
		c.run("put", src, p)
	}
	c.run("ln", "-s", "/keep", "/t/a/link")
	c.run("rm", "-f", "/nope", "/missing/dir/x")
	c.run("rm", "-f")
	if _, errOut, code := c.exit("rm", "-f", "/keep/x", "/nope"); code != 1 || strings.TrimSpace(errOut) != "nacre: rm /keep/x: not a directory" {
		t.Fatalf("rm -f /keep/x: exit %d %q", code, errOut)
	}
	c.run("rm", "-rf", "/t", "/nope")
	if got := c.names("/"); !slices.Equal(got, []string{"keep"}) {
		t.Fatalf("after rm -rf /t: %v", got)
	}
	c.failsFor([]string{"nacre: rm /: refusing to remove the file system root"}, "rm", "-rf", "/")
	if got := c.run("cat", "/keep"); got != "data\n" {
		t.Fatalf("/keep after rm -rf /: %q", got)
	}
}

// TestCLIRmRefusesAMountPoint checks that rm -r of a Nacre mount point, or
// of . in it, removes nothing.
func TestCLIRmRefusesAMountPoint(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cliT{t, cl}
	m := mountFuse(t, cl)
	c.run("mkdir", "-p", "/a/b")
	out, errOut, err := nacreIn(cl, "/", nil, "rm", "-rf", m.Dir)
	if err == nil || !strings.Contains(errOut, "refusing to remove the mount point "+m.Dir) {
		t.Fatalf("rm -rf %s: %v %s%s", m.Dir, err, out, errOut)
	}
	out, errOut, err = nacreIn(cl, m.Path("a"), nil, "rm", "-rf", ".")
	if err == nil || !strings.Contains(errOut, "refusing to remove . or ..") {
		t.Fatalf("rm -rf . in %s: %v %s%s", m.Path("a"), err, out, errOut)
	}
	if got := c.names("/a"); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("/a after the refused removals: %v", got)
	}
}

// TestCLIPutFromStandardInput checks `nacre put - DEST`: the data comes
// from standard input, through a hidden temporary renamed over DEST.
func TestCLIPutFromStandardInput(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cliT{t, cl}
	data := bytes.Repeat([]byte("standard input\n"), 300000) // 4.5 MB: several writes
	put := func(dest string, in []byte) (string, error) {
		cmd := exec.Command(cl.Bin, "put", "-c", "2", "-", dest)
		cmd.Env = append(os.Environ(), "NACRE_MGS="+cl.MGS)
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := put("/in", data); err != nil {
		t.Fatalf("put - /in: %v %s", err, out)
	}
	if got := c.run("cat", "/in"); got != string(data) {
		t.Fatalf("/in holds %d bytes, want %d", len(got), len(data))
	}
	var st cli.StatInfo
	json.Unmarshal([]byte(c.run("stat", "--json", "/in")), &st)
	if st.Mode != fmt.Sprintf("%04o", 0o666&^umask()) {
		t.Fatalf("mode of a file put from standard input: %s", st.Mode)
	}
	if out, err := put("/in", []byte("short\n")); err != nil {
		t.Fatalf("put - over /in: %v %s", err, out)
	}
	if got := c.run("cat", "/in"); got != "short\n" {
		t.Fatalf("/in after the second put: %q", got)
	}
	c.run("mkdir", "/dir")
	if out, err := put("/dir", data); err == nil || !strings.Contains(out, "put - /dir/NAME") {
		t.Fatalf("put - into a directory: %v %s", err, out)
	}
	if got := c.names("/"); !slices.Equal(got, []string{"dir", "in"}) {
		t.Fatalf("root after the puts: %v", got)
	}
}

func umask() int {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return m
}

// TestCLIJSONOfLsAndFIDs checks ls --json, path2fid --json and
// fid2path --json.
func TestCLIJSONOfLsAndFIDs(t *testing.T) {
	c := cliT{t, testcluster.Start(t, testcluster.Options{OSTs: 2})}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, make([]byte, 12345), 0o640)
	c.run("mkdir", "/d")
	c.run("put", src, "/d/f")
	c.run("ln", "/d/f", "/d/hard")
	c.run("ln", "-s", "f", "/d/soft")
	c.run("mkdir", "/d/sub")

	var ents []cli.LsEntry
	if out := c.run("ls", "--json", "/d"); json.Unmarshal([]byte(out), &ents) != nil || len(ents) != 4 {
		t.Fatalf("ls --json /d: %s", out)
	}
	f, hard, soft, sub := ents[0], ents[1], ents[2], ents[3]
	if f.Name != "f" || f.Type != "regular file" || f.Mode != "0640" || f.Size != 12345 || f.Nlink != 2 || f.UID != uint32(os.Getuid()) ||
		f.FID != hard.FID || !strings.HasPrefix(f.FID, "[0x") {
		t.Fatalf("ls --json: f %+v, hard %+v", f, hard)
	}
	if mt, err := time.Parse(time.RFC3339Nano, f.Mtime); err != nil || time.Since(mt) > time.Hour {
		t.Fatalf("mtime %q: %v", f.Mtime, err)
	}
	if soft.Type != "symbolic link" || soft.Target != "f" || sub.Name != "sub" || sub.Type != "directory" {
		t.Fatalf("ls --json: soft %+v, sub %+v", soft, sub)
	}
	if out := c.run("ls", "--json", "/d/f"); json.Unmarshal([]byte(out), &ents) != nil || len(ents) != 1 || ents[0].Name != "f" || ents[0].Size != 12345 {
		t.Fatalf("ls --json of a file: %s", out)
	}
	if out := c.run("ls", "--json", "/d/sub"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("ls --json of an empty directory: %q", out)
	}

	var pf cli.PathFID
	if out := c.run("path2fid", "--json", "/d/f"); json.Unmarshal([]byte(out), &pf) != nil || pf.Path != "/d/f" || pf.FID != f.FID {
		t.Fatalf("path2fid --json: %s", out)
	}
	var pfs []cli.PathFID
	if out := c.run("path2fid", "--json", "/d/f", "/d/sub"); json.Unmarshal([]byte(out), &pfs) != nil || len(pfs) != 2 || pfs[1].FID != sub.FID {
		t.Fatalf("path2fid --json of two paths: %s", out)
	}
	var fp cli.FIDPaths
	if out := c.run("fid2path", "--json", f.FID); json.Unmarshal([]byte(out), &fp) != nil || fp.FID != f.FID {
		t.Fatalf("fid2path --json: %s", out)
	}
	slices.Sort(fp.Paths)
	if !slices.Equal(fp.Paths, []string{"/d/f", "/d/hard"}) {
		t.Fatalf("fid2path --json paths: %v", fp.Paths)
	}
	var fps []cli.FIDPaths
	if out := c.run("fid2path", "--json", f.FID, sub.FID); json.Unmarshal([]byte(out), &fps) != nil || len(fps) != 2 || !slices.Equal(fps[1].Paths, []string{"/d/sub"}) {
		t.Fatalf("fid2path --json of two FIDs: %s", out)
	}
}

// TestCLIFid2PathUnderAMount checks `nacre fid2path MOUNTPOINT FID`
// (paths under the mount, as lfs fid2path), from inside a mount (the
// same), and without either (paths from the file system root).
func TestCLIFid2PathUnderAMount(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cliT{t, cl}
	m := mountFuse(t, cl)
	c.run("mkdir", "/a")
	c.run("put", "/etc/hostname", "/a/f")
	c.run("ln", "/a/f", "/g")
	f := strings.TrimSpace(c.run("path2fid", "/a/f"))
	sorted := func(out string) []string {
		l := strings.Split(strings.TrimSpace(out), "\n")
		slices.Sort(l)
		return l
	}
	if got := sorted(c.run("fid2path", f)); !slices.Equal(got, []string{"/a/f", "/g"}) {
		t.Fatalf("fid2path %s: %v", f, got)
	}
	want := []string{m.Path("a", "f"), m.Path("g")}
	if got := sorted(c.run("fid2path", m.Dir, f)); !slices.Equal(got, want) {
		t.Fatalf("fid2path %s %s: %v", m.Dir, f, got)
	}
	if got := sorted(c.run("fid2path", m.Path("a"), f)); !slices.Equal(got, want) {
		t.Fatalf("fid2path %s %s (a directory on the mount): %v", m.Path("a"), f, got)
	}
	out, errOut, err := nacreIn(cl, m.Path("a"), []string{"NACRE_MGS="}, "fid2path", f)
	if err != nil || !slices.Equal(sorted(out), want) {
		t.Fatalf("fid2path in %s without NACRE_MGS: %v %q %s", m.Path("a"), err, out, errOut)
	}
	var fp cli.FIDPaths
	if out := c.run("fid2path", "--json", m.Dir, f); json.Unmarshal([]byte(out), &fp) != nil || len(fp.Paths) != 2 || !slices.Contains(fp.Paths, m.Path("g")) {
		t.Fatalf("fid2path --json %s: %s", m.Dir, out)
	}
	notMount := t.TempDir()
	if _, errOut, code := c.exit("fid2path", notMount, f); code != 1 || !strings.Contains(errOut, notMount+" is not a Nacre mount") {
		t.Fatalf("fid2path with a directory that is not a mount: exit %d %s", code, errOut)
	}
}

// TestCLIReadOfADownOSTFailsFastNamingIt kills an OST and reads a file
// with a stripe on it: get and cat fail within a few seconds (not the
// client's 30 s timeout) with a message naming the OST, its address, the
// stripe and the path.
func TestCLIReadOfADownOSTFailsFastNamingIt(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cliT{t, cl}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, make([]byte, 1<<20), 0o644)
	c.run("put", "-c", "2", "-S", "64K", src, "/f")
	var gs cli.StripeJSON
	json.Unmarshal([]byte(c.run("getstripe", "--json", "/f")), &gs)
	stripe := slices.IndexFunc(gs.Objects, func(o cli.StripeObjectJSON) bool { return o.OST == 1 })
	var st cli.ClusterStatus
	json.Unmarshal([]byte(c.run("status", "--json")), &st)
	var dataAddr string
	for _, ts := range st.Targets {
		if ts.Kind == "ost" && ts.Index == 1 {
			dataAddr = ts.DataAddr
		}
	}
	if stripe < 0 || dataAddr == "" {
		t.Fatalf("no stripe on OST0001 (%+v) or no address (%+v)", gs, st)
	}
	cl.Kill("ost1", syscall.SIGKILL)
	want := fmt.Sprintf("OST0001 (%s) is down: stripe %d of /f cannot be read", dataAddr, stripe)
	for _, args := range [][]string{{"get", "/f", filepath.Join(t.TempDir(), "out")}, {"cat", "/f"}} {
		start := time.Now()
		_, errOut, code := c.exit(args...)
		took := time.Since(start)
		if code == 0 || !strings.Contains(errOut, want) || !strings.Contains(errOut, "connection refused") || !strings.Contains(errOut, "nacre status") {
			t.Fatalf("nacre %s with OST0001 down: exit %d, stderr %q; want %q", strings.Join(args, " "), code, errOut, want)
		}
		if took > 10*time.Second {
			t.Fatalf("nacre %s took %v to report OST0001 down", strings.Join(args, " "), took)
		}
		t.Logf("nacre %s: %v: %s", strings.Join(args, " "), took.Round(time.Millisecond), strings.TrimSpace(errOut))
	}
}

// TestCLIReadWaitsForAnOSTThatRestarts kills an OST, starts a read, and
// restarts the OST a second later: the read succeeds.
func TestCLIReadWaitsForAnOSTThatRestarts(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cliT{t, cl}
	data := make([]byte, 1<<20)
	for i := range data {
		data[i] = byte(i * 13)
	}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, data, 0o644)
	c.run("put", "-c", "2", "-S", "64K", src, "/f")
	cl.Kill("ost1", syscall.SIGKILL)
	get := exec.Command(cl.Bin, "cat", "/f")
	get.Env = append(os.Environ(), "NACRE_MGS="+cl.MGS)
	var out, errOut bytes.Buffer
	get.Stdout, get.Stderr = &out, &errOut
	if err := get.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the read runs, and retries, while OST0001 is down
	if _, err := localcluster.Start(cl.Bin, cl.TargetDir("ost1")); err != nil {
		t.Fatalf("restart OST0001: %v", err)
	}
	if err := get.Wait(); err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Fatalf("cat across an OST restart: %v, %d bytes\n%s", err, out.Len(), errOut.String())
	}
}

// TestCLIStatusShowsADeadPid kills an OST and asks for the status at
// once, before the MGS notices the missing heartbeats: the OST's pid is
// shown dead and the OST down.
func TestCLIStatusShowsADeadPid(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cliT{t, cl}
	pid := cl.Pid("ost1")
	cl.Kill("ost1", syscall.SIGKILL)
	var st cli.ClusterStatus
	json.Unmarshal([]byte(c.run("status", "--json")), &st)
	for _, ts := range st.Targets {
		dead := ts.Kind == "ost" && ts.Index == 1
		if ts.PidAlive == nil || *ts.PidAlive == dead || (dead && (ts.State != "down" || ts.Pid != int64(pid))) || (!dead && ts.State != "up") {
			t.Fatalf("status --json with OST0001 (pid %d) killed: %+v (pid_alive %v)", pid, ts, ts.PidAlive)
		}
	}
	out := c.run("status")
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "OST0001") && (!strings.Contains(l, fmt.Sprintf("%d (dead)", pid)) || !strings.Contains(l, " down ")) {
			t.Fatalf("status line of the killed OST: %s", l)
		}
		if strings.Contains(l, "OST0000") && strings.Contains(l, "dead") {
			t.Fatalf("status line of a live OST: %s", l)
		}
	}
}

// TestCLIDownUnmountsTheFileSystemsMounts checks that `nacre down`
// unmounts the Nacre mounts of its file system first, and names a busy
// one it could not unmount.
func TestCLIDownUnmountsTheFileSystemsMounts(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	idle, busy := mountFuse(t, cl), mountFuse(t, cl)
	other := mountFuse(t, testcluster.Start(t, testcluster.Options{OSTs: 1}))
	if err := os.WriteFile(busy.Path("open"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(busy.Path("open"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(cl.Bin, "down", "--dir", cl.Dir)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("down: %v\n%s%s", err, out.String(), errOut.String())
	}
	if _, ok := fusefs.FindMount(idle.Dir); ok || !strings.Contains(out.String(), "unmounted "+idle.Dir) {
		t.Fatalf("down left %s mounted:\n%s%s", idle.Dir, out.String(), errOut.String())
	}
	select {
	case <-idle.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the daemon of %s still runs after down", idle.Dir)
	}
	if !strings.Contains(errOut.String(), "could not unmount "+busy.Dir) || !strings.Contains(errOut.String(), "nacre umount "+busy.Dir) {
		t.Fatalf("down did not name the busy mount %s:\n%s", busy.Dir, errOut.String())
	}
	if _, ok := fusefs.FindMount(other.Dir); !ok || strings.Contains(out.String()+errOut.String(), other.Dir) {
		t.Fatalf("down touched %s, a mount of another file system:\n%s%s", other.Dir, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "stopped 4 target processes") {
		t.Fatalf("down did not stop the cluster:\n%s", out.String())
	}
}

// TestCLIMissingPathsAreNamedPlainly checks that a path that does not
// exist is reported as coreutils would, naming the path at fault and not
// the layers of lookups and FIDs (it used to be `resolve /nope: lookup
// nope: no entry "nope" in [0x200000007:0x1:0x0]: ...`), that mv and ln
// name the destination when it is the one missing, and that get names
// the local file, not its hidden partial file.
func TestCLIMissingPathsAreNamedPlainly(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	if out, err := cl.Run("put", "/etc/hostname", "/f"); err != nil {
		t.Fatalf("put: %v %s", err, out)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"getstripe", "/nope"}, "nacre: getstripe /nope: no such file or directory\n"},
		{[]string{"setstripe", "-c", "1", "/nodir/f"}, "nacre: setstripe /nodir/f: no such file or directory\n"},
		{[]string{"setstripe", "-c", "1", "/f/x"}, "nacre: setstripe /f/x: not a directory\n"},
		{[]string{"put", "/etc/hostname", "/nodir/f"}, "nacre: put /nodir/f: no such file or directory\n"},
		{[]string{"mv", "/f", "/nodir/g"}, "nacre: mv /f to /nodir/g: no such file or directory\n"},
		{[]string{"ln", "-s", "target", "/nodir/l"}, "nacre: ln target as /nodir/l: no such file or directory\n"},
		{[]string{"ln", "/f", "/nodir/l"}, "nacre: ln /f as /nodir/l: no such file or directory\n"},
		{[]string{"fault", "inject", "linkea_missing", "--path", "/nope"}, "nacre: fault inject /nope: no such file or directory\n"},
		{[]string{"get", "/f", "/nonexistent-dir/x"}, "nacre: get /f: cannot write /nonexistent-dir/x: no such file or directory\n"},
	}
	for _, c := range cases {
		out, err := cl.Run(c.args...)
		if err == nil || out != c.want {
			t.Errorf("nacre %s: got %v %q, want a failure printing %q", strings.Join(c.args, " "), err, out, c.want)
		}
	}
	// The file that was named in mv's failure is still there.
	if out, err := cl.Run("stat", "/f"); err != nil {
		t.Errorf("stat /f: %v %s", err, out)
	}
}

// TestCLILsReportsEntriesItCannotStat checks that ls -l and ls --json
// say which listed entries they could not stat and why, on standard
// error, and exit 1, as ls does ("cannot access"); --json marks such an
// entry with "error" and gives none of its attributes. They printed a
// row of "?" (and zeros in JSON) and exited 0.
func TestCLILsReportsEntriesItCannotStat(t *testing.T) {
	c := cliT{t, testcluster.Start(t, testcluster.Options{OSTs: 2})}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("data"), 0o644)
	c.run("mkdir", "/d")
	c.run("put", src, "/d/a")
	c.run("put", src, "/d/b")
	// The entry /d/a stays; the object it names is gone.
	c.run("fault", "inject", "dangling", "--path", "/d/a", "--yes")

	wantErr := []string{"nacre: ls: cannot access /d/a: no such file or directory"}
	out := c.failsFor(wantErr, "ls", "-l", "/d")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasSuffix(lines[0], " a (no attributes)") || !strings.HasSuffix(lines[1], " b") {
		t.Fatalf("ls -l /d:\n%s", out)
	}
	out = c.failsFor(wantErr, "ls", "--json", "/d")
	var ents []map[string]any
	if err := json.Unmarshal([]byte(out), &ents); err != nil || len(ents) != 2 {
		t.Fatalf("ls --json /d: %v\n%s", err, out)
	}
	a, b := ents[0], ents[1]
	if a["name"] != "a" || a["error"] != "no such file or directory" || a["fid"] == "" {
		t.Fatalf("ls --json: the entry that cannot be stat'ed is %v", a)
	}
	for _, k := range []string{"mode", "nlink", "size", "uid", "gid", "mtime"} {
		if _, ok := a[k]; ok {
			t.Fatalf("ls --json: the entry that cannot be stat'ed has %q: %v", k, a)
		}
	}
	if _, ok := b["error"]; ok || b["name"] != "b" || b["size"] != float64(4) {
		t.Fatalf("ls --json: the entry that can be stat'ed is %v", b)
	}
	// Without attributes, nothing is stat'ed and nothing fails.
	if got := c.names("/d"); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("ls /d: %q", got)
	}
}
