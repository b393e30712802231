package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/client"
	"nacre/internal/fid"
)

// Dir is a backend's handle for a directory: a FID for the client
// library, a path for a mounted file system.
type Dir any

// Backend is what a metadata benchmark drives: the Nacre client library
// directly, or any mounted file system through system calls.
type Backend interface {
	// Name describes the target for reports.
	Name() string
	Mkdir(ctx context.Context, parent Dir, name string) (Dir, error)
	Rmdir(ctx context.Context, parent Dir, name string) error
	// Create makes a file and writes data into it (mdtest -w), then closes.
	Create(ctx context.Context, parent Dir, name string, data []byte) error
	Stat(ctx context.Context, parent Dir, name string) error
	// StatXattrs is what `ls -l` asks of each file: its attributes
	// without following a symlink, its security label and its access ACL
	// (absent ones are no error).
	StatXattrs(ctx context.Context, parent Dir, name string) error
	// Read opens a file, reads up to len(buf) bytes and closes it.
	Read(ctx context.Context, parent Dir, name string, buf []byte) error
	Unlink(ctx context.Context, parent Dir, name string) error
	// Rename gives the object from of parent the name to in parent.
	Rename(ctx context.Context, parent Dir, from, to string) error
	// Link makes name in dir another hard link to the file target of
	// from.
	Link(ctx context.Context, from Dir, target string, dir Dir, name string) error
	Close() error
}

// ClientBackend drives the client library; each worker gets its own
// client (its own connections), like mdtest's separate ranks.
type ClientBackend struct {
	c *client.Client
	// Root is the directory the benchmark works in.
	Root fid.FID
	// targets are the FIDs of link targets looked up so far, as a
	// kernel's dentry cache keeps them: the link phase measures links.
	targets map[string]fid.FID
}

// NewClientBackend connects a client configured by cfg.
func NewClientBackend(ctx context.Context, cfg client.Config) (*ClientBackend, error) {
	c, err := client.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &ClientBackend{c: c, Root: fid.Root}, nil
}

func (b *ClientBackend) Name() string { return "nacre client library" }

func (b *ClientBackend) Mkdir(ctx context.Context, parent Dir, name string) (Dir, error) {
	ino, err := b.c.Mkdir(ctx, parent.(fid.FID), name, 0o755)
	if err != nil {
		return nil, err
	}
	return fid.FromPB(ino.Fid), nil
}

func (b *ClientBackend) Rmdir(ctx context.Context, parent Dir, name string) error {
	return b.c.Rmdir(ctx, parent.(fid.FID), name)
}

func (b *ClientBackend) Rename(ctx context.Context, parent Dir, from, to string) error {
	_, err := b.c.Move(ctx, parent.(fid.FID), from, parent.(fid.FID), to, 0)
	return err
}

func (b *ClientBackend) Create(ctx context.Context, parent Dir, name string, data []byte) error {
	ino, _, err := b.c.Create(ctx, parent.(fid.FID), name, syscall.S_IFREG|0o644, client.CreateOpts{Exclusive: true})
	if err != nil || len(data) == 0 {
		return err
	}
	f := b.c.OpenInode(ino)
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		return err
	}
	return f.Close(ctx)
}

func (b *ClientBackend) Stat(ctx context.Context, parent Dir, name string) error {
	_, err := b.c.Lookup(ctx, parent.(fid.FID), name)
	return err
}

// StatXattrs asks the MDS for the attributes only where the looked-up
// inode's flags do not already say there are none, as the FUSE mount does.
func (b *ClientBackend) StatXattrs(ctx context.Context, parent Dir, name string) error {
	ino, err := b.c.Lookup(ctx, parent.(fid.FID), name)
	if err != nil {
		return err
	}
	f := fid.FromPB(ino.Fid)
	if ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_NO_XATTRS) == 0 {
		if _, err := b.c.Getxattr(ctx, f, "security.selinux"); err != nil && !absentXattr(err) {
			return err
		}
	}
	if ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_ACL) != 0 {
		if _, err := b.c.Getxattr(ctx, f, acl.XattrAccess); err != nil && !absentXattr(err) {
			return err
		}
	}
	return nil
}

func (b *ClientBackend) Read(ctx context.Context, parent Dir, name string, buf []byte) error {
	ino, err := b.c.Lookup(ctx, parent.(fid.FID), name)
	if err != nil || len(buf) == 0 {
		return err
	}
	_, err = b.c.OpenInode(ino).ReadAt(ctx, buf, 0)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return err
}

func (b *ClientBackend) Unlink(ctx context.Context, parent Dir, name string) error {
	_, err := b.c.Unlink(ctx, parent.(fid.FID), name)
	return err
}

func (b *ClientBackend) Link(ctx context.Context, from Dir, target string, dir Dir, name string) error {
	key := from.(fid.FID).String() + "/" + target
	f, ok := b.targets[key]
	if !ok {
		ino, err := b.c.Lookup(ctx, from.(fid.FID), target)
		if err != nil {
			return err
		}
		f = fid.FromPB(ino.Fid)
		if b.targets == nil {
			b.targets = map[string]fid.FID{}
		}
		b.targets[key] = f
	}
	_, err := b.c.Link(ctx, f, dir.(fid.FID), name)
	return err
}

func (b *ClientBackend) Close() error { return b.c.Close() }

// Client is the underlying client (setup work such as layouts).
func (b *ClientBackend) Client() *client.Client { return b.c }

// PathBackend drives any mounted file system with system calls.
type PathBackend struct{ Root string }

func (b PathBackend) Name() string { return "path " + b.Root }

func (b PathBackend) Mkdir(ctx context.Context, parent Dir, name string) (Dir, error) {
	p := filepath.Join(parent.(string), name)
	return p, os.Mkdir(p, 0o755)
}

func (b PathBackend) Rmdir(ctx context.Context, parent Dir, name string) error {
	return syscall.Rmdir(filepath.Join(parent.(string), name))
}

func (b PathBackend) Rename(ctx context.Context, parent Dir, from, to string) error {
	return syscall.Rename(filepath.Join(parent.(string), from), filepath.Join(parent.(string), to))
}

func (b PathBackend) Create(ctx context.Context, parent Dir, name string, data []byte) error {
	fd, err := syscall.Open(filepath.Join(parent.(string), name), syscall.O_CREAT|syscall.O_EXCL|syscall.O_WRONLY|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return &os.PathError{Op: "create", Path: name, Err: err}
	}
	for len(data) > 0 {
		n, err := syscall.Write(fd, data)
		if err != nil {
			syscall.Close(fd)
			return &os.PathError{Op: "write", Path: name, Err: err}
		}
		data = data[n:]
	}
	return syscall.Close(fd)
}

func (b PathBackend) Stat(ctx context.Context, parent Dir, name string) error {
	var st syscall.Stat_t
	return syscall.Stat(filepath.Join(parent.(string), name), &st)
}

func (b PathBackend) StatXattrs(ctx context.Context, parent Dir, name string) error {
	p := filepath.Join(parent.(string), name)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return &os.PathError{Op: "lstat", Path: name, Err: err}
	}
	buf := make([]byte, 256)
	if _, err := unix.Lgetxattr(p, "security.selinux", buf); err != nil && !absentXattr(err) {
		return &os.PathError{Op: "lgetxattr", Path: name, Err: err}
	}
	if _, err := unix.Getxattr(p, acl.XattrAccess, nil); err != nil && !absentXattr(err) {
		return &os.PathError{Op: "getxattr", Path: name, Err: err}
	}
	return nil
}

// absentXattr: the attribute is not there, or the file system keeps none
// of its kind.
func absentXattr(err error) bool {
	return errors.Is(err, unix.ENODATA) || errors.Is(err, unix.EOPNOTSUPP)
}

func (b PathBackend) Read(ctx context.Context, parent Dir, name string, buf []byte) error {
	fd, err := syscall.Open(filepath.Join(parent.(string), name), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	if len(buf) > 0 {
		if _, err := syscall.Read(fd, buf); err != nil {
			syscall.Close(fd)
			return &os.PathError{Op: "read", Path: name, Err: err}
		}
	}
	return syscall.Close(fd)
}

func (b PathBackend) Unlink(ctx context.Context, parent Dir, name string) error {
	return syscall.Unlink(filepath.Join(parent.(string), name))
}

func (b PathBackend) Link(ctx context.Context, from Dir, target string, dir Dir, name string) error {
	return os.Link(filepath.Join(from.(string), target), filepath.Join(dir.(string), name))
}

func (b PathBackend) Close() error { return nil }

// checkPath refuses a benchmark directory that does not exist.
func checkPath(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return fmt.Errorf("--path %s: %w (give an existing directory on the file system to measure)", p, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("--path %s is not a directory", p)
	}
	return nil
}
