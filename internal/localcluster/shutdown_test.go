package localcluster

import (
	"slices"
	"testing"

	"nacre/internal/fusefs"
)

// TestClusterMountsMatchesTheRecordedMGS: the mounts a shutdown unmounts
// are the Nacre mounts whose daemon recorded the cluster's MGS (one of its
// replicas, for a replicated MGS), deepest first; a Nacre mount with no
// record it can read (another user's) is listed apart, and other file
// systems are left alone.
func TestClusterMountsMatchesTheRecordedMGS(t *testing.T) {
	mounts := []fusefs.MountInfo{
		{Dir: "/", Root: "/", FsType: "ext4", Source: "/dev/sda1"},
		{Dir: "/mnt/nacre", Root: "/", FsType: fusefs.NacreFsType, Source: "alpha"},
		{Dir: "/mnt/nacre/scratch", Root: "/", FsType: "tmpfs", Source: "tmpfs"},
		{Dir: "/home/u/proj", Root: "/m1/proj", FsType: fusefs.NacreFsType, Source: "alpha"},
		{Dir: "/mnt/stacked", Root: "/", FsType: "ext4", Source: "/dev/sdb1"},
		{Dir: "/mnt/stacked", Root: "/", FsType: fusefs.NacreFsType, Source: "beta"},
		{Dir: "/mnt/nacre/deeper", Root: "/", FsType: fusefs.NacreFsType},
	}
	recorded := func(dir string) string {
		switch dir {
		case "/mnt/nacre", "/mnt/nacre/deeper":
			return "127.0.0.1:7000"
		case "/mnt/stacked":
			return "127.0.0.1:7001,127.0.0.1:7002"
		}
		return "" // /home/u/proj: another user's
	}
	mine, unknown := clusterMounts(mounts, recorded, "127.0.0.1:7000")
	if !slices.Equal(mine, []string{"/mnt/nacre/deeper", "/mnt/nacre"}) || !slices.Equal(unknown, []string{"/home/u/proj"}) {
		t.Fatalf("MGS 127.0.0.1:7000: mine %v, unknown %v", mine, unknown)
	}
	if mine, _ := clusterMounts(mounts, recorded, "127.0.0.1:7002,127.0.0.1:7003"); !slices.Equal(mine, []string{"/mnt/stacked"}) {
		t.Fatalf("replicated MGS: %v", mine)
	}
}
