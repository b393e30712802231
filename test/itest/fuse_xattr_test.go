package itest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/cli"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// clusterStatus is `nacre status --json` of cl.
func clusterStatus(t *testing.T, cl *testcluster.Cluster) cli.ClusterStatus {
	t.Helper()
	out, err := cl.Run("status", "--json")
	if err != nil {
		t.Fatalf("nacre status --json: %v\n%s", err, out)
	}
	var st cli.ClusterStatus
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &st); err != nil {
		t.Fatalf("status JSON: %v\n%s", err, out)
	}
	return st
}

// mdtMetricsURL is the metrics page of the cluster's MDT.
func mdtMetricsURL(t *testing.T, cl *testcluster.Cluster) string {
	t.Helper()
	return targetOf(t, cl, "mdt").MetricsURL
}

// targetOf is the first target of a kind ("mdt", "ost") that `nacre
// status` shows.
func targetOf(t *testing.T, cl *testcluster.Cluster, kind string) cli.TargetStatus {
	t.Helper()
	for _, ts := range clusterStatus(t, cl).Targets {
		if ts.Kind == kind {
			return ts
		}
	}
	t.Fatalf("no %s in nacre status --json", kind)
	return cli.TargetStatus{}
}

func listxattr(t *testing.T, p string) []string {
	t.Helper()
	buf := make([]byte, 4096)
	n, err := syscall.Listxattr(p, buf)
	if err != nil {
		t.Fatalf("listxattr %s: %v", p, err)
	}
	var names []string
	for _, s := range strings.Split(string(buf[:n]), "\x00") {
		if s != "" {
			names = append(names, s)
		}
	}
	return names
}

func getxattr(p, name string) (string, error) {
	buf := make([]byte, 4096)
	n, err := syscall.Getxattr(p, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// TestFuseXattrsAnsweredFromAttributes: `ls -l` and listxattr over a
// directory of files without extended attributes reach the MDS for none
// of them (the attributes a lookup or readdirplus fetched say there are
// none), while files with attributes answer right; a change through the
// same mount shows at once, and through another mount within the
// attribute timeout.
func TestFuseXattrsAnsweredFromAttributes(t *testing.T) {
	needFUSE(t)
	if _, err := exec.LookPath("setfacl"); err != nil {
		t.Fatal("setfacl is not installed (Debian package acl; scripts/install-deps.sh installs it)")
	}
	cl := testcluster.Start(t, testcluster.Options{})
	m1 := mountFuse(t, cl)
	m2 := mountFuse(t, cl)
	must := mustOf(t)
	const files = 60
	must(os.Mkdir(m1.Path("d"), 0o755))
	for i := range files {
		must(os.WriteFile(m1.Path("d", fmt.Sprint("f", i)), []byte("x"), 0o644))
	}
	must(syscall.Setxattr(m1.Path("d", "f1"), "user.k", []byte("v1"), 0))
	must(syscall.Setxattr(m1.Path("d", "f2"), "security.s", []byte("v2"), 0))
	setfacl(t, "-m", "u:65534:r", m1.Path("d", "f3"))

	url := mdtMetricsURL(t, cl)
	xattrRPCs := func() float64 {
		f := scrapeFamilies(t, url)
		return f.sum("nacre_mds_ops_total", map[string]string{"op": "getxattr"}) +
			f.sum("nacre_mds_ops_total", map[string]string{"op": "listxattr"})
	}
	// The other mount has seen none of these files: ls -l looks each one
	// up (readdirplus) and asks each for security.selinux and its ACL.
	before := xattrRPCs()
	out, err := exec.Command("ls", "-l", m2.Path("d")).CombinedOutput()
	if err != nil {
		t.Fatalf("ls -l: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "-rw-r--r--+") {
		t.Errorf("ls -l does not mark the file with an ACL:\n%s", out)
	}
	lists := map[string][]string{}
	for i := range files {
		name := fmt.Sprint("f", i)
		lists[name] = listxattr(t, m2.Path("d", name))
	}
	// Files with attributes other than ACLs need their round trips:
	// f1 and f2, for security.selinux and the list.
	if n := xattrRPCs() - before; n > 6 {
		t.Errorf("ls -l and listxattr of %d files, 2 with attributes besides ACLs, sent %.0f getxattr/listxattr RPCs to the MDS, want at most 6", files, n)
	}
	want := map[string][]string{"f1": {"user.k"}, "f2": {"security.s"}, "f3": {"system.posix_acl_access"}}
	for name, got := range lists {
		if !slices.Equal(got, want[name]) {
			t.Errorf("listxattr %s: %q, want %q", name, got, want[name])
		}
	}
	if v, err := getxattr(m2.Path("d", "f1"), "user.k"); err != nil || v != "v1" {
		t.Errorf("getxattr user.k of f1: %q, %v", v, err)
	}
	if v, err := getxattr(m2.Path("d", "f2"), "security.s"); err != nil || v != "v2" {
		t.Errorf("getxattr security.s of f2: %q, %v", v, err)
	}
	if _, err := getxattr(m2.Path("d", "f4"), "user.k"); !errors.Is(err, syscall.ENODATA) {
		t.Errorf("getxattr user.k of f4 (none): %v, want ENODATA", err)
	}

	// A change through the same mount shows at once, though its
	// attributes said there was none a moment before.
	p := m2.Path("d", "f5")
	for round := range 20 {
		v := fmt.Sprint("r", round)
		if _, err := os.Stat(p); err != nil {
			t.Fatal(err)
		}
		must(syscall.Setxattr(p, "user.new", []byte(v), 0))
		if got, err := getxattr(p, "user.new"); err != nil || got != v {
			t.Fatalf("round %d: getxattr right after setxattr on the same mount: %q, %v", round, got, err)
		}
		if l := listxattr(t, p); !slices.Equal(l, []string{"user.new"}) {
			t.Fatalf("round %d: listxattr right after setxattr on the same mount: %q", round, l)
		}
		must(syscall.Removexattr(p, "user.new"))
		if _, err := getxattr(p, "user.new"); !errors.Is(err, syscall.ENODATA) {
			t.Fatalf("round %d: getxattr right after removexattr on the same mount: %v, want ENODATA", round, err)
		}
	}

	// A change through another mount shows within the attribute timeout
	// (one second).
	p2 := m2.Path("d", "f6")
	if _, err := getxattr(p2, "user.other"); !errors.Is(err, syscall.ENODATA) {
		t.Fatalf("getxattr user.other of f6: %v, want ENODATA", err)
	}
	must(syscall.Setxattr(m1.Path("d", "f6"), "user.other", []byte("o"), 0))
	wait.NoErr(t, 3*time.Second, "another mount's setxattr to show", func() error {
		if v, err := getxattr(p2, "user.other"); err != nil || v != "o" {
			return fmt.Errorf("%q, %v", v, err)
		}
		return nil
	})
}

// TestFuseXattrNamesStopWhereListxattrDoes: a new extended attribute whose
// name would make the file's list longer than listxattr(2) can return
// (64 KiB) fails with ENOSPC, as ext4 says when a file's xattrs are full;
// replacing a value still works, and listxattr keeps working. Before, the
// set succeeded and listxattr failed on the file for good (E2BIG), so
// getfattr -d, cp -a and rsync -X did too.
func TestFuseXattrNamesStopWhereListxattrDoes(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	m := mountFuse(t, cl)
	p := m.Path("many")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// 251-byte names, 252 bytes each in the list: 260 of them fit in
	// 64 KiB.
	name := func(i int) string { return fmt.Sprintf("user.%03d", i) + strings.Repeat("n", 243) }
	const fit = (64 << 10) / 252
	var set int
	for ; set < 300; set++ {
		err := syscall.Setxattr(p, name(set), []byte("v"), 0)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			t.Fatalf("setxattr %d: %v", set, err)
		}
	}
	if set != fit {
		t.Fatalf("%d names set before ENOSPC, want %d (64 KiB of names)", set, fit)
	}
	if err := syscall.Setxattr(p, name(0), []byte("replaced"), 0); err != nil {
		t.Fatalf("replace a value once the names are full: %v", err)
	}
	n, err := syscall.Listxattr(p, nil)
	if err != nil || n > 64<<10 {
		t.Fatalf("listxattr size: %d, %v", n, err)
	}
	buf := make([]byte, n)
	if n, err = syscall.Listxattr(p, buf); err != nil || strings.Count(string(buf[:n]), "\x00") != fit {
		t.Fatalf("listxattr: %d bytes, %v", n, err)
	}
}
