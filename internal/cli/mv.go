package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"nacre/internal/client"
)

// Mv renames SOURCE to DEST (args: SOURCE DEST), or moves each SOURCE
// into the directory DEST (args: SOURCE... DEST); a DEST that is a
// directory receives the source inside it.
func Mv(ctx context.Context, e Env, args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("mv: give a source and a destination")
	}
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	srcs, dst := ops[:len(ops)-1], ops[len(ops)-1]
	if dst.Err != nil {
		return fmt.Errorf("mv: destination %s: %w", dst.Arg, dst.Err)
	}
	into, err := targetDir(ctx, c, dst, len(srcs), "moving")
	if err != nil {
		return fmt.Errorf("mv: %w", err)
	}
	r := e.reporter("mv")
	for i, op := range srcs {
		if op.Err == nil {
			op.Err = func() error {
				sp, sn, err := c.ResolveParent(ctx, op.Path)
				if err != nil {
					return err
				}
				to, toArg := dst.Path, dst.Arg
				if into {
					to = strings.TrimSuffix(to, "/") + "/" + sn
					toArg = strings.TrimSuffix(toArg, "/") + "/" + sn
				}
				dp, dn, err := c.ResolveParent(ctx, to)
				if err != nil {
					return atOtherPath("to", toArg, err)
				}
				// The destination's directory exists: a missing name now is
				// the source's, anything else is about the destination.
				err = c.Rename(ctx, fidOf(sp), sn, fidOf(dp), dn, 0)
				if err != nil && !errors.Is(err, syscall.ENOENT) {
					return atOtherPath("to", toArg, err)
				}
				return err
			}()
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args[:len(srcs)], i, op.Err)
			}
			r.fail(op.Arg, op.Err)
		}
	}
	return r.result()
}

// targetDir reports whether dst, the last operand of mv or ln, is an
// existing directory that the n sources go into; several sources need one.
func targetDir(ctx context.Context, c *client.Client, dst operand, n int, doing string) (bool, error) {
	ino, err := c.Resolve(ctx, dst.Path, true)
	if err == nil && isDir(ino) {
		return true, nil
	}
	if n == 1 {
		return false, nil
	}
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return false, fmt.Errorf("target %s: %w", dst.Arg, err)
	}
	return false, fmt.Errorf("target %s is not a directory (%s several files needs one)", dst.Arg, doing)
}
