package client

import (
	"context"
	"errors"
	"strings"
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

func asErrno(err error, target **errno.Errno) bool { return errors.As(err, target) }

// maxSymlinks bounds symlink expansion during path resolution (as Linux).
const maxSymlinks = 40

// Resolve looks up a path relative to the file system root ("/a/b" and
// "a/b" are the same). Symlinks in the middle are followed; the last
// component's symlink is followed only if follow is set.
func (c *Client) Resolve(ctx context.Context, path string, follow bool) (*pb.Inode, error) {
	return c.resolve(ctx, path, follow, true)
}

// ResolveMeta is Resolve for what needs only metadata (a layout, a FID):
// a file whose size the MDT does not know exactly keeps the size it has,
// so that a file on an OST that is down still resolves.
func (c *Client) ResolveMeta(ctx context.Context, path string, follow bool) (*pb.Inode, error) {
	return c.resolve(ctx, path, follow, false)
}

func (c *Client) resolve(ctx context.Context, path string, follow, exactSize bool) (*pb.Inode, error) {
	cur, err := c.Getattr(ctx, fid.Root)
	if err != nil {
		return nil, err
	}
	parts := splitPath(path)
	// A trailing slash names a directory, through a final symlink too
	// (POSIX): "file/" is ENOTDIR.
	dirOnly := strings.HasSuffix(path, "/") && len(parts) > 0
	if dirOnly {
		follow = true
	}
	links := 0
	for i := 0; i < len(parts); i++ {
		name := parts[i]
		switch name {
		case ".":
			continue
		case "..":
			p, err := c.parentOf(ctx, cur)
			if err != nil {
				return nil, err
			}
			cur = p
			continue
		}
		if cur.Mode&syscall.S_IFMT != syscall.S_IFDIR {
			return nil, &errno.Errno{Op: "resolve " + path, Errno: syscall.ENOTDIR}
		}
		parent := cur
		next, err := c.Lookup(ctx, fid.FromPB(cur.Fid), name)
		if err != nil {
			var down *MDTDownError
			if errors.As(err, &down) {
				return nil, err // names the MDT, not a path to fix
			}
			return nil, &errno.Errno{Op: "resolve " + path, Errno: errno.ToErrno(err), Msg: err.Error()}
		}
		last := i == len(parts)-1
		if next.Mode&syscall.S_IFMT == syscall.S_IFLNK && (!last || follow) {
			links++
			if links > maxSymlinks {
				return nil, &errno.Errno{Op: "resolve " + path, Errno: syscall.ELOOP}
			}
			target := string(next.Symlink)
			rest := append(splitPath(target), parts[i+1:]...)
			if strings.HasPrefix(target, "/") {
				// Absolute targets are taken relative to the file system root.
				if cur, err = c.Getattr(ctx, fid.Root); err != nil {
					return nil, err
				}
			} else {
				cur = parent
			}
			parts, i = rest, -1
			continue
		}
		cur = next
	}
	if dirOnly && cur.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, &errno.Errno{Op: "resolve " + path, Errno: syscall.ENOTDIR, Msg: "a path ending in / names a directory"}
	}
	if exactSize && cur.Mode&syscall.S_IFMT == syscall.S_IFREG {
		if err := c.glimpseIfDirty(ctx, cur); err != nil {
			return nil, err
		}
	}
	return cur, nil
}

func (c *Client) parentOf(ctx context.Context, dir *pb.Inode) (*pb.Inode, error) {
	f := fid.FromPB(dir.Fid)
	if f == fid.Root {
		return dir, nil
	}
	ino, err := c.GetattrLinks(ctx, f)
	if err != nil {
		return nil, err
	}
	if len(ino.Links) == 0 {
		return nil, &errno.Errno{Op: "resolve ..", Errno: syscall.ENOENT}
	}
	return c.Getattr(ctx, fid.FromPB(ino.Links[0].Parent))
}

// ResolveParent resolves everything but the last component and returns
// the parent directory and the last name.
func (c *Client) ResolveParent(ctx context.Context, path string) (*pb.Inode, string, error) {
	parts := splitPath(path)
	if len(parts) == 0 {
		return nil, "", &errno.Errno{Op: "resolve " + path, Errno: syscall.EINVAL, Msg: "the root has no parent"}
	}
	name := parts[len(parts)-1]
	if name == "." || name == ".." {
		return nil, "", &errno.Errno{Op: "resolve " + path, Errno: syscall.EINVAL, Msg: "path ends in . or .."}
	}
	p, err := c.Resolve(ctx, strings.Join(parts[:len(parts)-1], "/"), true)
	if err != nil {
		return nil, "", err
	}
	if p.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, "", &errno.Errno{Op: "resolve " + path, Errno: syscall.ENOTDIR}
	}
	return p, name, nil
}

func splitPath(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}
