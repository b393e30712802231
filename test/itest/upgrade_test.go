package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/cli"
	"nacre/internal/localcluster"
	"nacre/internal/version"
	"nacre/test/testcluster"
)

// previousRelease is the commit the upgrade test builds as the release
// before this one: the last of protocol 2 (the next commit, d34853d, made
// failures cross every transport as data and raised the protocol to 3).
// .ci/run fetches the history a shallow clone lacks, so that the test
// always finds it. pinnedFormat is the store format of both commits this
// file builds, this release's too.
const (
	previousRelease         = "03b26549991a30f1253a0e6a8df8b05f859f6dd2"
	previousReleaseProtocol = 2
	pinnedFormat            = 1
)

// TestUpgradeFromThePreviousRelease builds the previous release from this
// repository's history, writes a tree with it, stops it and brings the
// same cluster directory up with this release, which reads the tree and
// changes it; then the previous release starts on what this one wrote (the
// format is the same, so a downgrade is a restart too). Clients and
// servers of the two releases speak different protocols: each refuses the
// other with a message that names both versions.
func TestUpgradeFromThePreviousRelease(t *testing.T) {
	if pinnedFormat != version.Format || previousReleaseProtocol == version.Protocol {
		t.Fatalf("previousRelease is pinned as protocol %d, format %d, and this release is protocol %d, format %d: "+
			"pin the last commit of the previous protocol or format and update what this test expects of it",
			previousReleaseProtocol, pinnedFormat, version.Protocol, version.Format)
	}
	bin := testcluster.Binary(t)
	old, err := buildCommit(t.TempDir(), previousRelease)
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	t.Cleanup(func() { localcluster.Down(dir, io.Discard) })
	mgs := upWith(t, old, dir)
	as := func(b string) func(args ...string) (string, error) {
		return func(args ...string) (string, error) {
			cmd := exec.Command(b, args...)
			cmd.Env = append(os.Environ(), "NACRE_MGS="+mgs)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
	}
	must := func(run func(...string) (string, error)) func(args ...string) string {
		return func(args ...string) string {
			t.Helper()
			out, err := run(args...)
			if err != nil {
				t.Fatalf("nacre %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return out
		}
	}
	oldRun, newRun := as(old), as(bin)
	oldMust, newMust := must(oldRun), must(newRun)

	// The previous release writes a tree: directories, a small file, a
	// file striped over both OSTs, a symbolic link.
	rng := rand.New(rand.NewPCG(26, 4))
	small, wide := make([]byte, 100<<10), make([]byte, 1<<20+12345)
	for _, b := range [][]byte{small, wide} {
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
	}
	local := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(local, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	oldMust("mkdir", "-p", "/home/alice/src")
	oldMust("put", write("small", small), "/home/alice/small")
	oldMust("put", "-c", "2", "-S", "64K", write("wide", wide), "/home/alice/src/wide")
	oldMust("ln", "-s", "/home/alice/small", "/home/link")

	// This release's client against the previous release's servers.
	out, err := newRun("ls", "/home")
	wantVersionRefusal(t, "this release's client against the previous release's MGS", out, err)
	out, err = newRun("status")
	wantVersionRefusal(t, "this release's status against the previous release's MGS", out, err)
	if strings.Contains(out, "does not answer") {
		t.Errorf("status calls an MGS that refuses its protocol silent:\n%s", out)
	}

	oldMust("down", "--dir", dir)
	if got := upWith(t, bin, dir); got != mgs {
		t.Fatalf("this release's up serves the MGS at %s, the previous release's was at %s", got, mgs)
	}

	// This release reads the tree the previous one wrote, and changes it.
	if got := newMust("cat", "/home/alice/small"); got != string(small) {
		t.Fatalf("/home/alice/small after the upgrade: %d bytes, not the %d written", len(got), len(small))
	}
	if got := newMust("cat", "/home/alice/src/wide"); got != string(wide) {
		t.Fatalf("/home/alice/src/wide after the upgrade: %d bytes, not the %d written", len(got), len(wide))
	}
	var stripe cli.StripeJSON
	if err := json.Unmarshal([]byte(newMust("getstripe", "--json", "/home/alice/src/wide")), &stripe); err != nil || stripe.StripeCount != 2 || stripe.StripeSize != 64<<10 {
		t.Errorf("getstripe /home/alice/src/wide after the upgrade: %+v (%v), want 2 stripes of 64 KiB", stripe, err)
	}
	if got := newMust("ls", "-l", "/home"); !strings.Contains(got, "link -> /home/alice/small") {
		t.Errorf("ls -l /home after the upgrade shows no link to /home/alice/small:\n%s", got)
	}
	newMust("mv", "/home/alice/small", "/home/alice/kept")
	newMust("put", write("new", []byte("written by this release\n")), "/home/alice/new")
	newMust("rm", "-r", "/home/alice/src")
	newMust("mkdir", "/home/bob")
	if got := newMust("ls", "/home/alice"); got != "kept\nnew\n" {
		t.Fatalf("ls /home/alice after changes by this release: %q, want kept and new", got)
	}

	// The previous release's client against this release's servers.
	out, err = oldRun("ls", "/home")
	wantVersionRefusal(t, "the previous release's client against this release's MGS", out, err)
	// The words are this release's server's: they name the fix.
	if !strings.Contains(out, "upgrading the side of the older one (`nacre --version` names a binary's protocol)") {
		t.Errorf("the refusal of the previous release's client does not name the fix:\n%s", out)
	}
	out, err = oldRun("cat", "/home/alice/new")
	wantVersionRefusal(t, "the previous release's client against this release's MGS", out, err)

	// Back to the previous release: the same format, so it starts on what
	// this release wrote.
	newMust("down", "--dir", dir)
	upWith(t, old, dir)
	if got := oldMust("cat", "/home/alice/new"); got != "written by this release\n" {
		t.Fatalf("the previous release reads /home/alice/new as %q", got)
	}
	if got := oldMust("cat", "/home/alice/kept"); got != string(small) {
		t.Fatalf("the previous release reads /home/alice/kept as %d bytes, not the %d written", len(got), len(small))
	}
	oldMust("down", "--dir", dir)
}

// sameProtocolRelease is the commit the rolling upgrade test builds as an
// earlier release of this protocol and format: the first commit of
// protocol 3.
const (
	sameProtocolRelease         = "d34853df0c6c8c77499055e7702f620a4e30703f"
	sameProtocolReleaseProtocol = 3
)

// TestRollingUpgradeWithinAProtocol starts a cluster of three MGS and
// three MDT replicas and two OSTs with an earlier release of this protocol,
// then restarts its targets one at a time onto this release (each group's
// followers first and its leader last, which hands over as it stops; then
// the OSTs) while clients of this release work. No operation fails, none
// waits past the failover bound, and the namespace is what the clients
// were told; a client of the earlier release then works against the
// upgraded servers.
func TestRollingUpgradeWithinAProtocol(t *testing.T) {
	if sameProtocolReleaseProtocol != version.Protocol || pinnedFormat != version.Format {
		t.Fatalf("sameProtocolRelease is pinned as protocol %d, format %d, and this release is protocol %d, format %d: "+
			"pin the first commit of this protocol and format",
			sameProtocolReleaseProtocol, pinnedFormat, version.Protocol, version.Format)
	}
	bin := testcluster.Binary(t)
	old, err := buildCommit(t.TempDir(), sameProtocolRelease)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Cleanup(func() { localcluster.Down(dir, io.Discard) })
	mgs := upWith(t, old, dir, "--replicas", "3")
	cl := testcluster.Adopt(t, dir, mgs)
	oldRun := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(old, args...)
		cmd.Env = append(os.Environ(), "NACRE_MGS="+mgs)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("earlier release's nacre %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	oldRun("put", "/etc/hosts", "/before")

	work := startWorkload(t, cl, workerNames(2)...)
	time.Sleep(time.Second) // the workers get going
	start := time.Now()

	upgrade := func(name string) {
		t.Helper()
		cl.Kill(name, syscall.SIGTERM)
		cl.Restart()
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cl.Pid(name)))
		if err != nil || exe != bin {
			t.Fatalf("%s runs %s (%v) after its restart, not this release's %s", name, exe, err, bin)
		}
	}
	for _, group := range []string{"mgs", "mdt0"} {
		leader := waitLeader(t, cl, group)
		var order []string
		for _, name := range replicaNames(t, cl, group) {
			if name != leader {
				order = append(order, name)
			}
		}
		for _, name := range append(order, leader) {
			upgrade(name)
			waitCaughtUp(t, cl, group, name)
			t.Logf("%s runs this release (was leader: %v); leader now %s", name, name == leader, waitLeader(t, cl, group))
		}
	}
	for _, name := range []string{"ost0", "ost1"} {
		upgrade(name)
		t.Logf("%s runs this release", name)
	}
	rolled := time.Now()
	work.finish(t)
	work.checkWaits(t, "the rolling upgrade", start, rolled)
	work.verify(t, cl.Client(t))

	// A client of the earlier release speaks the same protocol.
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Fatal(err)
	}
	if got := oldRun("cat", "/before"); got != string(hosts) {
		t.Fatalf("the earlier release's client reads /before as %q", got)
	}
	oldRun("mkdir", "/after")
	if got := oldRun("ls", "/"); !strings.Contains(got, "after\n") || !strings.Contains(got, "wa\n") {
		t.Fatalf("the earlier release's client lists / as %q", got)
	}
}

// wantVersionRefusal checks that a command of one release against servers
// of the other failed with a message that names both protocol versions and
// says what to do.
func wantVersionRefusal(t *testing.T, what, out string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: the command worked, but the protocols differ:\n%s", what, out)
	}
	for _, want := range []string{
		"incompatible protocol versions",
		"protocol " + strconv.Itoa(previousReleaseProtocol),
		"protocol " + strconv.Itoa(version.Protocol),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("%s: the refusal does not say %q:\n%s", what, want, out)
		}
	}
}

// upWith runs `nacre up --dir dir --detach` (and args) with the binary
// bin and returns the MGS address it prints last.
func upWith(t *testing.T, bin, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command(bin, append([]string{"up", "--dir", dir, "--detach"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s up --dir %s --detach: %v\n%s", filepath.Base(bin), dir, err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	mgs, ok := strings.CutPrefix(lines[len(lines)-1], "NACRE_MGS=")
	if !ok {
		t.Fatalf("%s up --detach did not end with NACRE_MGS=ADDR:\n%s", filepath.Base(bin), out)
	}
	return mgs
}

// buildCommit builds cmd/nacre as it is at commit of this repository into
// tmp and returns the binary's path. The source comes out of the
// repository with git archive, which registers no worktree, so a killed
// test leaves nothing behind in the repository.
func buildCommit(tmp, commit string) (string, error) {
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", args...).CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	root, err := git("rev-parse", "--show-toplevel")
	if err != nil {
		return "", fmt.Errorf("the upgrade test builds an earlier commit of this repository and needs its git history: git rev-parse: %v\n%s", err, root)
	}
	if out, err := git("-C", root, "cat-file", "-e", commit+"^{commit}"); err != nil {
		shallow, _ := git("-C", root, "rev-parse", "--is-shallow-repository")
		hint := "fetch the history that holds it (git fetch origin)"
		if shallow == "true" {
			hint = "this clone is shallow: run `git fetch --unshallow` (.ci/run does)"
		}
		return "", fmt.Errorf("the upgrade test builds commit %s of this repository, which %s lacks: %s\n%s", commit, root, hint, out)
	}
	src := filepath.Join(tmp, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", commit)
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return "", err
	}
	untar.Stdin = pipe
	var archiveErr, untarErr bytes.Buffer
	archive.Stderr, untar.Stderr = &archiveErr, &untarErr
	if err := untar.Start(); err != nil {
		return "", err
	}
	if err := archive.Run(); err != nil {
		untar.Wait()
		return "", fmt.Errorf("git archive %s: %v\n%s", commit, err, &archiveErr)
	}
	if err := untar.Wait(); err != nil {
		return "", fmt.Errorf("untar git archive %s: %v\n%s", commit, err, &untarErr)
	}
	bin := filepath.Join(tmp, "nacre-"+commit[:7])
	// No -trimpath: the commit's dependencies are then the packages this
	// tree's build (testcluster.Binary) left in the build cache, and
	// only Nacre's own packages compile.
	build := exec.Command("go", "build", "-o", bin, "./cmd/nacre")
	build.Dir = src
	// The commit's go.mod and go.sum decide its modules, from the module
	// cache; a workspace of the surrounding tree must not.
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build commit %s: go build ./cmd/nacre: %v\n%s", commit, err, out)
	}
	return bin, nil
}
