package cli

import (
	"errors"
	"io/fs"
	"nacre/internal/fusefs"
	"strings"
	"testing"
)

// testMounts is a mount table with a Nacre mount, a non-Nacre mount on
// top of one of its directories, a bind mount of a Nacre subdirectory,
// and a Nacre mount stacked over an ext4 one.
var testMounts = []fusefs.MountInfo{
	{Dir: "/", Root: "/", FsType: "ext4", Source: "/dev/sda1"},
	{Dir: "/tmp", Root: "/", FsType: "tmpfs", Source: "tmpfs"},
	{Dir: "/mnt/nacre", Root: "/", FsType: fusefs.NacreFsType, Source: "alpha"},
	{Dir: "/mnt/nacre/scratch", Root: "/", FsType: "tmpfs", Source: "tmpfs"},
	{Dir: "/home/u/proj", Root: "/m1/proj", FsType: fusefs.NacreFsType, Source: "alpha"},
	{Dir: "/mnt/stacked", Root: "/", FsType: "ext4", Source: "/dev/sdb1"},
	{Dir: "/mnt/stacked", Root: "/", FsType: fusefs.NacreFsType, Source: "beta"},
	{Dir: "/mnt/nacre2", Root: "/", FsType: "ext4", Source: "/dev/sdc1"},
}

// testSymlinks are the local symbolic links of the test machine.
func testEvalSymlinks(p string) (string, error) {
	switch {
	case p == "/home/u/link" || strings.HasPrefix(p, "/home/u/link/"):
		return "/mnt/nacre" + strings.TrimPrefix(p, "/home/u/link"), nil
	case p == "/" || p == "/home" || p == "/home/u" || p == "/tmp" || p == "/mnt" || strings.HasPrefix(p, "/mnt/nacre"):
		return p, nil
	}
	return "", &fs.PathError{Op: "lstat", Path: p, Err: fs.ErrNotExist}
}

func TestResolvePath(t *testing.T) {
	mgsOf := func(dir string) string {
		if dir == "/mnt/nacre" {
			return "127.0.0.1:7000"
		}
		return ""
	}
	cases := []struct {
		name      string
		cwd       string
		arg       string
		want      string // path from the file system root
		wantMount string
		wantErr   string
	}{
		{"absolute path outside mounts is a file system path", "/home/u", "/m1/x", "/m1/x", "", ""},
		{"absolute file system path keeps its form", "/", "/a/b/../c/", "/a/b/../c/", "", ""},
		{"root", "/", "/", "/", "", ""},
		{"relative under a mount", "/mnt/nacre/m1", "x", "/m1/x", "/mnt/nacre", ""},
		{"relative dot under a mount", "/mnt/nacre/m1", ".", "/m1", "/mnt/nacre", ""},
		{"relative dotdot stays in the mount", "/mnt/nacre/m1/d", "../y", "/m1/y", "/mnt/nacre", ""},
		{"mount point itself is the root", "/mnt/nacre", ".", "/", "/mnt/nacre", ""},
		{"absolute path on a mount", "/", "/mnt/nacre/big", "/big", "/mnt/nacre", ""},
		{"absolute path on a mount, unclean", "/", "/mnt/nacre//a/./b/", "/a/b", "/mnt/nacre", ""},
		{"prefix of a mount name is not the mount", "/", "/mnt/nacre2/x", "/mnt/nacre2/x", "", ""},
		{"deeper non-Nacre mount hides the Nacre one", "/", "/mnt/nacre/scratch/f", "/mnt/nacre/scratch/f", "", ""},
		{"bind mount of a subdirectory", "/home/u/proj/src", "main.c", "/m1/proj/src/main.c", "/home/u/proj", ""},
		{"last of stacked mounts wins", "/", "/mnt/stacked/f", "/f", "/mnt/stacked", ""},
		{"local symlink into a mount", "/", "/home/u/link/d/f", "/d/f", "/mnt/nacre", ""},
		{"relative through a local symlink", "/home/u", "link/f", "/f", "/mnt/nacre", ""},
		{"last component symlink not followed", "/home/u", "link", "", "", "relative path link is not under a Nacre mount"},
		{"relative outside mounts is refused", "/home/u", "x", "", "", "relative path x is not under a Nacre mount (/home/u/x is not): give a path from the file system root, like /x, or cd into a Nacre mount"},
		{"relative leaving the mount is refused", "/mnt/nacre", "../x", "", "", "relative path ../x is not under a Nacre mount (/mnt/x is not)"},
		{"relative without a current directory", "", "x", "", "", "cannot read the current directory"},
		{"empty", "/", "", "", "", "empty path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pe := PathEnv{Cwd: c.cwd, Mounts: testMounts, EvalSymlinks: testEvalSymlinks, MountMGS: mgsOf}
			if c.cwd == "" {
				pe.CwdErr = errors.New("getwd: no such file or directory")
			}
			fp, err := pe.Resolve(c.arg)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("Resolve(%q) in %s = %+v, %v; want an error containing %q", c.arg, c.cwd, fp, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q) in %s: %v", c.arg, c.cwd, err)
			}
			if fp.Path != c.want || fp.Mount != c.wantMount || fp.Arg != c.arg {
				t.Fatalf("Resolve(%q) in %s = %+v; want path %q on mount %q", c.arg, c.cwd, fp, c.want, c.wantMount)
			}
			if wantMGS := mgsOf(c.wantMount); fp.MGS != wantMGS {
				t.Fatalf("Resolve(%q): MGS %q, want %q", c.arg, fp.MGS, wantMGS)
			}
		})
	}
}

func TestResolvePathsPicksTheMountsMGS(t *testing.T) {
	pe := &PathEnv{Cwd: "/mnt/nacre/m1", Mounts: testMounts, MountMGS: func(dir string) string {
		return map[string]string{"/mnt/nacre": "127.0.0.1:7000", "/mnt/stacked": "127.0.0.1:8000"}[dir]
	}}
	cases := []struct {
		mgs     string
		args    []string
		wantMGS string
		wantErr string
	}{
		{"", []string{"x"}, "127.0.0.1:7000", ""},                          // no --mgs: the mount's
		{"127.0.0.1:7000", []string{"x", "/y"}, "127.0.0.1:7000", ""},      // the same
		{"localhost:7000", []string{"x"}, "localhost:7000", ""},            // the same server, spelt otherwise
		{"10.0.0.1:9", []string{"/y"}, "10.0.0.1:9", ""},                   // no mount involved
		{"127.0.0.1:8000", []string{"x"}, "", "give --mgs 127.0.0.1:7000"}, // another file system's mount
		{"", []string{"x", "/mnt/stacked/f"}, "", "is on the Nacre mount /mnt/stacked"},
	}
	for _, c := range cases {
		mgs, paths, err := Env{MGS: c.mgs, Paths: pe}.ResolvePaths(c.args...)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("--mgs %q %v: got %q %v, %v; want an error containing %q", c.mgs, c.args, mgs, paths, err, c.wantErr)
			}
			continue
		}
		if err != nil || mgs != c.wantMGS || len(paths) != len(c.args) {
			t.Errorf("--mgs %q %v: got %q %v, %v; want MGS %q", c.mgs, c.args, mgs, paths, err, c.wantMGS)
		}
	}
}
