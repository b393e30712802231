package itest

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"nacre/internal/cli"
	"nacre/internal/localcluster"
	"nacre/test/testcluster"
)

// TestUpRefusesAMissingTargetDirectory: with the directory of an OST
// moved away (not empty: absent), `nacre up` started the cluster without
// that OST, said "1 MDT, 1 OSTs" and nothing else, and new files got
// fewer stripes. Now the targets the MGS has registered are compared with
// the target directories: the cluster is not declared ready, the error
// names the OST, its directory and the ways out, and the targets that
// were running before are left running (what this run started is
// stopped). --allow-missing starts without it, with a warning.
func TestUpRefusesAMissingTargetDirectory(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	out, err := upDetached(t, bin, dir, "--osts", "2")
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	if !strings.Contains(out, "1 MDT, 2 OSTs") {
		t.Errorf("up does not count 2 OSTs:\n%s", out)
	}
	ost1 := filepath.Join(dir, "ost1")
	killTarget(t, ost1, syscall.SIGTERM)
	away := filepath.Join(t.TempDir(), "ost1")
	if err := os.Rename(ost1, away); err != nil {
		t.Fatal(err)
	}
	before := servingPids(t, dir)

	// The rest of the cluster runs: up refuses and stops nothing.
	out, err = upDetached(t, bin, dir)
	for _, want := range []string{"OST0001", ost1 + " is missing", "restore or mount " + ost1, "--allow-missing"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("up with ost1 missing: want an error saying %q, got %v\n%s", want, err, out)
		}
	}
	if strings.Contains(out, "Nacre is up") {
		t.Errorf("up with ost1 missing declared the cluster ready:\n%s", out)
	}
	stillServing(t, dir, before, "after up refused the missing ost1")

	// --allow-missing starts without it, and says so.
	out, err = upDetached(t, bin, dir, "--allow-missing")
	if err != nil {
		t.Fatalf("up --allow-missing: %v\n%s", err, out)
	}
	if !strings.Contains(out, "warning: OST0001") || !strings.Contains(out, "1 MDT, 1 OST,") {
		t.Errorf("up --allow-missing: want a warning naming OST0001 and \"1 OST\", got:\n%s", out)
	}
	stillServing(t, dir, before, "after up --allow-missing")
	// Status says at once that the missing OST does not run (the MGS
	// would show it up until it misses its heartbeats).
	sout, err := exec.Command(bin, "status", "--dir", dir, "--json").Output()
	if err != nil {
		t.Fatalf("status --json: %v\n%s", err, sout)
	}
	var st cli.ClusterStatus
	if err := json.Unmarshal(sout, &st); err != nil {
		t.Fatal(err)
	}
	for _, ts := range st.Targets {
		if ts.Kind == "ost" && ts.Index == 1 && (ts.State != "down" || ts.PidAlive == nil || *ts.PidAlive) {
			t.Errorf("status right after up --allow-missing shows the missing OST0001 as %s (pid alive: %v)", ts.State, ts.PidAlive)
		}
	}

	// From a stopped cluster: refused, and nothing is left running.
	if out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	out, err = upDetached(t, bin, dir)
	if err == nil || !strings.Contains(out, ost1+" is missing") {
		t.Errorf("up of the stopped cluster with ost1 missing: %v\n%s", err, out)
	}
	if n := localcluster.Running(dir); n != 0 {
		t.Errorf("%d target processes run after up refused to start without ost1", n)
	}

	// Back in place, the OST is started again.
	if err := os.Rename(away, ost1); err != nil {
		t.Fatal(err)
	}
	out, err = upDetached(t, bin, dir)
	if err != nil || !strings.Contains(out, "1 MDT, 2 OSTs") {
		t.Fatalf("up with ost1 back: %v\n%s", err, out)
	}
}

// TestUpAllowMissingStartsWithoutAnOSTThatFailsToStart: an OST whose
// store is damaged stopped every other target of `nacre up`, and
// --allow-missing (which covered only a missing directory) did not help.
// Without the flag up still refuses, naming the OST and its log's words;
// with it the rest of the file system starts, with a warning, and serves
// the files without stripes on that OST.
func TestUpAllowMissingStartsWithoutAnOSTThatFailsToStart(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	if out, err := upDetached(t, bin, dir, "--osts", "2"); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	mgs := mgsOf(t, dir)
	if out, err := runWithMGS(bin, mgs, "put", "-i", "1", "-c", "1", "/etc/hostname", "/on-ost1"); err != nil {
		t.Fatalf("put: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput(); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	manifests, _ := filepath.Glob(filepath.Join(dir, "ost0", "store", "MANIFEST-*"))
	if len(manifests) == 0 {
		t.Fatal("ost0's store has no MANIFEST to damage")
	}
	for _, m := range manifests {
		if err := os.WriteFile(m, []byte(strings.Repeat("garbage ", 64)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := upDetached(t, bin, dir)
	if err == nil || !strings.Contains(out, "OST0000") || !strings.Contains(out, "exited while starting") {
		t.Fatalf("up with ost0's store damaged: want a failure naming OST0000, got %v\n%s", err, out)
	}
	if n := localcluster.Running(dir); n != 0 {
		t.Errorf("%d target processes run after up failed", n)
	}
	out, err = upDetached(t, bin, dir, "--allow-missing")
	if err != nil || !strings.Contains(out, "warning: OST0000") || !strings.Contains(out, "starting without OST0000") {
		t.Fatalf("up --allow-missing with ost0's store damaged: want a warning and a start, got %v\n%s", err, out)
	}
	host, _ := os.ReadFile("/etc/hostname")
	if got, err := runWithMGS(bin, mgs, "cat", "/on-ost1"); err != nil || got != string(host) {
		t.Fatalf("a file on ost1 with ost0 left out: %q %v", got, err)
	}
}
