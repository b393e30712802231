package target

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nacre/internal/kv"
)

func TestFormatRefusesAnotherTarget(t *testing.T) {
	dir := t.TempDir()
	a := Identity{Fsname: "alpha", Kind: MDT, Index: 0, Listen: "127.0.0.1:0"}
	if err := Format(dir, a); err != nil {
		t.Fatal(err)
	}
	err := Format(dir, Identity{Fsname: "beta", Kind: OST, Index: 1})
	if err == nil || !strings.Contains(err.Error(), "MDT0000") || !strings.Contains(err.Error(), "OST0001") ||
		!strings.Contains(err.Error(), `"alpha"`) || !strings.Contains(err.Error(), `"beta"`) {
		t.Fatalf("want refusal naming both targets and file systems, got %v", err)
	}
	got, err := Load(dir)
	if err != nil || got.Fsname != "alpha" || got.Kind != MDT {
		t.Fatalf("identity changed: %+v %v", got, err)
	}
}

func TestLoadRefusesOtherFormatVersion(t *testing.T) {
	dir := t.TempDir()
	if err := Format(dir, Identity{Fsname: "x", Kind: OST}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, IdentityFile)
	data, _ := os.ReadFile(p)
	os.WriteFile(p, []byte(strings.Replace(string(data), `"format_version": 1`, `"format_version": 7`, 1)), 0o644)
	_, err := Load(dir)
	if err == nil || !strings.Contains(err.Error(), "format version 7") || !strings.Contains(err.Error(), "version 1") {
		t.Fatalf("want a message naming both versions, got %v", err)
	}
	if err := Format(dir, Identity{Fsname: "x", Kind: OST}); err == nil || !strings.Contains(err.Error(), "format version 7") {
		t.Fatalf("format over a newer target: %v", err)
	}
}

func TestFormatRefusesNonEmptyDirAndBadNames(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "data"), nil, 0o644)
	if err := Format(dir, Identity{Fsname: "x", Kind: MGS}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("non-empty dir: %v", err)
	}
	for _, bad := range []string{"", "muchtoolongname", "a/b", "a b", "..", "*", "-rf", "x\ny", "caf\xe9"} {
		if err := Format(t.TempDir(), Identity{Fsname: bad, Kind: MGS}); err == nil || !strings.Contains(err.Error(), "letters, digits") {
			t.Errorf("file system name %q: %v, want a refusal saying what a name may hold", bad, err)
		}
	}
	for _, good := range []string{"nacre", "scr_01", "a-b", "X"} {
		if err := Format(t.TempDir(), Identity{Fsname: good, Kind: MGS}); err != nil {
			t.Errorf("file system name %q refused: %v", good, err)
		}
	}
	if _, err := Load(t.TempDir()); err == nil || !strings.Contains(err.Error(), "nacre format") {
		t.Fatalf("unformatted dir: %v", err)
	}
}

func TestCheckStoreRefusesForeignStore(t *testing.T) {
	db, _ := kv.OpenMem()
	defer db.Close()
	a := Identity{Fsname: "a", Kind: MDT, UUID: "u1", FormatVersion: 1}
	if err := CheckStore(db, a); err != nil {
		t.Fatal(err)
	}
	if err := CheckStore(db, a); err != nil {
		t.Fatalf("same target refused: %v", err)
	}
	b := a
	b.UUID = "u2"
	if err := CheckStore(db, b); err == nil || !strings.Contains(err.Error(), "another target") || strings.Contains(err.Error(), "reformat ") {
		t.Fatalf("foreign store: %v", err)
	}
	// A store of another format version (a newer release wrote it) says
	// so, rather than that it is another target's.
	c := a
	c.FormatVersion = 2
	if err := CheckStore(db, c); err == nil || !strings.Contains(err.Error(), "has format version 1") || !strings.Contains(err.Error(), "reads format 2") {
		t.Fatalf("a store of another format version: %v", err)
	}
}

// A target has run once its identity says so, or (identity files written
// before that was recorded) once it left a Raft log or OST objects; a
// store without the target's record is then refused, not taken as new.
func TestATargetThatHasRunNeedsItsStore(t *testing.T) {
	dir := t.TempDir()
	id := Identity{Fsname: "a", Kind: OST, UUID: "u1", FormatVersion: 1}
	if HasRun(dir, id) {
		t.Fatal("a new target counts as having run")
	}
	if err := os.MkdirAll(filepath.Join(dir, "objects", "100000000"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !HasRun(dir, id) {
		t.Fatal("an OST with objects but no start recorded does not count as having run")
	}
	mdt := t.TempDir()
	if err := os.MkdirAll(filepath.Join(RaftLogDir(mdt), "0000000000000001.seg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !HasRun(mdt, Identity{Kind: MDT}) {
		t.Fatal("an MDT with a Raft log but no start recorded does not count as having run")
	}
	db, _ := kv.OpenMem()
	defer db.Close()
	id.Started = time.Now()
	if err := CheckStore(db, id); !errors.Is(err, ErrStoreLost) {
		t.Fatalf("an empty store of a target that has run: %v, want ErrStoreLost", err)
	}
	if _, err := db.Get(identityKey); !errors.Is(err, kv.ErrNotFound) {
		t.Fatalf("the refused store was written to: %v", err)
	}
}

// TestDataDirectoriesAreTheOwnersAlone: format makes the data
// directories 0700, and MakePrivate (every start) fixes those an older
// release made 0755, without touching what is in them.
func TestDataDirectoriesAreTheOwnersAlone(t *testing.T) {
	mode := func(p string) os.FileMode {
		t.Helper()
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Mode().Perm()
	}
	dir := filepath.Join(t.TempDir(), "ost")
	if err := Format(dir, Identity{Fsname: "x", Kind: OST, Index: 1}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{StoreDir(dir), ObjectsDir(dir)} {
		if m := mode(d); m != 0o700 {
			t.Errorf("format made %s %#o, want 0700", d, m)
		}
	}
	// As an older release left them.
	bucket := filepath.Join(ObjectsDir(dir), "100000000", "0")
	if err := os.MkdirAll(bucket, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{StoreDir(dir), ObjectsDir(dir), RaftLogDir(dir)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := MakePrivate(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{StoreDir(dir), ObjectsDir(dir), RaftLogDir(dir)} {
		if m := mode(d); m != 0o700 {
			t.Errorf("MakePrivate left %s %#o, want 0700", d, m)
		}
	}
	if m := mode(bucket); m != 0o755 {
		t.Errorf("MakePrivate changed the bucket %s to %#o: it walks below the data directories", bucket, m)
	}
	if m := mode(dir); m == 0o700 {
		t.Errorf("the target directory itself became 0700: its identity and pid file are for status")
	}
}
