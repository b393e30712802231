package localcluster

import (
	"fmt"
	"io"
	"sort"

	"nacre/internal/client"
	"nacre/internal/fusefs"
)

// Shutdown stops the local cluster in dir (Down), first
// unmounting the Nacre mounts of its file system on this machine, as an
// administrator unmounts Lustre clients before stopping the servers: a
// mount left behind would only fail every program that uses it, and
// unmounting while the servers still run lets its daemon write back what
// it holds.
//
// A mount belongs to the cluster when the MGS its daemon recorded is the
// cluster's (fusefs.Record). Each is unmounted as `nacre umount` does; a
// busy one (files open on it) is not forced, and if it is still mounted
// once the servers are stopped, a warning names it and says how to free
// it. The mount `nacre up --mount` made is forced (Down).
// A Nacre mount whose record cannot be read (made by another user) may
// be of this file system: a warning names it too. The cluster is stopped
// in every case. Mount daemons record themselves in stateDir
// (fusefs.StateDir).
func Shutdown(dir, stateDir string, out, errOut io.Writer) error {
	var busy []string
	var failures []error
	var unknown []string
	if mgs, err := MGSAddr(dir); err == nil {
		recorded := func(d string) string {
			r, err := fusefs.ReadRecord(stateDir, d)
			if err != nil {
				return ""
			}
			return r.MGS
		}
		mine, others := clusterMounts(fusefs.Mounts(), recorded, mgs)
		unknown = others
		for _, m := range mine {
			if err := fusefs.Umount(m, fusefs.UmountOptions{StateDir: stateDir}); err != nil {
				busy = append(busy, m)
				failures = append(failures, err)
				continue
			}
			fmt.Fprintf(out, "unmounted %s\n", m)
		}
	}
	if err := down(dir, stateDir, out); err != nil {
		return err
	}
	for i, m := range busy {
		if _, still := fusefs.FindMount(m); !still {
			continue
		}
		fmt.Fprintf(errOut, "nacre: warning: could not unmount %s, a Nacre mount of this file system: %v.\nIts servers are stopped now, so programs using it get errors: close the files open there and run `nacre umount %s` (or `nacre umount --force %s`)\n",
			m, failures[i], m, m)
	}
	for _, m := range unknown {
		if _, still := fusefs.FindMount(m); !still {
			continue
		}
		fmt.Fprintf(errOut, "nacre: warning: %s is a Nacre mount whose daemon's record this user cannot read (mounted by another user?); if it is of this file system, unmount it: nacre umount %s\n", m, m)
	}
	return nil
}

// clusterMounts lists the Nacre mounts of the mount table whose daemon
// recorded the MGS mgs (an address, or the replicas' "a,b,c"), deepest
// first, and the Nacre mounts whose MGS is unknown (recorded gives ""
// for them).
func clusterMounts(mounts []fusefs.MountInfo, recorded func(dir string) string, mgs string) (mine, unknown []string) {
	seen := map[string]bool{}
	for _, m := range mounts {
		if m.FsType != fusefs.NacreFsType || seen[m.Dir] {
			continue
		}
		seen[m.Dir] = true
		switch rec := recorded(m.Dir); {
		case rec == "":
			unknown = append(unknown, m.Dir)
		case client.SameMGS(rec, mgs):
			mine = append(mine, m.Dir)
		}
	}
	// Mounts inside other mounts first.
	sort.SliceStable(mine, func(i, j int) bool { return len(mine[i]) > len(mine[j]) })
	return mine, unknown
}
