package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
)

// Get copies a file out of the file system ("-" writes to standard
// output), as cp(1) writes its destination: into LOCAL/NAME if LOCAL is a
// directory; through a symbolic link to the file it names (the link
// stays); straight into a FIFO, device or other file that is not a
// regular file (it is not replaced); and to a regular file, new or not,
// through a hidden temporary file beside it (".NAME.nacre-partial-XXXXXXXX",
// unique to this get) renamed over it once every byte is on the local
// disk, so that an interrupted or failed get leaves it as it was. A file
// replaced keeps its permission bits (and owner, where allowed); a new
// file gets the remote file's permission bits less the umask. Blocks of
// zeros become holes in a regular file written (sparseFile).
func Get(ctx context.Context, e Env, arg, local string) error {
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	remote := ps[0]
	ino, err := c.Resolve(ctx, remote, true)
	if err != nil {
		return opError("get", arg, err)
	}
	if !isReg(ino) {
		return fmt.Errorf("get %s: not a regular file", arg)
	}
	if local == "-" {
		p := newProgressBeside(e, "get "+arg, int64(ino.Size))
		defer p.end()
		if err := copyOut(ctx, c, ino, e.Out, p); err != nil {
			return opError("get", arg, err)
		}
		return nil
	}
	if st, err := os.Stat(local); err == nil && st.IsDir() {
		local = filepath.Join(local, path.Base(remote))
	}
	p := newProgress(e, "get "+arg, int64(ino.Size))
	err = writeLocal(local, os.FileMode(ino.Mode&0o777), func(w io.Writer) error {
		return copyOut(ctx, c, ino, w, p)
	})
	p.end()
	var le *localError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &le):
		return fmt.Errorf("get %s: %w", arg, err)
	}
	return opError("get", arg, err)
}

// copyOut writes the regular file ino to dst, keeping it (client.Hold)
// so that a removal elsewhere meanwhile does not cut the copy short; p is
// told how far the copy is.
func copyOut(ctx context.Context, c *client.Client, ino *pb.Inode, dst io.Writer, p *progress) error {
	// The OSTs serve any object: the read permission is asked here, as
	// the kernel asks before a mount reads.
	if ok, err := c.MayAccess(ctx, ino, 4); err != nil {
		return err
	} else if !ok {
		return syscall.EACCES
	}
	_, release, err := c.Hold(ctx, fidOf(ino))
	if err != nil {
		return err
	}
	defer release()
	f := c.OpenInode(ino)
	buf := make([]byte, copyBuf)
	var off uint64
	for {
		n, err := f.ReadAt(ctx, buf, off)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			off += uint64(n)
			p.at(off)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
