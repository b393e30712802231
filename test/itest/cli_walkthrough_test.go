package itest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacre/internal/cli"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestCLIGetWritesLikeCp: `nacre get` writes its destination as cp does.
// A FIFO and a device are written into, not replaced by a regular file
// (`get /big.iso /dev/full` made /dev/full a regular file); a symbolic
// link's target is replaced and the link stays; two gets of one
// destination at once do not share a temporary file.
func TestCLIGetWritesLikeCp(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cliT{t, cl}
	data := make([]byte, 3<<20+17)
	for i := range data {
		data[i] = byte(i * 31)
	}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, data, 0o644)
	c.run("put", "-c", "2", "-S", "64K", src, "/f")
	dir := t.TempDir()

	// A FIFO: its reader gets the file.
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan []byte, 1)
	go func() {
		f, err := os.Open(fifo)
		if err != nil {
			got <- nil
			return
		}
		defer f.Close()
		b, _ := io.ReadAll(f)
		got <- b
	}()
	c.run("get", "/f", fifo)
	select {
	case b := <-got:
		if !bytes.Equal(b, data) {
			t.Fatalf("the FIFO's reader got %d bytes, want the file's %d", len(b), len(data))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the FIFO's reader got no end of file")
	}

	// Devices: a null device takes the file, a full one fails with ENOSPC;
	// both stay devices.
	null, full := filepath.Join(dir, "null"), filepath.Join(dir, "full")
	if err := syscall.Mknod(null, syscall.S_IFCHR|0o666, 1<<8|3); err == nil {
		if err := syscall.Mknod(full, syscall.S_IFCHR|0o666, 1<<8|7); err != nil {
			t.Fatal(err)
		}
		c.run("get", "/f", null)
		if _, errOut, code := c.exit("get", "/f", full); code == 0 || !strings.Contains(errOut, "no space left on device") || !strings.Contains(errOut, full) {
			t.Fatalf("get into a full device: exit %d, %q", code, errOut)
		}
	} else {
		t.Logf("no devices (mknod needs root): %v", err)
		null, full = fifo, fifo
	}
	for _, p := range []string{fifo, null, full} {
		if st, err := os.Lstat(p); err != nil || st.Mode().IsRegular() {
			t.Fatalf("%s is now %v (%v)", p, st.Mode(), err)
		}
	}

	// A symbolic link: the file it names is replaced, keeping its mode.
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("old"), 0o600)
	os.Chmod(target, 0o640)
	link := filepath.Join(dir, "link")
	os.Symlink("target", link)
	c.run("get", "/f", link)
	if to, err := os.Readlink(link); err != nil || to != "target" {
		t.Fatalf("the link now points to %q (%v)", to, err)
	}
	if b, _ := os.ReadFile(target); !bytes.Equal(b, data) {
		t.Fatalf("the link's target holds %d bytes", len(b))
	}
	if st, _ := os.Stat(target); st.Mode() != 0o640 {
		t.Fatalf("the link's target has mode %v, want -rw-r-----", st.Mode())
	}

	// Two gets at once of one destination.
	dst := filepath.Join(dir, "dst")
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var o, e string
			o, e, errs[i] = nacreIn(cl, "/", nil, "get", "/f", dst)
			outs[i] = o + e
		}()
	}
	wg.Wait()
	for i := range outs {
		if errs[i] != nil {
			t.Fatalf("concurrent get %d: %v %s", i, errs[i], outs[i])
		}
	}
	if b, _ := os.ReadFile(dst); !bytes.Equal(b, data) {
		t.Fatalf("after two gets at once the file holds %d bytes", len(b))
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), "nacre-partial") {
			t.Fatalf("left %s", e.Name())
		}
	}
}

// TestCLILsLongShowsSymlinks: `ls -l LINK` shows the link (as ls -l),
// also a dangling one; it showed the file the link names, and failed on a
// dangling link.
func TestCLILsLongShowsSymlinks(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	c := cliT{t, cl}
	c.run("mkdir", "/e")
	c.run("put", "/etc/hostname", "/e/h1")
	c.run("ln", "-s", "h1", "/e/slh")
	c.run("ln", "-s", "nowhere", "/sl")
	c.run("ln", "-s", "/e", "/sld")
	for _, tc := range []struct{ path, want string }{
		{"/e/slh", "slh -> h1"},
		{"/sl", "sl -> nowhere"},
		{"/sld", "sld -> /e"},
	} {
		out := strings.TrimSpace(c.run("ls", "-l", tc.path))
		if strings.Count(out, "\n") != 0 || !strings.HasPrefix(out, "lrwxrwxrwx") || !strings.HasSuffix(out, tc.want) {
			t.Errorf("ls -l %s: %q, want one line lrwxrwxrwx ... %s", tc.path, out, tc.want)
		}
		var js []cli.LsEntry
		if err := json.Unmarshal([]byte(c.run("ls", "--json", tc.path)), &js); err != nil || len(js) != 1 || js[0].Type != "symbolic link" {
			t.Errorf("ls --json %s: %+v %v", tc.path, js, err)
		}
	}
	// Without -l, as ls: a link to a directory lists it, a dangling one
	// is named; with a slash the link is followed.
	if out := c.run("ls", "/sld"); out != "h1\nslh\n" {
		t.Errorf("ls /sld: %q", out)
	}
	if out := c.run("ls", "/sl"); out != "sl\n" {
		t.Errorf("ls /sl: %q", out)
	}
	if out := c.run("ls", "-l", "/sld/"); !strings.Contains(out, "slh -> h1") || strings.Count(out, "\n") != 2 {
		t.Errorf("ls -l /sld/: %q", out)
	}
}

// TestCLIPutKeepsTheStripeCount: a put onto a 2-stripe file with one of
// the two OSTs down, or with -c 2, is refused and leaves the file as it
// was (it returned 0 and made a 1-stripe file); -c 1 accepts one stripe.
func TestCLIPutKeepsTheStripeCount(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cliT{t, cl}
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("new contents\n"), 0o644)
	old := filepath.Join(t.TempDir(), "old")
	os.WriteFile(old, make([]byte, 1<<20), 0o644)
	c.run("put", "-c", "2", "-S", "64K", old, "/w")
	cl.Kill("ost1", syscall.SIGKILL)
	stripes := func(p string) int {
		var gs cli.StripeJSON
		json.Unmarshal([]byte(c.run("getstripe", "--json", p)), &gs)
		return len(gs.Objects)
	}
	for _, args := range [][]string{{"put", src, "/w"}, {"put", "-c", "2", src, "/w2"}} {
		// Until the MDS notices that OST0001 is down, a put gets both
		// stripes and fails writing to it, naming it.
		var errOut string
		var code int
		wait.Poll(30*time.Second, func() bool {
			_, errOut, code = c.exit(args...)
			return !(code != 0 && strings.Contains(errOut, "OST0001") && strings.Contains(errOut, "is down: stripe"))
		})
		if code == 0 || !strings.Contains(errOut, "not written: it would have 1 stripe, not the 2") ||
			!strings.Contains(errOut, "OST0001 is down") || !strings.Contains(errOut, "-c 1") {
			t.Fatalf("nacre %s with OST0001 down: exit %d, %q", strings.Join(args, " "), code, errOut)
		}
		t.Logf("nacre %s: %s", strings.Join(args, " "), strings.TrimSpace(errOut))
	}
	if n := stripes("/w"); n != 2 {
		t.Fatalf("/w has %d stripes after the refused put", n)
	}
	// setstripe creating a file: the same refusal, and no file left.
	if _, errOut, code := c.exit("setstripe", "-c", "2", "/s"); code == 0 || !strings.Contains(errOut, "not created: it would have 1 stripe, not 2") || !strings.Contains(errOut, "OST0001 is down") {
		t.Fatalf("setstripe -c 2 /s with OST0001 down: exit %d, %q", code, errOut)
	}
	if names := c.names("/"); len(names) != 1 {
		t.Fatalf("the refused puts and setstripe left %v", names)
	}
	c.run("put", "-c", "1", src, "/w")
	if n := stripes("/w"); n != 1 || c.run("cat", "/w") != "new contents\n" {
		t.Fatalf("put -c 1: %d stripes", n)
	}
}

// TestCLIMDTDownIsNamed kills the MDT: client commands name it, its
// address and the cause once, and point to `nacre status` (ls printed
// "getattr F: getattr F: gave up after 98 attempts: ...: i/o timeout" for
// a refused connection); lfsck query and status -t say it as well (not
// gRPC's "connection error: desc = ...").
func TestCLIMDTDownIsNamed(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	c := cliT{t, cl}
	c.run("mkdir", "/a")
	var st cli.ClusterStatus
	json.Unmarshal([]byte(c.run("status", "--json")), &st)
	var addr string
	for _, ts := range st.Targets {
		if ts.Kind == "mdt" {
			addr = ts.Addr
		}
	}
	cl.Kill("mdt0", syscall.SIGKILL)

	// The checker's commands fail at once: run them before the MGS
	// notices (then they say the MDT is not up).
	for _, args := range [][]string{{"lfsck", "query"}, {"lfsck", "status", "-t", "namespace"}} {
		_, errOut, code := c.exit(args...)
		want := fmt.Sprintf("MDT0000 (%s) does not answer: connection refused; check `nacre status`", addr)
		if code == 0 || (!strings.Contains(errOut, want) && !strings.Contains(errOut, "MDT0000 is not up; check `nacre status`")) {
			t.Errorf("nacre %s with MDT0000 down: exit %d, %q, want %q", strings.Join(args, " "), code, errOut, want)
		}
	}

	type result struct {
		errOut string
		code   int
		took   time.Duration
	}
	cmds := [][]string{{"ls", "/"}, {"stat", "/a", "/b"}}
	res := make([]result, len(cmds))
	var wg sync.WaitGroup
	for i, args := range cmds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			cmd := exec.Command(cl.Bin, args...)
			cmd.Env = append(os.Environ(), "NACRE_MGS="+cl.MGS)
			var e bytes.Buffer
			cmd.Stderr = &e
			err := cmd.Run()
			res[i] = result{e.String(), cmd.ProcessState.ExitCode(), time.Since(start)}
			if err == nil {
				res[i].code = 0
			}
		}()
	}
	wg.Wait()
	wantLs := fmt.Sprintf("nacre: ls /: MDT0000 (%s) does not answer: connection refused; check `nacre status`\n", addr)
	if r := res[0]; r.code == 0 || r.errOut != wantLs {
		t.Errorf("ls / with MDT0000 down: exit %d after %v:\n%q\nwant\n%q", r.code, r.took, r.errOut, wantLs)
	}
	// One MDT that does not answer stops a command of several operands.
	wantStat := fmt.Sprintf("nacre: stat /a: MDT0000 (%s) does not answer: connection refused; check `nacre status`\nnacre: stat: stopped; not tried: /b\n", addr)
	if r := res[1]; r.code == 0 || r.errOut != wantStat {
		t.Errorf("stat /a /b with MDT0000 down: exit %d after %v:\n%q\nwant\n%q", r.code, r.took, r.errOut, wantStat)
	}
	for i, r := range res {
		if r.took > 45*time.Second {
			t.Errorf("nacre %s took %v", strings.Join(cmds[i], " "), r.took)
		}
	}
}
