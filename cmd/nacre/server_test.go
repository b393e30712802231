package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nacre/internal/target"
)

// TestDownAndStatusNameADirectoryThatIsNoCluster: `nacre down` (also
// without --dir, in a directory with no ./nacre-cluster) and `status
// --dir` on a missing or foreign directory say it is not a cluster and
// what to give, not "open nacre-cluster: no such file or directory".
func TestDownAndStatusNameADirectoryThatIsNoCluster(t *testing.T) {
	tmp := t.TempDir()
	foreign := filepath.Join(tmp, "foreign")
	os.MkdirAll(foreign, 0o755)
	os.WriteFile(filepath.Join(foreign, "file"), []byte("x"), 0o644)
	missing := filepath.Join(tmp, "missing")
	t.Chdir(tmp)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"down"}, "nacre-cluster is not a local Nacre cluster (no such directory): give --dir"},
		{[]string{"down", "--dir", missing}, missing + " is not a local Nacre cluster (no such directory)"},
		{[]string{"down", "--dir", foreign}, foreign + " is not a local Nacre cluster (no mgs directory)"},
		{[]string{"status", "--dir", missing}, missing + " is not a local Nacre cluster (no such directory)"},
		{[]string{"status", "--dir", foreign}, foreign + " is not a local Nacre cluster (no mgs directory)"},
	}
	for _, c := range cases {
		_, err := runNacre(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("nacre %s: %v, want an error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("down created %s", missing)
	}
}

// TestSelfNameIsWhatRunsThisBinary: up's hints ("Try: nacre status")
// name a command that works: scripts/up.sh runs bin/nacre, not on the
// PATH, so its hints must say bin/nacre.
func TestSelfNameIsWhatRunsThisBinary(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "nacre")
	os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755)
	other := filepath.Join(dir, "other-nacre")
	os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755)
	exe := func() (string, error) { return bin, nil }
	found := func(p string) func(string) (string, error) {
		return func(string) (string, error) { return p, nil }
	}
	notFound := func(string) (string, error) { return "", os.ErrNotExist }
	cases := []struct {
		arg0   string
		lookup func(string) (string, error)
		want   string
	}{
		{"nacre", found(bin), "nacre"},
		{"bin/nacre", found(bin), "nacre"},
		{"bin/nacre", notFound, "bin/nacre"},
		{"bin/nacre", found(other), "bin/nacre"},
		{"nacre", found(other), bin},
	}
	for _, c := range cases {
		if got := selfNameFor(c.arg0, c.lookup, exe); got != c.want {
			t.Errorf("selfNameFor(%q): %q, want %q", c.arg0, got, c.want)
		}
	}
}

// TestFormatAddressesFollowListen: a target formatted to be reached at a
// non-loopback address serves its data (or metadata requests) and metrics
// on that host too, unless told otherwise; a wildcard address, which
// would be advertised to clients as such, is refused.
func TestFormatAddressesFollowListen(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "ost0")
	if _, err := runNacre(t, "format", "--type", "ost", "--dir", dir, "--fsname", "x", "--listen", "127.0.0.31:7201", "--mgsnode", "127.0.0.1:7001"); err != nil {
		t.Fatal(err)
	}
	id, err := target.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id.DataListen != "127.0.0.31:0" || id.MetricsListen != "127.0.0.31:0" {
		t.Fatalf("data %q, metrics %q: want both on 127.0.0.31", id.DataListen, id.MetricsListen)
	}
	dir = filepath.Join(tmp, "mdt0")
	if _, err := runNacre(t, "format", "--type", "mdt", "--dir", dir, "--fsname", "x", "--listen", "127.0.0.32:7101", "--data-listen", "127.0.0.32:7102", "--mgsnode", "127.0.0.1:7001"); err != nil {
		t.Fatal(err)
	}
	if id, err = target.Load(dir); err != nil || id.DataListen != "127.0.0.32:7102" {
		t.Fatalf("data %q (%v): want the one given", id.DataListen, err)
	}
	for _, flag := range []string{"--listen", "--data-listen"} {
		for _, a := range []string{"0.0.0.0:7301", "[::]:7301", ":7301"} {
			_, err := runNacre(t, "format", "--type", "ost", "--dir", filepath.Join(tmp, "w"+flag), "--fsname", "x", "--index", "1",
				"--mgsnode", "127.0.0.1:7001", flag, a)
			if err == nil || !strings.Contains(err.Error(), "cannot be advertised") {
				t.Errorf("format %s %s: %v, want a refusal naming the wildcard", flag, a, err)
			}
		}
	}
}

// TestFormatRefusesBadPeers: --peers naming a replica twice, two replicas
// at one address, a port picked at start (the others could not dial it),
// or a group of two, and flags an MGS has no use for, are refused with
// what to give instead.
func TestFormatRefusesBadPeers(t *testing.T) {
	base := []string{"format", "--type", "mdt", "--fsname", "x", "--replica-id", "1", "--listen", "127.0.0.21:7101", "--mgsnode", "127.0.0.1:7001"}
	for _, c := range []struct{ peers, want string }{
		{"1=127.0.0.21:7101,1=127.0.0.22:7101", "names replica 1 twice"},
		{"1=127.0.0.21:7101,2=127.0.0.21:7101,3=127.0.0.23:7101", "the same address"},
		{"1=127.0.0.21:7101,2=127.0.0.22:0,3=127.0.0.23:7101", "a fixed port"},
		{"1=127.0.0.21:7101,2=127.0.0.22:7101", "two replicas survive no failure"},
	} {
		_, err := runNacre(t, append(base, "--dir", filepath.Join(t.TempDir(), "d"), "--peers", c.peers)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--peers %s: %v, want %q", c.peers, err, c.want)
		}
	}
	for _, flag := range []string{"--index=2", "--mgsnode=127.0.0.1:7001"} {
		_, err := runNacre(t, "format", "--type", "mgs", "--fsname", "x", "--listen", "127.0.0.1:7001", "--dir", filepath.Join(t.TempDir(), "m"), flag)
		if err == nil || !strings.Contains(err.Error(), "is not for an MGS") {
			t.Errorf("format --type mgs %s: %v", flag, err)
		}
	}
}

// TestStatusJSONWithTheMGSDownSaysWhyInWords: `status --json --dir D`
// with the MGS down puts the reason in "error" as the text says it,
// without gRPC's "rpc error: code = Unavailable desc = ".
func TestStatusJSONWithTheMGSDownSaysWhyInWords(t *testing.T) {
	dir := t.TempDir()
	// A cluster whose MGS listens nowhere: nothing answers at port 1.
	os.Mkdir(filepath.Join(dir, "mgs"), 0o755)
	if err := target.Format(filepath.Join(dir, "mgs"), target.Identity{Fsname: "nacre", Kind: target.MGS, Listen: "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	root := newRoot()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs([]string{"status", "--json", "--dir", dir})
	err := root.Execute()
	// --mgs naming another MGS: which one was meant? (It went to --dir's
	// without a word.)
	// The same MGS spelt another way is no conflict.
	if _, err := runNacre(t, "status", "--mgs", "localhost:1", "--dir", dir); err == nil || strings.Contains(err.Error(), "two clusters") {
		t.Errorf("status with --mgs localhost:1 and --dir of the cluster at 127.0.0.1:1: %v", err)
	}
	for _, cmd := range []string{"status", "df"} {
		if _, err := runNacre(t, cmd, "--mgs", "127.0.0.2:7", "--dir", dir); err == nil || !strings.Contains(err.Error(), "--mgs 127.0.0.2:7 and --dir "+dir+" (whose MGS is 127.0.0.1:1) name two clusters") {
			t.Errorf("%s with --mgs and --dir of another cluster: %v", cmd, err)
		}
	}
	if err == nil {
		t.Fatalf("status with the MGS down succeeded:\n%s", out.String())
	}
	var doc struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil || doc.Error == "" {
		t.Fatalf("status --json: %v\n%s\nstderr: %s", err, out.String(), errOut.String())
	}
	if strings.Contains(doc.Error, "rpc error") || !strings.Contains(doc.Error, "127.0.0.1:1") {
		t.Fatalf("status --json error %q: want the reason in words, naming the MGS", doc.Error)
	}
}

// TestCommandsThatAskTheMGSTakeDir: df, stats and top take --dir, as
// status does and as their "no MGS address" message says; they refused
// it ("unknown flag: --dir").
func TestCommandsThatAskTheMGSTakeDir(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	notACluster := missing + " is not a local Nacre cluster (no such directory)"
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"status", "--dir", missing}, notACluster},
		{[]string{"df", "--dir", missing}, notACluster},
		{[]string{"stats", "--dir", missing}, notACluster},
		{[]string{"top", "--dir", missing}, notACluster},
		{[]string{"df", "--dir", missing, "/mnt/nacre"}, "give --dir " + missing + " or the mount point /mnt/nacre, not both"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[:1], " "), func(t *testing.T) {
			_, err := runNacre(t, c.args...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("nacre %s: %v, want an error containing %q", strings.Join(c.args, " "), err, c.want)
			}
		})
	}
}
