package cli

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"syscall"

	"nacre/internal/client"
	"nacre/internal/fid"
)

// RmOpts are rm's options.
type RmOpts struct {
	Recursive bool // remove directories and their contents
	Force     bool // a name that does not exist is no error
}

// Rm removes files, and directories with o.Recursive, as rm(1): every
// operand is tried; with o.Force a missing one is no error. It refuses
// the file system root and paths ending in . or .., as rm does.
func Rm(ctx context.Context, e Env, args []string, o RmOpts) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("rm")
	for i, op := range ops {
		if op.Err == nil {
			op.Err = rm(ctx, c, op, o, r)
		}
		if op.Err != nil {
			if o.Force && errors.Is(op.Err, syscall.ENOENT) {
				continue
			}
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
		}
	}
	return r.result()
}

// errTreeReported: removeTree reported what it could not remove.
var errTreeReported = errors.New("directory not empty: its contents could not all be removed (see above)")

func rm(ctx context.Context, c *client.Client, op operand, o RmOpts, r *reporter) error {
	switch base := path.Base(strings.TrimRight(op.Arg, "/")); {
	case op.AtMountPoint:
		return fmt.Errorf("refusing to remove the mount point %s (unmount it first, or name the directory by its path from the file system root)", op.Mount)
	case strings.Trim(op.Path, "/") == "":
		return fmt.Errorf("refusing to remove the file system root")
	case base == "." || base == "..":
		return fmt.Errorf("refusing to remove . or ..")
	}
	parent, name, err := c.ResolveParent(ctx, op.Path)
	if err != nil {
		return err
	}
	ino, err := c.Lookup(ctx, fidOf(parent), name)
	if err != nil {
		return err
	}
	if !isDir(ino) {
		if strings.HasSuffix(op.Arg, "/") {
			return fmt.Errorf("not a directory")
		}
		_, err := c.Unlink(ctx, fidOf(parent), name)
		return err
	}
	if !o.Recursive {
		return fmt.Errorf("is a directory (use -r to remove it and its contents)")
	}
	if !removeTree(ctx, c, fidOf(ino), strings.TrimSuffix(op.Arg, "/"), r) {
		return errTreeReported
	}
	if err := c.Rmdir(ctx, fidOf(parent), name); err != nil && !(errors.Is(err, syscall.ENOENT) && o.Force) {
		return err
	}
	return nil
}

// removeTree empties a directory (shown as p in messages), reporting each
// entry it cannot remove and going on with the others; it returns whether
// the directory is empty.
func removeTree(ctx context.Context, c *client.Client, dir fid.FID, p string, r *reporter) bool {
	for {
		ents, err := c.ReadDirAll(ctx, dir, false)
		if err != nil {
			r.fail(p, err)
			return false
		}
		if len(ents) == 0 {
			return true
		}
		ok := true
		var files []string
		for _, en := range ents {
			if ctx.Err() != nil {
				return false
			}
			name := string(en.Name)
			child := p + "/" + name
			if en.Type != syscall.S_IFDIR>>12 {
				files = append(files, name)
				continue
			}
			if !removeTree(ctx, c, fid.FromPB(en.Fid), child, r) {
				ok = false
				continue
			}
			if err := c.Rmdir(ctx, dir, name); err != nil && !errors.Is(err, syscall.ENOENT) {
				r.fail(child, err)
				ok = false
			}
		}
		for i, err := range unlinkAll(ctx, c, dir, files) {
			if err != nil && !errors.Is(err, syscall.ENOENT) && ctx.Err() == nil {
				r.fail(p+"/"+files[i], err)
				ok = false
			}
		}
		if !ok || ctx.Err() != nil {
			return false
		}
		// Entries made meanwhile: read again.
	}
}

// rmWorkers is how many unlinks of one directory rm -r keeps in flight:
// each waits for the MDT's durable commit, which takes the concurrent ones
// in one sync, so one at a time removed trees at a third of the rate
// they were made.
const rmWorkers = 8

// unlinkAll unlinks names in dir, rmWorkers at a time, and returns each
// one's error.
func unlinkAll(ctx context.Context, c *client.Client, dir fid.FID, names []string) []error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, rmWorkers)
	for i, name := range names {
		if ctx.Err() != nil {
			break // interrupted: the caller says so once
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, errs[i] = c.Unlink(ctx, dir, name)
		}()
	}
	wg.Wait()
	return errs
}
