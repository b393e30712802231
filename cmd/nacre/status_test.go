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
