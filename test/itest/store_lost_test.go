package itest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nacre/internal/target"
	"nacre/test/testcluster"
)

// mgsOf is the MGS address of the local cluster in dir.
func mgsOf(t *testing.T, dir string) string {
	t.Helper()
	id, err := target.Load(filepath.Join(dir, "mgs"))
	if err != nil {
		t.Fatal(err)
	}
	return id.Listen
}

// runWithMGS runs the nacre binary bin with NACRE_MGS=mgs and returns its
// combined output.
func runWithMGS(bin, mgs string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "NACRE_MGS="+mgs)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestATargetThatLostItsStoreRefusesToStart: a target that has run and
// finds its store missing or emptied (a device not mounted, files removed
// by hand) used to start as a new, empty target: the namespace vanished,
// the MDT's Raft log was started afresh, and the files' OST objects were
// left behind. Now it refuses, names the store and the ways out, and
// leaves the log alone; with the store back the cluster starts and the
// file reads back. A lost identity file is reported with the store's
// target, and `nacre format` with that target's parameters adopts the
// store instead of refusing the directory.
func TestATargetThatLostItsStoreRefusesToStart(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	if out, err := upDetached(t, bin, dir); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	mgs := mgsOf(t, dir)
	data := bytes.Repeat([]byte("kept through a lost store\n"), 500)
	src := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) { return runWithMGS(bin, mgs, args...) }
	if out, err := run("put", src, "/f"); err != nil {
		t.Fatalf("put: %v\n%s", err, out)
	}
	down := func() {
		t.Helper()
		if out, err := exec.Command(bin, "down", "--dir", dir).CombinedOutput(); err != nil {
			t.Fatalf("down: %v\n%s", err, out)
		}
	}
	down()
	logSegments := func() []string {
		names, _ := filepath.Glob(filepath.Join(target.RaftLogDir(filepath.Join(dir, "mdt0")), "*"))
		return names
	}
	segs := logSegments()
	if len(segs) == 0 {
		t.Fatal("the MDT has no Raft log files to keep")
	}

	for _, tgt := range []string{"mdt0", "ost0"} {
		store := target.StoreDir(filepath.Join(dir, tgt))
		away := filepath.Join(t.TempDir(), "store")
		if err := os.Rename(store, away); err != nil {
			t.Fatal(err)
		}
		// Removed outright, and (for the MDT) present but empty.
		for _, how := range []string{"missing", "empty"} {
			if how == "empty" {
				if err := os.Mkdir(store, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			out, err := upDetached(t, bin, dir)
			for _, want := range []string{"there is no store in " + store, "has run since", "mount the device that holds it or restore it"} {
				if err == nil || !strings.Contains(out, want) {
					t.Errorf("up with the store of %s %s: want an error saying %q, got %v\n%s", tgt, how, want, err, out)
				}
			}
			if strings.Contains(out, "Nacre is up") {
				t.Fatalf("up with the store of %s %s declared the cluster ready:\n%s", tgt, how, out)
			}
			os.RemoveAll(store)
		}
		if got := logSegments(); tgt == "mdt0" && strings.Join(got, ",") != strings.Join(segs, ",") {
			t.Errorf("the MDT's Raft log changed while its store was away: %v, was %v", got, segs)
		}
		if err := os.Rename(away, store); err != nil {
			t.Fatal(err)
		}
	}

	// The identity file of ost0 is lost; its store is not.
	idFile := filepath.Join(dir, "ost0", target.IdentityFile)
	if err := os.Remove(idFile); err != nil {
		t.Fatal(err)
	}
	out, err := upDetached(t, bin, dir)
	for _, want := range []string{target.IdentityFile + " is missing", "belongs to OST index 0 of file system \"nacre\"", "nacre format"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("up without ost0's identity file: want an error saying %q, got %v\n%s", want, err, out)
		}
	}
	down()
	format := func(index string) (string, error) {
		out, err := exec.Command(bin, "format", "--type", "ost", "--index", index, "--fsname", "nacre", "--mgsnode", mgs,
			"--dir", filepath.Join(dir, "ost0")).CombinedOutput()
		return string(out), err
	}
	if out, err := format("1"); err == nil || !strings.Contains(out, "belongs to another target") {
		t.Errorf("format of ost0's directory as OST0001: want a refusal naming the store's target, got %v\n%s", err, out)
	}
	if out, err := format("0"); err != nil {
		t.Fatalf("format adopting ost0's store: %v\n%s", err, out)
	}
	if out, err := upDetached(t, bin, dir); err != nil {
		t.Fatalf("up with every store back: %v\n%s", err, out)
	}
	got, err := run("cat", "/f")
	if err != nil || got != string(data) {
		t.Fatalf("the file after the stores came back: %d bytes (%v), want its %d", len(got), err, len(data))
	}
}

// TestAnMDTWhoseRaftLogLostAppliedEntriesSaysHowToRecover: the MDT's log
// lost entries its store had applied (a segment damaged past its first
// records). The start is refused with what happened and the remedy -
// back the MDT up and restore it, which starts a new log from the store -
// instead of "store damaged"; following it brings the namespace back.
func TestAnMDTWhoseRaftLogLostAppliedEntriesSaysHowToRecover(t *testing.T) {
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	if out, err := upDetached(t, bin, dir); err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	mgs := mgsOf(t, dir)
	run := func(args ...string) (string, error) { return runWithMGS(bin, mgs, args...) }
	for _, d := range []string{"/a", "/b", "/c"} {
		if out, err := run("mkdir", d); err != nil {
			t.Fatalf("mkdir: %v\n%s", err, out)
		}
	}
	if out, err := run("down", "--dir", dir); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	mdt := filepath.Join(dir, "mdt0")
	segs, _ := filepath.Glob(filepath.Join(target.RaftLogDir(mdt), "*.seg"))
	if len(segs) != 1 {
		t.Fatalf("want one log segment, found %v", segs)
	}
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	used := len(bytes.TrimRight(b, "\x00"))
	clear(b[used/2 : used])
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := upDetached(t, bin, dir)
	backup := "nacre mdt backup --dir " + mdt + " --out F"
	for _, want := range []string{"the log lost entries it had", backup, "nacre mdt restore --dir " + mdt + " --from F"} {
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("up with the MDT's log cut short: want %q, got %v\n%s", want, err, out)
		}
	}
	f := filepath.Join(t.TempDir(), "mdt.bak")
	if out, err := run("mdt", "backup", "--dir", mdt, "--out", f); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if out, err := run("mdt", "restore", "--dir", mdt, "--from", f); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
	if out, err := upDetached(t, bin, dir); err != nil {
		t.Fatalf("up after the restore: %v\n%s", err, out)
	}
	if out, err := run("ls", "/"); err != nil || strings.Join(strings.Fields(out), " ") != "a b c" {
		t.Fatalf("after the restore / lists %q (%v), want a b c", out, err)
	}
}
