// Package cli implements the client-side `nacre` commands (ls, put, get,
// stat, setstripe, df, status, ...) on top of the client library: option
// structs in, formatted text or JSON out. cmd/nacre only parses flags.
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
)

// Env is what every command needs.
type Env struct {
	MGS   string
	Out   io.Writer
	Err   io.Writer
	Stdin io.Reader // nil: os.Stdin (put -)
	// Paths resolves path arguments (see paths.go); nil: this process's
	// current directory and mounts.
	Paths *PathEnv
	// MountState is where mount daemons record themselves, with their MGS
	// (fusefs.StateDir; "": fusefs.StateDir("")).
	MountState string
	// FollowerReads spreads the reads of the command's client over the
	// replicas of each MDT (client.Config.FollowerReads).
	FollowerReads bool
}

// OSTDownAfter is how long a command's I/O waits for an OST that cannot
// be reached before it fails naming the OST (client.Config.OSTDownAfter):
// long enough for an OST that restarts to come back, short enough that a
// user is told at once that one is down.
const OSTDownAfter = 5 * time.Second

// Connect opens a client, with a message that says how to fix a missing
// or unreachable MGS.
func (e Env) Connect(ctx context.Context) (*client.Client, error) {
	if e.MGS == "" {
		return nil, fmt.Errorf("no MGS address: pass --mgs HOST:PORT or set NACRE_MGS (`nacre up` prints it)")
	}
	return client.New(ctx, client.Config{MGS: e.MGS, Timeout: 30 * time.Second, OSTDownAfter: OSTDownAfter, FailFast: true, FollowerReads: e.FollowerReads})
}

// open resolves path arguments (PathEnv.Resolve) and connects to the file
// system they are on.
func (e Env) open(ctx context.Context, args ...string) (*client.Client, []string, error) {
	mgs, paths, err := e.ResolvePaths(args...)
	if err != nil {
		return nil, nil, err
	}
	e.MGS = mgs
	c, err := e.Connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, paths, nil
}

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

func stderr(e Env) io.Writer {
	if e.Err != nil {
		return e.Err
	}
	return os.Stderr
}
