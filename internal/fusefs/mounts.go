package fusefs

import "nacre/internal/mountinfo"

// The mount table: the kernel's list of what is mounted where
// (/proc/self/mountinfo), of which the Nacre mounts are those of type
// NacreFsType.

// NacreFsType is the file system type of a Nacre FUSE mount (go-fuse
// mounts "fuse." + the server name, which MountFS sets to "nacre").
const NacreFsType = "fuse.nacre"

// MountInfo is one line of /proc/self/mountinfo.
type MountInfo = mountinfo.Mount

// Mounts reads this process's mount table, in /proc/self/mountinfo
// order (nil if it cannot be read).
func Mounts() []MountInfo {
	m, _ := mountinfo.Read("/proc/self/mountinfo")
	return m
}

// FindMount returns the mount at dir (the last one, if stacked).
func FindMount(dir string) (MountInfo, bool) {
	var found MountInfo
	ok := false
	for _, m := range Mounts() {
		if m.Dir == dir {
			found, ok = m, true
		}
	}
	return found, ok
}
