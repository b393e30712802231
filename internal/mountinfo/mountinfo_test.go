package mountinfo

import (
	"strings"
	"testing"
)

// TestParseUnescapesPathsAndKeepsOptions: mount points and roots are
// unescaped (a space is \040), bind mounts keep their root, the mount's
// and the file system's options are kept apart, and a line that is not a
// mount is passed over.
func TestParseUnescapesPathsAndKeepsOptions(t *testing.T) {
	in := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
36 22 0:45 / /tmp/my\040mnt rw,nosuid,nodev,relatime shared:20 - fuse.nacre alpha rw,user_id=0,group_id=0,default_permissions,allow_other
37 22 0:45 /m1 /srv/m1 rw,relatime shared:20 master:3 - fuse.nacre alpha rw
32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct ro,nosuid,nodev,noexec,relatime shared:12 - cgroup cgroup rw,cpu,cpuacct
garbage line
`
	got := Parse(strings.NewReader(in))
	want := []Mount{
		{Dir: "/", Root: "/", Dev: "8:1", FsType: "ext4", Source: "/dev/sda1", Options: "rw,relatime", SuperOptions: "rw"},
		{Dir: "/tmp/my mnt", Root: "/", Dev: "0:45", FsType: "fuse.nacre", Source: "alpha", Options: "rw,nosuid,nodev,relatime",
			SuperOptions: "rw,user_id=0,group_id=0,default_permissions,allow_other"},
		{Dir: "/srv/m1", Root: "/m1", Dev: "0:45", FsType: "fuse.nacre", Source: "alpha", Options: "rw,relatime", SuperOptions: "rw"},
		{Dir: "/sys/fs/cgroup/cpu,cpuacct", Root: "/", Dev: "0:29", FsType: "cgroup", Source: "cgroup",
			Options: "ro,nosuid,nodev,noexec,relatime", SuperOptions: "rw,cpu,cpuacct"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	cg := got[3]
	if !cg.ReadOnly() || got[0].ReadOnly() {
		t.Errorf("read-only: cgroup mount %v, root %v; want true, false", cg.ReadOnly(), got[0].ReadOnly())
	}
	if !cg.HasSuperOption("cpu") || !cg.HasSuperOption("cpuacct") || cg.HasSuperOption("cpuset") {
		t.Errorf("the cgroup mount's controllers from %q: cpu %v, cpuacct %v, cpuset %v", cg.SuperOptions,
			cg.HasSuperOption("cpu"), cg.HasSuperOption("cpuacct"), cg.HasSuperOption("cpuset"))
	}
}

func TestUnescapeUndoesOctalEscapes(t *testing.T) {
	if got := Unescape(`/tmp/a\040b\011c\134d`); got != "/tmp/a b\tc\\d" {
		t.Fatalf("%q", got)
	}
}
