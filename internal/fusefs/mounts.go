package fusefs

import (
	"bufio"
	"io"
	"os"
	"strconv"
	"strings"
)

// The mount table: the kernel's list of what is mounted where
// (/proc/self/mountinfo), of which the Nacre mounts are those of type
// NacreFsType.

// NacreFsType is the file system type of a Nacre FUSE mount (go-fuse
// mounts "fuse." + the server name, which MountFS sets to "nacre").
const NacreFsType = "fuse.nacre"

// MountInfo is one line of /proc/self/mountinfo.
type MountInfo struct {
	Dir    string // mount point
	Root   string // directory of the mounted file system shown at Dir ("/" unless a bind mount of a subdirectory)
	Dev    string // major:minor
	FsType string // NacreFsType for a Nacre mount
	Source string
}

// Mounts reads this process's mount table, in /proc/self/mountinfo
// order (nil if it cannot be read).
func Mounts() []MountInfo {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	return ParseMountInfo(f)
}

// ParseMountInfo reads a mount table in the format of /proc/self/mountinfo.
func ParseMountInfo(r io.Reader) []MountInfo {
	var out []MountInfo
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// 36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw
		fields := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+2 >= len(fields) {
			continue
		}
		out = append(out, MountInfo{Root: UnescapeMount(fields[3]), Dir: UnescapeMount(fields[4]), Dev: fields[2],
			FsType: fields[sep+1], Source: UnescapeMount(fields[sep+2])})
	}
	return out
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

// UnescapeMount undoes the kernel's \ooo escapes (space, tab, newline,
// backslash) in a field of /proc/self/mountinfo.
func UnescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
