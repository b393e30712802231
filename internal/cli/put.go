package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/errno"
)

// copyBuf is the size of one put/get call: 16 stripes of 1 MiB in flight.
const copyBuf = 16 << 20

// Put copies a local file into the file system; local "-" is standard
// input (e.Stdin if set). It writes a temporary file in the destination's
// directory and renames it over the destination once every byte is
// written and durable, so an interrupted or failed put leaves the
// destination as it was (and removes the temporary file; only a client
// killed outright leaves one behind). The destination is a new file with
// the source's permission bits less the umask, as cp (from standard input: 0666 less it,
// as a shell redirection) and the layout asked, else the layout of the
// file it replaces, else its directory's default. A file that would get
// fewer stripes than the first two ask is not written (checkStripes).
// Holes of the source, and blocks of zeros, stay holes (copyIn).
func Put(ctx context.Context, e Env, local, remoteArg string, so StripeOpts) error {
	var src io.Reader
	var perm uint32
	if local == "-" {
		src = e.Stdin
		if src == nil {
			src = os.Stdin
		}
		perm = 0o666
	} else {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("put %s: is a directory (copy files one by one)", local)
		}
		// As cp(1) makes a new file: the source's bits less the umask
		// (the MDT applies it, unless the directory has a default ACL,
		// which replaces it as in the kernel).
		src, perm = f, uint32(st.Mode().Perm())
	}
	l, err := so.layout()
	if err != nil {
		return err
	}
	c, ps, err := e.open(ctx, remoteArg)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := so.checkOSTs(ctx, c); err != nil {
		return err
	}
	remote := ps[0]
	intoDir := strings.HasSuffix(remoteArg, "/")
	if !intoDir {
		if ino, err := c.Resolve(ctx, remote, true); err == nil && isDir(ino) {
			intoDir = true
		}
	}
	if intoDir {
		if local == "-" {
			return fmt.Errorf("put - %s: is a directory; name the file to write standard input to (put - %s/NAME)", remoteArg, strings.TrimSuffix(remoteArg, "/"))
		}
		remote = strings.TrimSuffix(remote, "/") + "/" + path.Base(local)
	}
	parent, name, err := c.ResolveParent(ctx, remote)
	if err != nil {
		return opError("put", remoteArg, err)
	}
	if len(name) > 255 {
		// Known now, not after the data is copied (the rename would
		// refuse it).
		return opError("put", remoteArg, &errno.Errno{Op: "name", Errno: syscall.ENAMETOOLONG, Msg: fmt.Sprintf("a name of %d bytes (at most 255)", len(name))})
	}
	dir := fidOf(parent)
	asked := fmt.Sprintf("asked (-c %d)", so.Count)
	if l == nil {
		// Replacing a file keeps its layout (as `lfs setstripe F; cp S F`).
		if old, err := c.Lookup(ctx, dir, name); err == nil && isReg(old) && old.Layout != nil {
			l = &pb.Layout{Pattern: old.Layout.Pattern, StripeCount: old.Layout.StripeCount, StripeSize: old.Layout.StripeSize, StripeOffset: old.Layout.StripeOffset}
			asked = "of the file it replaces"
		}
	}
	tmp := partialName(name)
	ino, _, err := c.Create(ctx, dir, tmp, syscall.S_IFREG|perm, client.CreateOpts{Exclusive: true, Layout: l, Umask: umask()})
	if err != nil {
		if mdtDown(err) || errors.Is(err, syscall.ENOSPC) {
			return opError("put", remoteArg, err)
		}
		return fmt.Errorf("put %s: %w", remoteArg, err) // err names tmp
	}
	done := false
	defer func() {
		if done {
			return
		}
		// Also after an interrupt (ctx is cancelled then).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := c.Unlink(cctx, dir, tmp); err != nil && !errors.Is(err, syscall.ENOENT) {
			fmt.Fprintf(e.Stderr(), "nacre: put %s: could not remove the partial file %s: %v\n", remoteArg, tmp, err)
		}
	}()
	if err := checkStripes(ctx, c, l, ino, asked); err != nil {
		return fmt.Errorf("put %s: %w", remoteArg, err)
	}
	f := c.OpenInode(ino)
	what := local
	if local == "-" {
		what = "standard input"
	}
	total := int64(-1) // standard input: not known
	if lf, ok := src.(*os.File); ok && local != "-" {
		if st, err := lf.Stat(); err == nil && st.Mode().IsRegular() {
			total = st.Size()
		}
	}
	p := newProgress(e, "put "+remoteArg, total)
	_, err = copyIn(ctx, f, src, local != "-", what, p)
	p.end()
	if err != nil {
		var re *remoteError
		if errors.As(err, &re) {
			return opError("put", remoteArg, re.err)
		}
		return err
	}
	if err := f.Close(ctx); err != nil {
		return opError("put", remoteArg, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.Rename(ctx, dir, tmp, dir, name, 0); err != nil {
		if mdtDown(err) {
			return opError("put", remoteArg, err)
		}
		return fmt.Errorf("put %s: rename %s over it: %w", remoteArg, tmp, err)
	}
	done = true
	return nil
}
