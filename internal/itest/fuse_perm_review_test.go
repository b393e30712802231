package itest

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"nacre/internal/testcluster"
)

// TestFuseExecOnlyBinary runs another user's execute-only (0711) program
// through the mount, as on ext4: the kernel's exec open asks for read
// access (O_RDONLY) marked __FMODE_EXEC, which needs execute permission
// only. With and without default_permissions.
func TestFuseExecOnlyBinary(t *testing.T) {
	needFUSE(t)
	prog, err := os.ReadFile("/bin/true")
	if err != nil {
		t.Skip("no /bin/true to copy")
	}
	cl := testcluster.Start(t, testcluster.Options{})
	for _, opts := range []string{"allow_other", "allow_other,no_default_permissions"} {
		t.Run(strings.ReplaceAll(opts, ",", "+"), func(t *testing.T) {
			m := mountFuse(t, cl, opts)
			p := m.Path("xonly")
			must := mustOf(t)
			must(os.WriteFile(p, prog, 0o711))
			must(os.Chmod(p, 0o711))
			if out, err := asNobody(p).CombinedOutput(); err != nil {
				t.Fatalf("uid %d running root's 0711 program: %v %s", nobody, err, out)
			}
			// Reading it stays refused.
			mustFailUser(t, m.Dir, "cat xonly >/dev/null", "Permission denied")
			// Without an execute bit for others, exec is refused.
			must(os.Chmod(p, 0o700))
			if err := asNobody(p).Run(); !errors.Is(err, syscall.EACCES) {
				t.Fatalf("uid %d running root's 0700 program: %v, want EACCES", nobody, err)
			}
		})
	}
}

// asNobody is the command p run as uid and gid 65534.
func asNobody(p string) *exec.Cmd {
	cmd := exec.Command(p)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}
