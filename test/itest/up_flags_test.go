package itest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nacre/internal/target"
	"nacre/internal/version"
	"nacre/test/testcluster"
)

// TestUpRefusesBadFlagsBeforeStartingAnything: `--osts 0` made a cluster
// without OSTs (and `--mdts 0` or `--mdts 9` must not be taken either), and `--replicas 0` or `--replicas 2` were taken (two
// replicas survive no failure). They are refused, saying why, before the
// cluster directory is touched.
func TestUpRefusesBadFlagsBeforeStartingAnything(t *testing.T) {
	bin := testcluster.Binary(t)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--osts", "0"}, "--osts 0: a cluster needs at least 1 OST"},
		{[]string{"--osts", "-2"}, "--osts -2: a cluster needs at least 1 OST"},
		{[]string{"--replicas", "0"}, "--replicas 0: use 1, or an odd number from 3"},
		{[]string{"--replicas", "2"}, "2 replicas survive no failure"},
		{[]string{"--replicas", "4"}, "--replicas 4: use 1, or an odd number from 3"},
		{[]string{"--osts", "5000"}, "--osts 5000: a local cluster runs each OST as a process on this machine; at most 256"},
		{[]string{"--mdts", "0"}, "--mdts 0: a cluster needs at least 1 MDT"},
		{[]string{"--mdts", "-1"}, "--mdts -1: a cluster needs at least 1 MDT"},
		{[]string{"--mdts", "9"}, "--mdts 9: a local cluster runs each MDT as a process (each replica, with --replicas) on this machine; at most 8"},
		{[]string{"--fsname", "a/b"}, `file system name "a/b": use 1 to 8 letters, digits`},
		{[]string{"--node-cpu", "mds=x"}, `--node-cpu mds=x: "x" is not a number of cores`},
		{[]string{"--node-cpu", "oss=0.5"}, `--node-cpu oss=0.5: "oss" is no role`},
	}
	for _, c := range cases {
		dir := filepath.Join(t.TempDir(), "c")
		out, err := upDetached(t, bin, dir, c.args...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("up %s: want an error containing %q, got %v\n%s", strings.Join(c.args, " "), c.want, err, out)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("up %s made %s", strings.Join(c.args, " "), dir)
		}
	}
}

// TestUpNotesFlagsAnExistingClusterIgnores: --fsname, --replicas and a
// smaller --osts given for a cluster that exists were ignored without a
// word; each gets a note now. A larger --osts adds OSTs, as it says.
func TestUpNotesFlagsAnExistingClusterIgnores(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	if out, err := upDetached(t, bin, dir, "--osts", "2"); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	out, err := upDetached(t, bin, dir, "--fsname", "other", "--replicas", "3", "--osts", "1")
	if err != nil {
		t.Fatalf("up again with other flags: %v\n%s", err, out)
	}
	for _, want := range []string{"note: --fsname other is ignored", `file system "nacre"`, "note: --replicas 3 is ignored", "note: --osts 1 is ignored", "1 MDT, 2 OSTs"} {
		if !strings.Contains(out, want) {
			t.Errorf("up on the existing cluster with other flags: output lacks %q:\n%s", want, out)
		}
	}
	out, err = upDetached(t, bin, dir, "--osts", "3")
	if err != nil || strings.Contains(out, "note:") || !strings.Contains(out, "1 MDT, 3 OSTs") {
		t.Errorf("up --osts 3 on a cluster of 2 OSTs: want a third OST and no note, got %v\n%s", err, out)
	}
}

// TestCLIFormatChecksTheMGSNodeAndPrintsTheVersionItWrote: `nacre format
// --mgsnode nonsense` succeeded, and the server then logged "missing
// port in address" many times a second; and format said "(format version
// 0)" about a target whose identity file says 1.
func TestCLIFormatChecksTheMGSNodeAndPrintsTheVersionItWrote(t *testing.T) {
	bin := testcluster.Binary(t)
	for _, bad := range []string{"nonsense", "127.0.0.1", "127.0.0.1:0x10", "127.0.0.1:1,", "127.0.0.1:70000"} {
		dir := filepath.Join(t.TempDir(), "mdt")
		out, err := exec.Command(bin, "format", "--type", "mdt", "--dir", dir, "--mgsnode", bad).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "--mgsnode "+bad) || !strings.Contains(string(out), "HOST:PORT") {
			t.Errorf("format --mgsnode %q: want a refusal naming it and the form, got %v\n%s", bad, err, out)
		}
		if _, err := target.Load(dir); err == nil {
			t.Errorf("format --mgsnode %q formatted %s", bad, dir)
		}
	}
	for _, good := range []string{"127.0.0.1:41000", "h1:1,h2:2,h3:3"} {
		dir := filepath.Join(t.TempDir(), "ost")
		out, err := exec.Command(bin, "format", "--type", "ost", "--dir", dir, "--mgsnode", good).CombinedOutput()
		if err != nil {
			t.Errorf("format --mgsnode %q: %v\n%s", good, err, out)
		}
	}

	dir := filepath.Join(t.TempDir(), "mdt")
	out, err := exec.Command(bin, "format", "--type", "mdt", "--dir", dir, "--mgsnode", "127.0.0.1:41000").CombinedOutput()
	if err != nil {
		t.Fatalf("format: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, target.IdentityFile))
	if err != nil {
		t.Fatal(err)
	}
	var id struct {
		FormatVersion int `json:"format_version"`
	}
	if err := json.Unmarshal(b, &id); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("(format version %d)", id.FormatVersion)
	if id.FormatVersion != version.Format || !strings.Contains(string(out), want) {
		t.Errorf("format printed %q; its identity file says format version %d (this nacre writes %d)", out, id.FormatVersion, version.Format)
	}
}
