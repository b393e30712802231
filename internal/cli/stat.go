package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	pb "nacre/api/nacrepb"
)

// StatInfo is the JSON form of `nacre stat`.
type StatInfo struct {
	Path   string `json:"path"`
	FID    string `json:"fid"`
	Type   string `json:"type"`
	Mode   string `json:"mode"`
	Nlink  uint32 `json:"nlink"`
	UID    uint32 `json:"uid"`
	GID    uint32 `json:"gid"`
	ProjID uint32 `json:"projid"`
	Size   uint64 `json:"size"`
	Blocks uint64 `json:"blocks"`
	Atime  string `json:"atime"`
	Mtime  string `json:"mtime"`
	Ctime  string `json:"ctime"`
	Target string `json:"symlink_target,omitempty"`
	// Error: why the path could not be stat'ed (one of several operands;
	// stat exits 1); only path is then given.
	Error string `json:"error,omitempty"`
}

// MarshalJSON gives a path that could not be stat'ed as {path, error}:
// zeros in the other fields would read as a real file.
func (si StatInfo) MarshalJSON() ([]byte, error) {
	type plain StatInfo // without this method
	if si.Error == "" {
		return json.Marshal(plain(si))
	}
	return json.Marshal(struct {
		Path  string `json:"path"`
		Error string `json:"error"`
	}{si.Path, si.Error})
}

// Stat prints the attributes of each path (a symbolic link's own). With
// asJSON it prints a StatInfo for one path, an array of them for several.
func Stat(ctx context.Context, e Env, args []string, asJSON bool) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("stat")
	var infos []StatInfo
	for i, op := range ops {
		if op.Err == nil {
			var ino *pb.Inode
			if ino, op.Err = c.Resolve(ctx, op.Path, false); op.Err == nil {
				si := statInfo(op.Arg, ino)
				infos = append(infos, si)
				if !asJSON {
					writeStat(e.Out, si, ino.Mode)
				}
			}
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
			if len(args) > 1 {
				// The array has an element per operand, in order, so
				// that a script can pair them up and see which failed.
				why := strings.TrimPrefix(operandMessage("stat", op.Arg, op.Err), "stat "+op.Arg+": ")
				infos = append(infos, StatInfo{Path: op.Arg, Error: why})
			}
		}
	}
	if asJSON {
		if err := jsonOneOrMany(e.Out, len(args), infos); err != nil {
			return err
		}
	}
	return r.result()
}

func statInfo(arg string, ino *pb.Inode) StatInfo {
	ts := func(ns int64) string { return time.Unix(0, ns).Format(time.RFC3339Nano) }
	return StatInfo{Path: arg, FID: fidOf(ino).String(), Type: typeName(ino.Mode), Mode: fmt.Sprintf("%04o", ino.Mode&0o7777),
		Nlink: ino.Nlink, UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid, Size: ino.Size, Blocks: ino.Blocks,
		Atime: ts(ino.AtimeNs), Mtime: ts(ino.MtimeNs), Ctime: ts(ino.CtimeNs), Target: string(ino.Symlink)}
}

// writeStat is stat's text; the path and a link's target are quoted at a
// terminal (showNames).
func writeStat(w io.Writer, si StatInfo, mode uint32) {
	show := showNames(w)
	fmt.Fprintf(w, "  File: %s", show(si.Path))
	if si.Target != "" {
		fmt.Fprintf(w, " -> %s", show(si.Target))
	}
	fmt.Fprintf(w, "\n   FID: %s\n  Size: %-12d Blocks: %-8d %s\n", si.FID, si.Size, si.Blocks, si.Type)
	fmt.Fprintf(w, "Access: (%s/%s)  Uid: %d  Gid: %d  Links: %d  Project: %d\n", si.Mode, ModeString(mode), si.UID, si.GID, si.Nlink, si.ProjID)
	fmt.Fprintf(w, "Access: %s\nModify: %s\nChange: %s\n", si.Atime, si.Mtime, si.Ctime)
}
