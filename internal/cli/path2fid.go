package cli

import (
	"context"
	"fmt"
	"strings"

	pb "nacre/api/nacrepb"
)

// PathFID is one result of `nacre path2fid --json`.
type PathFID struct {
	Path  string `json:"path"` // as given
	FID   string `json:"fid,omitempty"`
	Error string `json:"error,omitempty"` // why it failed (several operands)
}

// Path2Fid prints the FID of each path ("PATH: FID" when there are
// several). With asJSON it prints a PathFID for one path, an array of
// them for several.
func Path2Fid(ctx context.Context, e Env, args []string, asJSON bool) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("path2fid")
	show := showNames(e.Out)
	var out []PathFID
	for i, op := range ops {
		if op.Err == nil {
			var ino *pb.Inode
			if ino, op.Err = c.ResolveMeta(ctx, op.Path, false); op.Err == nil {
				out = append(out, PathFID{Path: op.Arg, FID: fidOf(ino).String()})
				if !asJSON {
					if len(args) > 1 {
						fmt.Fprintf(e.Out, "%s: ", show(op.Arg))
					}
					fmt.Fprintln(e.Out, fidOf(ino))
				}
			}
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
			if len(args) > 1 {
				// An element per operand, in order, as stat --json.
				why := strings.TrimPrefix(operandMessage("path2fid", op.Arg, op.Err), "path2fid "+op.Arg+": ")
				out = append(out, PathFID{Path: op.Arg, Error: why})
			}
		}
	}
	if asJSON {
		if err := jsonOneOrMany(e.Out, len(args), out); err != nil {
			return err
		}
	}
	return r.result()
}
