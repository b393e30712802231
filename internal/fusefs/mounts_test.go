package fusefs

import (
	"strings"
	"testing"
)

// TestParseMountInfo: mount points and roots are unescaped (a space is
// \040), bind mounts keep their root, and a line that is not a mount is
// passed over.
func TestParseMountInfo(t *testing.T) {
	in := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
36 22 0:45 / /tmp/my\040mnt rw,nosuid,nodev,relatime shared:20 - fuse.nacre alpha rw,user_id=0,group_id=0,default_permissions,allow_other
37 22 0:45 /m1 /srv/m1 rw,relatime shared:20 master:3 - fuse.nacre alpha rw
garbage line
`
	got := ParseMountInfo(strings.NewReader(in))
	want := []MountInfo{
		{Dir: "/", Root: "/", Dev: "8:1", FsType: "ext4", Source: "/dev/sda1"},
		{Dir: "/tmp/my mnt", Root: "/", Dev: "0:45", FsType: NacreFsType, Source: "alpha"},
		{Dir: "/srv/m1", Root: "/m1", Dev: "0:45", FsType: NacreFsType, Source: "alpha"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
