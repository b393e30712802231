package itest

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"nacre/test/wait"
)

// Lookup locks (internal/fusefs/lookuplock.go): a mount that creates in a
// directory takes its lookup lock and answers lookups of missing names
// itself; its own changes keep its list right, and another mount's
// changes take the lock back before they are acknowledged.

// mdtMetric reads one metric of the cluster's MDT, summed over the series
// whose labels include match.
func mdtMetricReader(t *testing.T, url string) func(name string, match map[string]string) float64 {
	return func(name string, match map[string]string) float64 {
		return scrapeFamilies(t, url).sum(name, match)
	}
}

func TestFuseLookupLockSavesTheLookupOfACreateAndStaysCoherent(t *testing.T) {
	cl, a, b := twoMounts(t)
	metric := mdtMetricReader(t, mdtMetricsURL(t, cl))
	misses := func() float64 {
		return metric("nacre_mds_op_errors_total", map[string]string{"op": "lookup", "errno": "2"})
	}
	locks := func() float64 { return metric("nacre_ldlm_lookup_locks", nil) }
	must := mustOf(t)
	exists := func(p, why string) {
		t.Helper()
		if _, err := os.Lstat(p); err != nil {
			t.Fatalf("%s: %v", why, err)
		}
	}
	missing := func(p, why string) {
		t.Helper()
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: lstat %s: %v, want ENOENT", why, p, err)
		}
	}
	create := func(p string) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		must(f.Close())
	}
	// lockUp has mount a create in d until it holds d's lookup lock (a
	// revoked lock is taken again after a second of quiet).
	n := 0
	lockUp := func() {
		t.Helper()
		wait.For(t, 10*time.Second, "mount a to take the lookup lock", func() bool {
			create(a.Path("d", fmt.Sprintf("warm%d", n)))
			n++
			return locks() >= 1
		})
	}

	must(os.Mkdir(a.Path("d"), 0o755))
	lockUp()

	// Creates through the holder ask the MDS no lookup.
	m0 := misses()
	for i := range 50 {
		create(a.Path("d", fmt.Sprintf("g%d", i)))
	}
	if m := misses() - m0; m > 5 {
		t.Fatalf("50 creates under the lookup lock had the MDS answer %v lookups \"missing\", want (almost) none", m)
	}

	// The holder's own changes keep its list right.
	must(os.Remove(a.Path("d", "g0")))
	missing(a.Path("d", "g0"), "a name this mount removed")
	create(a.Path("d", "g0"))
	must(os.Rename(a.Path("d", "g1"), a.Path("d", "h1")))
	missing(a.Path("d", "g1"), "the old name of a rename through this mount")
	exists(a.Path("d", "h1"), "the new name of a rename through this mount")
	must(os.Link(a.Path("d", "g2"), a.Path("d", "l2")))
	exists(a.Path("d", "l2"), "a hard link made through this mount")
	must(os.Mkdir(a.Path("d", "sub"), 0o755))
	must(os.Remove(a.Path("d", "sub")))
	missing(a.Path("d", "sub"), "a directory this mount removed")
	must(os.Symlink("g3", a.Path("d", "s3")))
	exists(a.Path("d", "s3"), "a symlink made through this mount")
	if err := syscall.Rename(a.Path("d", "nothere"), a.Path("d", "g4")); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("rename of a missing name: %v, want ENOENT", err)
	}
	if err := os.Mkdir(a.Path("d", "g4"), 0o755); !errors.Is(err, os.ErrExist) {
		t.Fatalf("mkdir over a file this mount made: %v, want EEXIST", err)
	}
	// A rename into d replaces nothing there (the new name is known
	// missing): the parents' attributes are kept and changed as a
	// removal and a create would, link counts included.
	must(os.Mkdir(a.Path("e"), 0o755))
	must(os.Mkdir(a.Path("e", "sub4"), 0o755))
	nlink := func(p string) uint64 { return uint64(statOf(t, p).Nlink) }
	dn, en := nlink(a.Path("d")), nlink(a.Path("e"))
	must(os.Rename(a.Path("e", "sub4"), a.Path("d", "sub4")))
	if got := nlink(a.Path("d")); got != dn+1 {
		t.Fatalf("target directory's link count after a directory moved in: %d, want %d", got, dn+1)
	}
	if got := nlink(a.Path("e")); got != en-1 {
		t.Fatalf("source directory's link count after a directory moved out: %d, want %d", got, en-1)
	}
	before := statOf(t, a.Path("d")).Mtim
	time.Sleep(10 * time.Millisecond)
	must(os.Rename(a.Path("d", "sub4"), a.Path("d", "sub5")))
	if after := statOf(t, a.Path("d")).Mtim; after == before {
		t.Fatal("a rename within the directory left its mtime")
	}
	if got := nlink(a.Path("d")); got != dn+1 {
		t.Fatalf("link count after a rename within the directory: %d, want %d", got, dn+1)
	}
	if locks() < 1 {
		t.Fatal("this mount's own changes took its lookup lock away")
	}

	// The kernel keeps names learnt under the lock past the mount's 1 s
	// entry timeout: removing them costs the MDS no lookup.
	time.Sleep(1200 * time.Millisecond)
	lookups := func() float64 { return metric("nacre_mds_ops_total", map[string]string{"op": "lookup"}) }
	l0 := lookups()
	for i := 10; i < 30; i++ {
		must(os.Remove(a.Path("d", fmt.Sprintf("g%d", i))))
	}
	if l := lookups() - l0; l > 3 {
		t.Fatalf("20 removes of names made under the lookup lock sent the MDS %v lookups, want (almost) none", l)
	}

	// Every kind of change through the other mount shows at once in the
	// holder: the lock is taken back before the change is acknowledged.
	must(os.Mkdir(b.Path("elsewhere"), 0o755))
	create(b.Path("elsewhere", "moving"))
	changes := []struct {
		what string
		do   func() error
		name string
	}{
		{"create", func() error { return os.WriteFile(b.Path("d", "bc"), nil, 0o644) }, "bc"},
		{"mkdir", func() error { return os.Mkdir(b.Path("d", "bm"), 0o755) }, "bm"},
		{"symlink", func() error { return os.Symlink("x", b.Path("d", "bs")) }, "bs"},
		{"mknod", func() error { return syscall.Mknod(b.Path("d", "bf"), syscall.S_IFIFO|0o644, 0) }, "bf"},
		{"link", func() error { return os.Link(b.Path("d", "g5"), b.Path("d", "bl")) }, "bl"},
		{"rename within", func() error { return os.Rename(b.Path("d", "g6"), b.Path("d", "br")) }, "br"},
		{"rename into", func() error { return os.Rename(b.Path("elsewhere", "moving"), b.Path("d", "bi")) }, "bi"},
	}
	r0 := metric("nacre_ldlm_lookup_revocations_total", nil)
	for _, c := range changes {
		lockUp()
		if err := c.do(); err != nil {
			t.Fatalf("%s through the other mount: %v", c.what, err)
		}
		exists(a.Path("d", c.name), c.what+" through the other mount, seen from the lock holder")
	}
	if r := metric("nacre_ldlm_lookup_revocations_total", nil) - r0; r < float64(len(changes)) {
		t.Fatalf("%v lookup locks revoked for %d changes by another mount, want one each", r, len(changes))
	}
	// Names the holder's kernel keeps under the lock go with the lock:
	// one the other mount renamed away, one it removed.
	missing(a.Path("d", "g6"), "a name another mount renamed away")
	lockUp()
	exists(a.Path("d", "g8"), "a name made under the lock")
	must(os.Remove(b.Path("d", "g8")))
	missing(a.Path("d", "g8"), "a name another mount removed")

	// The locks end with the mounts (b took one too, when its lookups of
	// the names it made missed).
	must(a.Umount())
	must(b.Umount())
	wait.For(t, 10*time.Second, "the unmounted clients' lookup locks to go", func() bool { return locks() == 0 })
}

// A replicated MDT grants no lookup lock (a new leader could not know
// its predecessor's): creates through a mount of one ask the MDS their
// lookups, and no replica counts a lock.
func TestFuseLookupLocksAreNotTakenFromAReplicatedMDT(t *testing.T) {
	cl := startReplicated(t)
	m := mountFuse(t, cl)
	var urls []string
	for _, ts := range clusterStatus(t, cl).Targets {
		if ts.Kind == "mdt" {
			urls = append(urls, ts.MetricsURL)
		}
	}
	sum := func(name string, match map[string]string) float64 {
		v := 0.0
		for _, u := range urls {
			v += scrapeFamilies(t, u).sum(name, match)
		}
		return v
	}
	misses := func() float64 {
		return sum("nacre_mds_op_errors_total", map[string]string{"op": "lookup", "errno": "2"})
	}
	must := mustOf(t)
	must(os.Mkdir(m.Path("d"), 0o755))
	m0 := misses()
	const files = 30
	for i := range files {
		must(os.WriteFile(m.Path("d", fmt.Sprintf("f%d", i)), nil, 0o644))
	}
	if got := misses() - m0; got < files {
		t.Fatalf("%d creates through a mount of a replicated MDT had the MDS answer %v lookups \"missing\", want one each", files, got)
	}
	if l := sum("nacre_ldlm_lookup_locks", nil); l != 0 {
		t.Fatalf("a replicated MDT granted %v lookup locks", l)
	}
}
