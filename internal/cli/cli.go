// Package cli implements the client-side `nacre` commands (ls, put, get,
// stat, setstripe, df, status, replica, ...) on top of the client library,
// one file per command: option structs in, formatted text or JSON out.
// Env (env.go) is what every command, these and the checker's
// (internal/lfsck/admin), runs with: the MGS, the output, and the one way
// to connect. cmd/nacre only parses flags. The package links neither the
// servers nor their store: a command that needs a local cluster directory
// gets it through an interface (ReplicaHost).
package cli

import (
	"encoding/json"
	"io"
	"syscall"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"
	"golang.org/x/sys/unix"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// JSON writes v as indented JSON.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(w io.Writer) table.Writer {
	t := table.NewWriter()
	t.SetOutputMirror(w)
	s := table.StyleLight
	s.Options.DrawBorder = false
	s.Options.SeparateColumns = true
	s.Options.SeparateHeader = true
	s.Format.Header = text.FormatDefault
	t.SetStyle(s)
	return t
}

// typeChar is the ls -l type letter.
func typeChar(mode uint32) byte {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return 'd'
	case syscall.S_IFLNK:
		return 'l'
	case syscall.S_IFIFO:
		return 'p'
	case syscall.S_IFSOCK:
		return 's'
	case syscall.S_IFCHR:
		return 'c'
	case syscall.S_IFBLK:
		return 'b'
	}
	return '-'
}

// ModeString formats a mode like ls -l (drwxr-xr-x).
func ModeString(mode uint32) string {
	b := []byte{typeChar(mode)}
	const rwx = "rwxrwxrwx"
	for i := 0; i < 9; i++ {
		if mode&(1<<(8-i)) != 0 {
			b = append(b, rwx[i])
		} else {
			b = append(b, '-')
		}
	}
	if mode&syscall.S_ISUID != 0 {
		b[3] = sOrS(b[3], 's')
	}
	if mode&syscall.S_ISGID != 0 {
		b[6] = sOrS(b[6], 's')
	}
	if mode&syscall.S_ISVTX != 0 {
		b[9] = sOrS(b[9], 't')
	}
	return string(b)
}

func sOrS(cur, lower byte) byte {
	if cur == '-' {
		return lower - 32
	}
	return lower
}

func isDir(ino *pb.Inode) bool { return ino.Mode&syscall.S_IFMT == syscall.S_IFDIR }
func isReg(ino *pb.Inode) bool { return ino.Mode&syscall.S_IFMT == syscall.S_IFREG }

func fidOf(ino *pb.Inode) fid.FID { return fid.FromPB(ino.Fid) }

// umask is the process's file mode creation mask.
func umask() uint32 {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return uint32(m)
}

func typeName(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "directory"
	case syscall.S_IFLNK:
		return "symbolic link"
	case syscall.S_IFIFO:
		return "fifo"
	case syscall.S_IFSOCK:
		return "socket"
	case syscall.S_IFCHR:
		return "character device"
	case syscall.S_IFBLK:
		return "block device"
	}
	return "regular file"
}

// jsonOneOrMany prints the result of a command given n operands: the one
// object for one operand (when it succeeded), an array for several.
func jsonOneOrMany[T any](w io.Writer, n int, items []T) error {
	if n == 1 {
		if len(items) == 0 {
			return nil
		}
		return JSON(w, items[0])
	}
	if items == nil {
		items = []T{}
	}
	return JSON(w, items)
}

// IsTerminal says whether w is a terminal: a file (or a writer over one
// that gives its descriptor, as cmd/nacre's count of what a command
// writes to standard output does, so that the wrapper does not hide the
// terminal) that answers a terminal's ioctl; /dev/null, a character
// device too, does not.
func IsTerminal(w any) bool {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// showNames is how a command shows names (from the file system, or as
// given) on w: quoted (QuoteName) at a terminal, so that no name moves the
// cursor, colours the screen or makes a line of its own; as they are
// elsewhere, where scripts read them.
func showNames(w io.Writer) func(string) string {
	if IsTerminal(w) {
		return QuoteName
	}
	return func(name string) string { return name }
}
