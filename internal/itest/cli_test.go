package itest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nacre/internal/cli"
	"nacre/internal/testcluster"
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
	fail("no entry", "stat", "/a")
	fail("stripe size", "setstripe", "-S", "1000", "/x")
}

// TestCLIErrorsNameTheProblem checks the messages of common mistakes.
func TestCLIErrorsNameTheProblem(t *testing.T) {
	bin := testcluster.Binary(t)
	cases := []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"ls", "/"}, "NACRE_MGS=", "NACRE_MGS"},
		{[]string{"ls", "/"}, "NACRE_MGS=127.0.0.1:1", "cannot reach the MGS at 127.0.0.1:1"},
		{[]string{"status"}, "NACRE_MGS=127.0.0.1:1", "does not answer"},
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
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("nacre %s: want failure mentioning %q, got %v: %s", strings.Join(c.args, " "), c.want, err, out)
		}
	}
}
