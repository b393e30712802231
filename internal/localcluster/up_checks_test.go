package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/reserve"
	"nacre/internal/target"
)

// TestCheckReplicasWantsOneOrAnOddNumber: 2 replicas survive no failure
// (a majority of 2 is 2), so only 1 or an odd number from 3 is accepted,
// and the refusal says why.
func TestCheckReplicasWantsOneOrAnOddNumber(t *testing.T) {
	for _, n := range []int{1, 3, 5, 7} {
		if err := CheckReplicas(n); err != nil {
			t.Errorf("CheckReplicas(%d): %v", n, err)
		}
	}
	for _, n := range []int{-1, 0, 2, 4, 6} {
		err := CheckReplicas(n)
		if err == nil || !strings.Contains(err.Error(), "use 1, or an odd number from 3") {
			t.Errorf("CheckReplicas(%d) = %v, want a refusal naming what to use", n, err)
		}
	}
	if err := CheckReplicas(2); err == nil || !strings.Contains(err.Error(), "survive no failure") {
		t.Errorf("CheckReplicas(2) = %v, want it to say why 2 is no good", err)
	}
}

// TestUpRefusesBadOptionsBeforeFormatting: a bad --osts or --replicas is
// refused before the cluster directory is made, and a new cluster gets at
// least one OST.
func TestUpRefusesBadOptionsBeforeFormatting(t *testing.T) {
	for _, o := range []Options{{OSTs: -1}, {Replicas: 2}, {Replicas: -3}, {Replicas: 4}} {
		o.Dir = filepath.Join(t.TempDir(), "c")
		if _, err := Up(t.Context(), o); err == nil {
			t.Errorf("Up(%+v) succeeded", o)
		}
		if _, err := os.Stat(o.Dir); err == nil {
			t.Errorf("Up(%+v) made %s before refusing", o, o.Dir)
		}
	}
}

// TestUpRefusesAFileAsItsDirectory: --dir naming a regular file is
// refused by name, not with mkdir's "not a directory".
func TestUpRefusesAFileAsItsDirectory(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(f, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Up(t.Context(), Options{Dir: f})
	if err == nil || !strings.Contains(err.Error(), "--dir "+f+" is a file, not a directory") {
		t.Errorf("up --dir FILE: %v", err)
	}
}

// TestCheckMountDirRefusesWhatCannotBeAMountPoint: `nacre up --mount` on
// a regular file (or below one) is refused before anything starts.
func TestCheckMountDirRefusesWhatCannotBeAMountPoint(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkMountDir(file); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a regular file: %v", err)
	}
	if err := checkMountDir(filepath.Join(file, "sub", "m")); err == nil || !strings.Contains(err.Error(), file+" is not a directory") {
		t.Errorf("below a regular file: %v", err)
	}
	for _, ok := range []string{dir, filepath.Join(dir, "new"), filepath.Join(dir, "new", "deeper")} {
		if err := checkMountDir(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	if _, err := mountPointState(t.TempDir(), file, ""); err == nil {
		t.Errorf("mountPointState accepted a regular file")
	}
}

// TestCheckRegisteredNamesAMissingTargetDirectory: an OST the MGS has
// registered from a directory of this cluster that is gone is refused,
// naming it, the directory and both ways out; --allow-missing lets the
// cluster start with a warning; a missing MDT is refused in every case;
// targets of other directories or hosts are none of this cluster's
// business.
func TestCheckRegisteredNamesAMissingTargetDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"mgs", "mdt0", "ost0"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	host, _ := os.Hostname()
	ost := func(i uint32, d, h string) *pb.TargetInfo {
		return &pb.TargetInfo{Kind: pb.TargetKind_TARGET_OST, Index: i, Dir: d, Host: h}
	}
	present := []*pb.TargetInfo{
		{Kind: pb.TargetKind_TARGET_MGS, Dir: filepath.Join(dir, "mgs"), Host: host},
		{Kind: pb.TargetKind_TARGET_MDT, Dir: filepath.Join(dir, "mdt0"), Host: host},
		ost(0, filepath.Join(dir, "ost0"), host),
		ost(5, filepath.Join(t.TempDir(), "ost5"), host), // formatted elsewhere by hand
		ost(6, filepath.Join(dir, "ost6"), "another-host"),
		ost(7, "", host),
	}
	var out bytes.Buffer
	warned := false
	if err := checkRegistered(Options{Dir: dir, Out: &out}, present, &warned); err != nil {
		t.Fatalf("every target present: %v", err)
	}

	missing := append(present, ost(1, filepath.Join(dir, "ost1"), host))
	err := checkRegistered(Options{Dir: dir, Out: &out}, missing, &warned)
	want := []string{"OST0001", filepath.Join(dir, "ost1") + " is missing", "restore or mount " + filepath.Join(dir, "ost1"), "--allow-missing"}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("missing ost1: %v, want it to say %q", err, w)
		}
	}

	warned = false
	out.Reset()
	o := Options{Dir: dir, Out: &out, AllowMissing: true}
	if err := checkRegistered(o, missing, &warned); err != nil {
		t.Errorf("missing ost1 with --allow-missing: %v", err)
	}
	if err := checkRegistered(o, missing, &warned); err != nil {
		t.Errorf("missing ost1 with --allow-missing, again: %v", err)
	}
	if got := out.String(); strings.Count(got, "warning: OST0001") != 1 {
		t.Errorf("with --allow-missing, want one warning naming OST0001, got %q", got)
	}

	if err := os.Remove(filepath.Join(dir, "mdt0")); err != nil {
		t.Fatal(err)
	}
	if err := checkRegistered(o, present, &warned); err == nil || !strings.Contains(err.Error(), "MDT0000") {
		t.Errorf("missing mdt0 with --allow-missing: %v, want a refusal naming MDT0000", err)
	}
}

// TestNoteIgnoredSaysWhatAnExistingClusterKeeps: --fsname, --replicas
// and a smaller --mdts or --osts do not change an existing cluster; each
// one given gets a note, and a larger --mdts or --osts (which adds
// targets) none.
func TestNoteIgnoredSaysWhatAnExistingClusterKeeps(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []struct {
		name string
		kind target.Kind
		idx  uint32
	}{{"mgs", target.MGS, 0}, {"mdt0", target.MDT, 0}, {"mdt1", target.MDT, 1}, {"ost0", target.OST, 0}, {"ost1", target.OST, 1}} {
		if err := target.Format(filepath.Join(dir, d.name), target.Identity{Fsname: "fs1", Kind: d.kind, Index: d.idx, Listen: "127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	noteIgnored(Options{Dir: dir, Out: &out, Fsname: "other", Replicas: 3, OSTs: 1, MDTs: 1})
	for _, w := range []string{"--fsname other is ignored", `file system "fs1"`, "--replicas 3 is ignored", "--osts 1 is ignored", "has 2 OSTs",
		"--mdts 1 is ignored", "has 2 MDTs already", "a cluster never loses MDTs"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("notes lack %q:\n%s", w, out.String())
		}
	}
	out.Reset()
	noteIgnored(Options{Dir: dir, Out: &out, Fsname: "fs1", Replicas: 1, OSTs: 3, MDTs: 3})
	noteIgnored(Options{Dir: dir, Out: &out, MDTs: 2})
	noteIgnored(Options{Dir: dir, Out: &out})
	if out.Len() != 0 {
		t.Errorf("notes for values the cluster has, or a larger --osts:\n%s", out.String())
	}
}

// TestUpWarnsOfADeviceTooSmallForItsTargets: a cluster whose MDT shares a
// small device starts, and then refuses every new name; up says so, naming
// the target, its device's figures and the fix, and says nothing of the
// targets with room or of the MGS (which keeps no reserve).
func TestUpWarnsOfADeviceTooSmallForItsTargets(t *testing.T) {
	dir := t.TempDir()
	const mib = 1 << 20
	devices := map[string]reserve.Usage{}
	var ts []Proc
	for _, d := range []struct {
		name  string
		kind  target.Kind
		avail uint64
	}{{"mgs", target.MGS, 1 * mib}, {"mdt0", target.MDT, 120 * mib}, {"ost0", target.OST, 120 * mib}, {"ost1", target.OST, 60 * mib}} {
		p := filepath.Join(dir, d.name)
		if err := target.Format(p, target.Identity{Fsname: "fs1", Kind: d.kind, Listen: "127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
		// Devices of 6.25 GiB: full-size memtables (a smaller device gets
		// smaller ones: serve.StoreOptions).
		devices[p] = reserve.Usage{Total: 6400 * mib, Avail: d.avail}
		ts = append(ts, Proc{Name: strings.ToUpper(d.name[:3]) + "000" + d.name[3:], Dir: p})
	}
	ts[0].Name = "MGS"
	statfs := func(p string) (reserve.Usage, error) { return devices[p], nil }
	got := shortOfReserve(ts, statfs)
	// The MDT keeps 144 MiB (64 MiB memtables), an OST 80 MiB.
	if len(got) != 2 || !strings.HasPrefix(got[0], "MDT0000's device") || !strings.HasPrefix(got[1], "OST0001's device") {
		t.Fatalf("warnings %q, want one for MDT0000 (120 MiB free, keeps 144) and one for OST0001 (60 free, keeps 80)", got)
	}
	for _, want := range []string{ts[1].Dir, "120MB free of ", "144MB", "larger device"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("warning %q does not say %q", got[0], want)
		}
	}
}

// TestSyncMGSNodesRecordsTheMGSReplicasInTheTargets: after the MGS's
// replicas changed (add, remove, replace with --dir), every other target
// of the local cluster names the replicas there now; before, once the
// last replica they knew was gone, `nacre up` started targets that could
// reach no MGS.
func TestSyncMGSNodesRecordsTheMGSReplicasInTheTargets(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []struct {
		name string
		id   target.Identity
	}{
		{"mgs-r4", target.Identity{Fsname: "fs1", Kind: target.MGS, ReplicaID: 4, Listen: "127.0.0.1:4004", Peers: map[uint64]string{4: "127.0.0.1:4004", 5: "127.0.0.1:4005"}}},
		{"mgs-r5", target.Identity{Fsname: "fs1", Kind: target.MGS, ReplicaID: 5, Listen: "127.0.0.1:4005", Peers: map[uint64]string{4: "127.0.0.1:4004", 5: "127.0.0.1:4005"}}},
		{"mdt0", target.Identity{Fsname: "fs1", Kind: target.MDT, Listen: "127.0.0.1:1", MGSNode: "127.0.0.1:4001,127.0.0.1:4002"}},
		{"ost0", target.Identity{Fsname: "fs1", Kind: target.OST, Listen: "127.0.0.1:2", MGSNode: "127.0.0.1:4001,127.0.0.1:4002"}},
	} {
		if err := target.Format(filepath.Join(dir, d.name), d.id); err != nil {
			t.Fatal(err)
		}
	}
	want, err := MGSAddr(dir)
	if err != nil || !strings.Contains(want, "127.0.0.1:4004") || !strings.Contains(want, "127.0.0.1:4005") {
		t.Fatalf("MGSAddr = %q, %v", want, err)
	}
	n, err := SyncMGSNodes(dir)
	if err != nil || n != 2 {
		t.Fatalf("SyncMGSNodes = %d, %v; want the MDT and the OST changed", n, err)
	}
	for _, d := range []string{"mdt0", "ost0"} {
		id, err := target.Load(filepath.Join(dir, d))
		if err != nil || id.MGSNode != want {
			t.Errorf("%s names the MGS %q (%v), want %q", d, id.MGSNode, err, want)
		}
	}
	if n, err := SyncMGSNodes(dir); err != nil || n != 0 {
		t.Errorf("a second sync changed %d targets (%v)", n, err)
	}
}

// TestNoteIgnoredCountsEachGroupsReplicas: a cluster whose MGS and MDT
// have different numbers of replica directories (after replica add or
// remove) is described as it is; up said "4 replicas each" from the MDT's
// count alone.
func TestNoteIgnoredCountsEachGroupsReplicas(t *testing.T) {
	dir := t.TempDir()
	names := []string{"mgs-r1", "mgs-r2", "mgs-r3", "mdt0-r1", "mdt0-r2", "mdt0-r3", "mdt0-r4", "ost0"}
	for i, n := range names {
		kind := target.MDT
		switch {
		case strings.HasPrefix(n, "mgs"):
			kind = target.MGS
		case strings.HasPrefix(n, "ost"):
			kind = target.OST
		}
		if err := target.Format(filepath.Join(dir, n), target.Identity{Fsname: "fs1", Kind: kind, ReplicaID: uint64(i + 1), Listen: "127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	noteIgnored(Options{Dir: dir, Out: &out, Replicas: 3})
	if !strings.Contains(out.String(), "3 replica directories of the MGS and 4 of the MDT ") {
		t.Errorf("note: %q", out.String())
	}
	// A second MDT, of 3 replicas: each MDT is counted on its own.
	for r := 1; r <= 3; r++ {
		if err := target.Format(filepath.Join(dir, fmt.Sprintf("mdt1-r%d", r)), target.Identity{Fsname: "fs1", Kind: target.MDT, Index: 1, ReplicaID: uint64(r), Listen: "127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	noteIgnored(Options{Dir: dir, Out: &out, Replicas: 3})
	if !strings.Contains(out.String(), "3 replica directories of the MGS and 4 of MDT0, 3 of MDT1") {
		t.Errorf("note: %q", out.String())
	}
}

// TestUpRefusesATargetOfAnotherCluster: a target directory copied from
// another cluster (another file system name, or another MGS address) is
// refused by name before anything starts; replicas that share one MGS
// address with the cluster's list are this cluster's.
func TestUpRefusesATargetOfAnotherCluster(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, id target.Identity) string {
		d := filepath.Join(dir, name)
		if err := target.Format(d, id); err != nil {
			t.Fatal(err)
		}
		return d
	}
	mgs := mk("mgs", target.Identity{Fsname: "nacre", Kind: target.MGS, Listen: "127.0.0.1:9000"})
	mdt := mk("mdt0", target.Identity{Fsname: "nacre", Kind: target.MDT, MGSNode: "127.0.0.1:9000"})
	ost := mk("ost0", target.Identity{Fsname: "nacre", Kind: target.OST, MGSNode: "127.0.0.1:9100,127.0.0.1:9000"})
	if err := checkBelongs(dir, []string{mgs, mdt, ost}, "127.0.0.1:9000"); err != nil {
		t.Fatalf("the cluster's own targets: %v", err)
	}
	other := mk("ost1", target.Identity{Fsname: "nacre", Kind: target.OST, Index: 1, MGSNode: "127.0.0.1:9555"})
	err := checkBelongs(dir, []string{mgs, mdt, ost, other}, "127.0.0.1:9000")
	if err == nil || !strings.Contains(err.Error(), "ost1 (OST0001) looks for its MGS at 127.0.0.1:9555") || !strings.Contains(err.Error(), "another cluster") {
		t.Errorf("an OST of another cluster: %v", err)
	}
	named := mk("ost2", target.Identity{Fsname: "beta", Kind: target.OST, Index: 2, MGSNode: "127.0.0.1:9000"})
	err = checkBelongs(dir, []string{mgs, mdt, named}, "127.0.0.1:9000")
	if err == nil || !strings.Contains(err.Error(), `belongs to file system "beta", and this cluster is "nacre"`) {
		t.Errorf("an OST of another file system: %v", err)
	}
}

// An up of a partly running cluster says what it started and what was
// running (after a crash it printed the banner of a fresh start).
func TestRestartedSaysWhatUpStarted(t *testing.T) {
	for _, c := range []struct {
		ts   []Proc
		want string
	}{
		{[]Proc{{Name: "MGS", Pid: 1, Started: true}, {Name: "MDT0000", Pid: 2, Started: true}}, ""},
		{[]Proc{{Name: "MGS", Pid: 1}, {Name: "MDT0000", Pid: 2, Started: true}, {Name: "OST0000", Pid: 3}},
			"started MDT0000, which did not run; already running: MGS (pid 1), OST0000 (pid 3)"},
		{[]Proc{{Name: "MGS", Pid: 1}, {Name: "OST0000", Pid: 3}}, "every target was running already: MGS (pid 1), OST0000 (pid 3)"},
	} {
		if got := (&Cluster{Targets: c.ts}).restarted(); got != c.want {
			t.Errorf("restarted() of %+v = %q, want %q", c.ts, got, c.want)
		}
	}
}

// TestDirsAreExactlyTheTargetNames: a copy of a target's directory beside
// it (ost0.bak, mdt0-old) is not started as a target: it would serve the
// copy's old objects under the target's name, or fight it for its port.
func TestDirsAreExactlyTheTargetNames(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"mgs", "mdt0", "ost0", "ost1", "ost0.bak", "ost1-copy", "mdt0-old", "mgs.orig", "mdt0-r2", "removed-mdt0-r1-20261125",
		"mdt10", "mdt2-r1", "mdt1.bak", "mdtx"} {
		if err := os.MkdirAll(filepath.Join(dir, n, "store"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Dirs(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range got {
		names = append(names, filepath.Base(d))
	}
	if want := "mgs mdt0 mdt0-r2 mdt2-r1 mdt10 ost0 ost1"; strings.Join(names, " ") != want {
		t.Fatalf("Dirs: %q, want %q", strings.Join(names, " "), want)
	}
}

// A directory that is not empty and holds no cluster is refused, and
// left as it was: before, the refusal left .nacre-up.lock in it. A lock
// file that was there already is not removed.
func TestUpRefusesANonClusterDirectoryWithoutLeavingItsLock(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Up(t.Context(), Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "holds no Nacre cluster") {
		t.Fatalf("up in a directory of other files: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "notes.txt" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the refused up left %s holding %v, want only notes.txt", dir, names)
	}
	if err := os.WriteFile(filepath.Join(dir, upLockFile), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Up(t.Context(), Options{Dir: dir}); err == nil {
		t.Fatal("up in a directory of other files succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, upLockFile)); err != nil {
		t.Errorf("a refused up removed a lock file it did not create: %v", err)
	}
}
