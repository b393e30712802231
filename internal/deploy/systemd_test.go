package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestEscapePathAsSystemdDoes(t *testing.T) {
	cases := map[string]string{
		"/srv/nacre/mdt0":  "srv-nacre-mdt0",
		"/mnt/nacre/":      "mnt-nacre",
		"/":                "-",
		"/srv/a b/.x/é":    `srv-a\x20b-.x-\xc3\xa9`,
		"/.hidden/x-y":     `\x2ehidden-x\x2dy`,
		"/data//ost_1:a.b": "data-ost_1:a.b",
	}
	escape, _ := exec.LookPath("systemd-escape")
	for in, want := range cases {
		if got := EscapePath(in); got != want {
			t.Errorf("EscapePath(%q) = %q, want %q", in, got, want)
		}
		if escape == "" {
			continue
		}
		out, err := exec.Command(escape, "--path", in).Output()
		if err != nil {
			t.Fatalf("systemd-escape --path %q: %v", in, err)
		}
		if got := strings.TrimSpace(string(out)); got != EscapePath(in) {
			t.Errorf("systemd-escape --path %q = %q, EscapePath gives %q", in, got, EscapePath(in))
		}
	}
}

// TestUnitsRunTheBinaryAndPassVerify: the units run the given binary on
// the instance's path, read the environment files, are ordered before
// the remote file systems, and systemd-analyze verify accepts them
// (where it exists; it checks syntax, specifiers, dependencies and that
// the binary is executable).
func TestUnitsRunTheBinaryAndPassVerify(t *testing.T) {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	paths, err := WriteSystemd(Options{Bin: bin, UnitDir: dir, EnvDir: "/etc/nacre"})
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 2 {
		t.Fatalf("wrote %v, want two units", paths)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for name, want := range map[string][]string{
		TargetUnit: {"ExecStart=" + bin + " serve --dir /%I\n", "Before=remote-fs-pre.target\n", "EnvironmentFile=-/etc/nacre/nacre.env\n", "WantedBy=multi-user.target\n"},
		MountUnit:  {"ExecStart=" + bin + " mount /%I $NACRE_MOUNT_OPTIONS\n", "ExecStop=" + bin + " umount /%I\n", "Type=forking\n", "Before=remote-fs.target\n", "EnvironmentFile=-/etc/nacre/mount-%i.env\n", "WantedBy=remote-fs.target\n"},
	} {
		u := read(name)
		for _, w := range want {
			if !strings.Contains(u, w) {
				t.Errorf("%s lacks %q:\n%s", name, w, u)
			}
		}
	}
	verify, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the units' syntax is not verified here")
	}
	target := filepath.Join(dir, Instance(TargetUnit, "/srv/nacre/mdt0"))
	mount := filepath.Join(dir, Instance(MountUnit, "/mnt/nacre"))
	for inst, tmpl := range map[string]string{target: TargetUnit, mount: MountUnit} {
		if err := os.Symlink(tmpl, inst); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command(verify, "verify", target, mount).CombinedOutput(); err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestWriteSystemdRefusesWhatCannotWork(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	os.WriteFile(plain, []byte("x"), 0o644)
	bin, _ := os.Executable()
	cases := []struct {
		name string
		o    Options
		want string
	}{
		{"relative binary", Options{Bin: "nacre", UnitDir: dir}, "must be an absolute path"},
		{"missing binary", Options{Bin: filepath.Join(dir, "none"), UnitDir: dir}, "no such file"},
		{"binary not executable", Options{Bin: plain, UnitDir: dir}, "not an executable file"},
		{"missing unit directory", Options{Bin: bin, UnitDir: filepath.Join(dir, "none")}, "unit directory"},
		{"unit directory is a file", Options{Bin: bin, UnitDir: plain}, "not a directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := WriteSystemd(c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("a refused install left files: %v", ents)
	}
}
