package cli

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"
)

// Ln makes a hard link (symbolic: a symbolic link) to TARGET named LINK
// (args: TARGET LINK), or to each TARGET in the directory LINK (args:
// TARGET... DIRECTORY; also when LINK is a directory), named as the
// target. A symbolic link's target is stored as given; a hard link's
// target is a path argument like the link.
func Ln(ctx context.Context, e Env, args []string, symbolic bool) error {
	if len(args) < 2 {
		return fmt.Errorf("ln: give a target and a link name")
	}
	targets, linkArg := args[:len(args)-1], args[len(args)-1]
	resolve := []string{linkArg}
	if !symbolic {
		resolve = append(resolve, targets...)
	}
	c, ops, err := e.openEach(ctx, resolve)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	link := ops[0]
	if link.Err != nil {
		return fmt.Errorf("ln: link %s: %w", linkArg, link.Err)
	}
	into, err := targetDir(ctx, c, link, len(targets), "linking")
	if err != nil {
		return fmt.Errorf("ln: %w", err)
	}
	r := e.reporter("ln")
	for i, t := range targets {
		var err error
		if !symbolic {
			err = ops[i+1].Err
		}
		if err == nil {
			err = func() error {
				name, nameArg := link.Path, linkArg
				if into {
					base := path.Base(strings.TrimRight(t, "/"))
					name = strings.TrimSuffix(name, "/") + "/" + base
					nameArg = strings.TrimSuffix(nameArg, "/") + "/" + base
				}
				lp, ln, err := c.ResolveParent(ctx, name)
				if err != nil {
					return atOtherPath("as", nameArg, err)
				}
				if symbolic {
					_, err = c.Symlink(ctx, fidOf(lp), ln, t)
					return atOtherPath("as", nameArg, err)
				}
				ti, err := c.Resolve(ctx, ops[i+1].Path, false)
				if err != nil {
					return err
				}
				if isDir(ti) {
					return fmt.Errorf("is a directory (hard links to directories are not allowed)")
				}
				// As for mv: a missing name now is the target's.
				if _, err = c.Link(ctx, fidOf(ti), fidOf(lp), ln); err != nil && !errors.Is(err, syscall.ENOENT) {
					return atOtherPath("as", nameArg, err)
				}
				return err
			}()
		}
		if err != nil {
			if fatal(ctx, err) {
				return r.stop(targets, i, err)
			}
			r.fail(t, err)
		}
	}
	return r.result()
}
