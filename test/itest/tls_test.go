package itest

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nacre/internal/localcluster"
	"nacre/internal/pki"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestTLSCluster: `nacre up --tls` makes a cluster whose every link is
// TLS. Its mount and the commands given NACRE_TLS_DIR work; a command
// without credentials, or with a certificate of another CA, is refused
// and the server's log says whom and why; a client certificate without
// the admin role is refused by lfsck and fault injection with a message
// naming the fix, and an admin certificate is not.
func TestTLSCluster(t *testing.T) {
	needFUSE(t)
	bin := testcluster.Binary(t)
	dir := t.TempDir()
	mnt := filepath.Join(t.TempDir(), "m")
	t.Cleanup(func() {
		localcluster.Down(dir, io.Discard)
		exec.Command("fusermount3", "-u", "-z", mnt).Run()
	})
	out, err := exec.Command(bin, "up", "--tls", "--dir", dir, "--detach", "--mount", mnt).CombinedOutput()
	if err != nil {
		t.Fatalf("up --tls: %v\n%s", err, out)
	}
	var mgs, tlsDir string
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "NACRE_MGS="); ok {
			mgs = v
		}
		if v, ok := strings.CutPrefix(l, "NACRE_TLS_DIR="); ok {
			tlsDir = v
		}
	}
	if mgs == "" || tlsDir == "" {
		t.Fatalf("up --tls printed no NACRE_MGS= or NACRE_TLS_DIR= line:\n%s", out)
	}
	run := func(creds string, args ...string) (string, error) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "NACRE_MGS="+mgs, "NACRE_TLS_DIR="+creds)
		b, err := cmd.CombinedOutput()
		return string(b), err
	}

	// The mount (admin credentials of the user who ran up) and the CLI.
	if err := os.WriteFile(filepath.Join(mnt, "kept"), []byte("over TLS\n"), 0o644); err != nil {
		t.Fatalf("write through the mount: %v", err)
	}
	if out, err := run(tlsDir, "cat", "/kept"); err != nil || out != "over TLS\n" {
		t.Fatalf("cat with the admin credentials: %v\n%s", err, out)
	}
	if out, err := run(tlsDir, "status"); err != nil || !strings.Contains(out, "OST0001") {
		t.Fatalf("status: %v\n%s", err, out)
	}

	// Credentials are their owner's alone.
	for _, d := range []string{filepath.Join(dir, "tls"), tlsDir, filepath.Join(dir, "mdt0", "tls"), filepath.Join(dir, "ost1", "tls")} {
		fi, err := os.Stat(d)
		if err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v %v, want a 0700 directory", d, fi.Mode(), err)
			continue
		}
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if fi, _ := e.Info(); !e.IsDir() && fi.Mode().Perm() != 0o600 {
				t.Errorf("%s/%s is %v, want 0600", d, e.Name(), fi.Mode())
			}
		}
	}

	// No credentials: refused, told why, and the MGS logs who.
	if out, err := run("", "ls", "/"); err == nil || !strings.Contains(out, "NACRE_TLS_DIR") {
		t.Errorf("ls without credentials: %v, want a refusal naming NACRE_TLS_DIR:\n%s", err, out)
	}
	mgsLog := filepath.Join(dir, "mgs", "serve.log")
	if !wait.Poll(10*time.Second, func() bool {
		b, _ := os.ReadFile(mgsLog)
		return strings.Contains(string(b), "TLS handshake failed") && strings.Contains(string(b), `"remote":"127.0.0.1:`)
	}) {
		b, _ := os.ReadFile(mgsLog)
		t.Errorf("the MGS's log does not name the refused peer:\n%s", b)
	}

	// A certificate of another CA: refused, and named in the log.
	other := filepath.Join(t.TempDir(), "other")
	oca, _, err := pki.InitCA(filepath.Join(other, "ca"), "other")
	if err != nil {
		t.Fatal(err)
	}
	if err := oca.Issue(filepath.Join(other, "mallory"), pki.Request{Name: "mallory", Role: pki.RoleAdmin}); err != nil {
		t.Fatal(err)
	}
	if out, err := run(filepath.Join(other, "mallory"), "ls", "/"); err == nil {
		t.Errorf("ls with a certificate of another CA worked:\n%s", out)
	}

	// A client certificate: files yes, admin services no.
	out, err = exec.Command(bin, "cert", "add", "--client", "alice", "--dir", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("cert add: %v\n%s", err, out)
	}
	alice := localcluster.ClientTLSDir(dir, "alice")
	if out, err := run(alice, "cat", "/kept"); err != nil || out != "over TLS\n" {
		t.Fatalf("cat with a client certificate: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"lfsck", "start"}, {"fault", "inject", "linkea_missing", "--path", "/kept"}} {
		out, err := run(alice, args...)
		if err == nil || !strings.Contains(out, "needs the admin role") || !strings.Contains(out, "nacre cert add --client NAME --admin") {
			t.Errorf("%s with a client certificate: %v, want a refusal naming the admin role and the fix:\n%s", strings.Join(args, " "), err, out)
		}
	}
	mdtLog := filepath.Join(dir, "mdt0", "serve.log")
	if b, _ := os.ReadFile(mdtLog); !strings.Contains(string(b), "call refused") || !strings.Contains(string(b), "alice") {
		t.Errorf("the MDT's log does not name the refused call's certificate:\n%s", b)
	}
	if out, err := run(tlsDir, "lfsck", "start"); err != nil {
		t.Errorf("lfsck start with the admin credentials: %v\n%s", err, out)
	}
}
