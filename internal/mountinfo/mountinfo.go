// Package mountinfo reads the kernel's mount table of a process
// (/proc/self/mountinfo): what is mounted where, from which part of which
// file system, with which options. The FUSE mount finds Nacre mounts in
// it, and the CPU budgets of a local cluster find the cgroup hierarchies.
//
// A line is
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// (mount id, parent id, major:minor, root, mount point, mount options,
// optional fields up to "-", then file system type, source and the file
// system's own "super" options); paths escape blanks, tabs, newlines and
// backslashes as \ooo.
package mountinfo

import (
	"bufio"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Mount is one line of a mount table.
type Mount struct {
	Dir    string // mount point
	Root   string // directory of the mounted file system shown at Dir ("/" unless a bind mount of a subdirectory)
	Dev    string // major:minor
	FsType string // "ext4", "cgroup2", "fuse.nacre"
	Source string
	// Options are the mount's options ("rw,relatime"), SuperOptions the
	// file system's ("rw,cpu,cpuacct" for a cgroup v1 hierarchy),
	// comma-separated as the kernel lists them.
	Options, SuperOptions string
}

// ReadOnly says whether the mount is read-only.
func (m Mount) ReadOnly() bool { return hasOption(m.Options, "ro") }

// HasSuperOption says whether the file system's options include opt (a
// cgroup v1 hierarchy lists its controllers there).
func (m Mount) HasSuperOption(opt string) bool { return hasOption(m.SuperOptions, opt) }

func hasOption(list, opt string) bool { return slices.Contains(strings.Split(list, ","), opt) }

// Read reads the mount table in the file path (/proc/self/mountinfo,
// /proc/PID/mountinfo).
func Read(path string) ([]Mount, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f), nil
}

// Parse reads a mount table in the format of /proc/self/mountinfo; lines
// that are not mounts are passed over.
func Parse(r io.Reader) []Mount {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i := 6; i < len(fields); i++ {
			if fields[i] == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 6 || sep < 0 || sep+2 >= len(fields) {
			continue
		}
		m := Mount{Root: Unescape(fields[3]), Dir: Unescape(fields[4]), Dev: fields[2], Options: fields[5],
			FsType: fields[sep+1], Source: Unescape(fields[sep+2])}
		if sep+3 < len(fields) {
			m.SuperOptions = fields[sep+3]
		}
		out = append(out, m)
	}
	return out
}

// Unescape undoes the kernel's \ooo escapes (space, tab, newline,
// backslash) in a field of a mount table.
func Unescape(s string) string {
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
