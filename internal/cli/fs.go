package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/layout"
)

// Ls lists a directory (or describes a file), sorted by name. Without a
// path ("") it lists the current directory if that is on a Nacre mount,
// else the root.
func Ls(ctx context.Context, e Env, arg string, long bool) error {
	if arg == "" {
		arg = "/"
		if e.cwdOnMount() {
			arg = "."
		}
	}
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	p := ps[0]
	ino, err := c.Resolve(ctx, p, true)
	if err != nil {
		return err
	}
	type row struct {
		name string
		ino  *pb.Inode
	}
	var rows []row
	if isDir(ino) {
		ents, err := c.ReadDirAll(ctx, fidOf(ino), long)
		if err != nil {
			return err
		}
		for _, en := range ents {
			rows = append(rows, row{string(en.Name), en.Inode})
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	} else {
		rows = append(rows, row{path.Base(p), ino})
	}
	if !long {
		for _, r := range rows {
			fmt.Fprintln(e.Out, r.name)
		}
		return nil
	}
	for _, r := range rows {
		i := r.ino
		if i == nil {
			fmt.Fprintf(e.Out, "?????????? %s (no attributes)\n", r.name)
			continue
		}
		if isReg(i) && i.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0 {
			if s, err := c.Stat(ctx, fidOf(i)); err == nil {
				i = s
			}
		}
		name := r.name
		if i.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			name += " -> " + string(i.Symlink)
		}
		fmt.Fprintf(e.Out, "%s %3d %5d %5d %12d %s %s\n", ModeString(i.Mode), i.Nlink, i.Uid, i.Gid, i.Size,
			time.Unix(0, i.MtimeNs).Format("Jan _2 15:04"), name)
	}
	return nil
}

// Mkdir makes a directory (and its parents with parents).
func Mkdir(ctx context.Context, e Env, arg string, parents bool, mode uint32) error {
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	p := ps[0]
	if !parents {
		parent, name, err := c.ResolveParent(ctx, p)
		if err != nil {
			return err
		}
		_, err = c.Mkdir(ctx, fidOf(parent), name, mode)
		return err
	}
	cur := fid.Root
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		if part == "" {
			continue
		}
		ino, err := c.Lookup(ctx, cur, part)
		if errors.Is(err, syscall.ENOENT) {
			ino, err = c.Mkdir(ctx, cur, part, mode)
			if errors.Is(err, syscall.EEXIST) {
				ino, err = c.Lookup(ctx, cur, part)
			}
		}
		if err != nil {
			return err
		}
		if !isDir(ino) {
			return fmt.Errorf("mkdir %s: %s is not a directory", arg, part)
		}
		cur = fidOf(ino)
	}
	return nil
}

// StripeOpts are the -c/-S/-i options of put and setstripe.
type StripeOpts struct {
	Count  int    // 0 = default, -1 = all OSTs
	Size   uint64 // 0 = default
	Offset int    // -1 = any
}

func (s StripeOpts) layout() (*pb.Layout, error) {
	if s.Size != 0 {
		if err := layout.CheckStripeSize(s.Size); err != nil {
			return nil, err
		}
	}
	if s.Count < -1 || s.Count > layout.MaxStripeCount {
		return nil, fmt.Errorf("stripe count %d is invalid: use -1 (all OSTs) or 1..%d", s.Count, layout.MaxStripeCount)
	}
	if s.Count == 0 && s.Size == 0 && s.Offset < 0 {
		return nil, nil
	}
	return &pb.Layout{Pattern: 1, StripeCount: int32(s.Count), StripeSize: uint32(s.Size), StripeOffset: int32(s.Offset)}, nil
}

// checkOSTs refuses a first OST (-i) that the file system does not have.
func (s StripeOpts) checkOSTs(ctx context.Context, c *client.Client) error {
	if s.Offset < 0 {
		return nil
	}
	cfg, err := c.Config(ctx)
	if err != nil {
		return err
	}
	return checkOSTIndex(s.Offset, cfg.Targets)
}

func checkOSTIndex(index int, targets []*pb.TargetInfo) error {
	seen := map[uint32]bool{}
	for _, t := range targets {
		if t.Kind == pb.TargetKind_TARGET_OST {
			seen[t.Index] = true // once per OST, however many replicas
		}
	}
	if index >= 0 && index <= math.MaxUint32 && seen[uint32(index)] {
		return nil
	}
	idx := make([]int, 0, len(seen))
	for i := range seen {
		idx = append(idx, int(i))
	}
	sort.Ints(idx)
	valid := make([]string, len(idx))
	for k, i := range idx {
		valid[k] = strconv.Itoa(i)
	}
	if len(valid) == 0 {
		return fmt.Errorf("OST index %d: the file system has no OSTs", index)
	}
	return fmt.Errorf("OST index %d is not in the file system: valid indexes are %s", index, strings.Join(valid, ", "))
}

// copyBuf is the size of one put/get call: 16 stripes of 1 MiB in flight.
const copyBuf = 16 << 20

// partialSuffix marks the temporary file put writes (".NAME.nacre-partial-RANDOM"
// in the destination's directory) and get writes (LOCAL.nacre-partial).
const partialSuffix = ".nacre-partial"

// Put copies a local file into the file system. It writes a temporary file
// in the destination's directory and renames it over the destination once
// every byte is written and durable, so an interrupted or failed put
// leaves the destination as it was (and removes the temporary file; only a
// client killed outright leaves one behind). The destination is a new
// file with the source's permission bits and the layout asked, else the
// layout of the file it replaces, else its directory's default.
func Put(ctx context.Context, e Env, local, remoteArg string, so StripeOpts) error {
	src, err := os.Open(local)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	if st.IsDir() {
		return fmt.Errorf("put %s: is a directory (copy files one by one)", local)
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
	if strings.HasSuffix(remoteArg, "/") {
		remote = strings.TrimSuffix(remote, "/") + "/" + path.Base(local)
	} else if ino, err := c.Resolve(ctx, remote, true); err == nil && isDir(ino) {
		remote = strings.TrimSuffix(remote, "/") + "/" + path.Base(local)
	}
	parent, name, err := c.ResolveParent(ctx, remote)
	if err != nil {
		return err
	}
	dir := fidOf(parent)
	if l == nil {
		// Replacing a file keeps its layout (as `lfs setstripe F; cp S F`).
		if old, err := c.Lookup(ctx, dir, name); err == nil && isReg(old) && old.Layout != nil {
			l = &pb.Layout{Pattern: old.Layout.Pattern, StripeCount: old.Layout.StripeCount, StripeSize: old.Layout.StripeSize, StripeOffset: old.Layout.StripeOffset}
		}
	}
	tmp := partialName(name)
	ino, _, err := c.Create(ctx, dir, tmp, syscall.S_IFREG|uint32(st.Mode().Perm()), client.CreateOpts{Exclusive: true, Layout: l})
	if err != nil {
		return fmt.Errorf("put %s: create %s: %w", remoteArg, tmp, err)
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
			fmt.Fprintf(stderr(e), "nacre: put %s: could not remove the partial file %s: %v\n", remoteArg, tmp, err)
		}
	}()
	f := c.OpenInode(ino)
	buf := make([]byte, copyBuf)
	var off uint64
	for {
		n, rerr := io.ReadFull(src, buf)
		if n > 0 {
			if _, err := f.WriteAt(ctx, buf[:n], off); err != nil {
				return err
			}
			off += uint64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("read %s: %w", local, rerr)
		}
	}
	if err := f.Close(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.Rename(ctx, dir, tmp, dir, name, 0); err != nil {
		return fmt.Errorf("put %s: rename %s over it: %w", remoteArg, tmp, err)
	}
	done = true
	return nil
}

// partialName is the name of put's temporary file for name (at most 255
// bytes, so that any name that fits gets one).
func partialName(name string) string {
	var r [4]byte
	rand.Read(r[:])
	suffix := partialSuffix + "-" + hex.EncodeToString(r[:])
	if limit := 255 - 1 - len(suffix); len(name) > limit {
		name = name[:limit]
	}
	return "." + name + suffix
}

// Get copies a file out of the file system ("-" writes to standard output).
func Get(ctx context.Context, e Env, arg, local string) error {
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	remote := ps[0]
	ino, err := c.Resolve(ctx, remote, true)
	if err != nil {
		return err
	}
	if !isReg(ino) {
		return fmt.Errorf("get %s: not a regular file", arg)
	}
	var dst io.Writer = e.Out
	var out *os.File
	if local != "-" {
		if st, err := os.Stat(local); err == nil && st.IsDir() {
			local = local + "/" + path.Base(remote)
		}
		out, err = os.OpenFile(local+partialSuffix, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer func() {
			out.Close()
			os.Remove(local + partialSuffix)
		}()
		dst = out
	}
	if err := copyOut(ctx, c, ino, dst); err != nil {
		return err
	}
	if out != nil {
		if err := out.Sync(); err != nil {
			return err
		}
		if err := out.Close(); err != nil {
			return err
		}
		return os.Rename(local+partialSuffix, local)
	}
	return nil
}

func copyOut(ctx context.Context, c *client.Client, ino *pb.Inode, dst io.Writer) error {
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
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Cat writes files to the output.
func Cat(ctx context.Context, e Env, args []string) error {
	c, paths, err := e.open(ctx, args...)
	if err != nil {
		return err
	}
	defer c.Close()
	for i, p := range paths {
		ino, err := c.Resolve(ctx, p, true)
		if err != nil {
			return err
		}
		if !isReg(ino) {
			return fmt.Errorf("cat %s: not a regular file", args[i])
		}
		if err := copyOut(ctx, c, ino, e.Out); err != nil {
			return err
		}
	}
	return nil
}

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
}

func typeName(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "directory"
	case syscall.S_IFLNK:
		return "symbolic link"
	case syscall.S_IFIFO:
		return "fifo"
	case syscall.S_IFSOCK:
		return "socket"
	case syscall.S_IFCHR:
		return "character device"
	case syscall.S_IFBLK:
		return "block device"
	}
	return "regular file"
}

// Stat prints a file's attributes.
func Stat(ctx context.Context, e Env, arg string, asJSON bool) error {
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	p := ps[0]
	ino, err := c.Resolve(ctx, p, false)
	if err != nil {
		return err
	}
	ts := func(ns int64) string { return time.Unix(0, ns).Format(time.RFC3339Nano) }
	si := StatInfo{Path: arg, FID: fidOf(ino).String(), Type: typeName(ino.Mode), Mode: fmt.Sprintf("%04o", ino.Mode&0o7777),
		Nlink: ino.Nlink, UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid, Size: ino.Size, Blocks: ino.Blocks,
		Atime: ts(ino.AtimeNs), Mtime: ts(ino.MtimeNs), Ctime: ts(ino.CtimeNs), Target: string(ino.Symlink)}
	if asJSON {
		return JSON(e.Out, si)
	}
	fmt.Fprintf(e.Out, "  File: %s", arg)
	if si.Target != "" {
		fmt.Fprintf(e.Out, " -> %s", si.Target)
	}
	fmt.Fprintf(e.Out, "\n   FID: %s\n  Size: %-12d Blocks: %-8d %s\n", si.FID, si.Size, si.Blocks, si.Type)
	fmt.Fprintf(e.Out, "Access: (%s/%s)  Uid: %d  Gid: %d  Links: %d  Project: %d\n", si.Mode, ModeString(ino.Mode), si.UID, si.GID, si.Nlink, si.ProjID)
	fmt.Fprintf(e.Out, "Access: %s\nModify: %s\nChange: %s\n", si.Atime, si.Mtime, si.Ctime)
	return nil
}

// Rm removes files, and directories with recursive.
func Rm(ctx context.Context, e Env, args []string, recursive bool) error {
	c, paths, err := e.open(ctx, args...)
	if err != nil {
		return err
	}
	defer c.Close()
	for i, p := range paths {
		parent, name, err := c.ResolveParent(ctx, p)
		if err != nil {
			return err
		}
		ino, err := c.Lookup(ctx, fidOf(parent), name)
		if err != nil {
			return fmt.Errorf("rm %s: %w", args[i], err)
		}
		if isDir(ino) {
			if !recursive {
				return fmt.Errorf("rm %s: is a directory (use -r)", args[i])
			}
			if err := removeTree(ctx, c, fidOf(ino)); err != nil {
				return err
			}
			if err := c.Rmdir(ctx, fidOf(parent), name); err != nil {
				return err
			}
			continue
		}
		if _, err := c.Unlink(ctx, fidOf(parent), name); err != nil {
			return err
		}
	}
	return nil
}

func removeTree(ctx context.Context, c *client.Client, dir fid.FID) error {
	for {
		ents, err := c.ReadDirAll(ctx, dir, false)
		if err != nil {
			return err
		}
		if len(ents) == 0 {
			return nil
		}
		for _, en := range ents {
			if en.Type == syscall.S_IFDIR>>12 {
				if err := removeTree(ctx, c, fid.FromPB(en.Fid)); err != nil {
					return err
				}
				if err := c.Rmdir(ctx, dir, string(en.Name)); err != nil {
					return err
				}
			} else if _, err := c.Unlink(ctx, dir, string(en.Name)); err != nil && !errors.Is(err, syscall.ENOENT) {
				return err
			}
		}
	}
}

// Mv renames; a destination directory receives the source inside it.
func Mv(ctx context.Context, e Env, srcArg, dstArg string) error {
	c, ps, err := e.open(ctx, srcArg, dstArg)
	if err != nil {
		return err
	}
	defer c.Close()
	src, dst := ps[0], ps[1]
	sp, sn, err := c.ResolveParent(ctx, src)
	if err != nil {
		return err
	}
	if d, err := c.Resolve(ctx, dst, true); err == nil && isDir(d) {
		dst = strings.TrimSuffix(dst, "/") + "/" + sn
	}
	dp, dn, err := c.ResolveParent(ctx, dst)
	if err != nil {
		return err
	}
	return c.Rename(ctx, fidOf(sp), sn, fidOf(dp), dn, 0)
}

// Ln makes a hard link, or a symbolic link with symbolic.
// A symbolic link's target is stored as given; a hard link's target is a
// path argument like the link.
func Ln(ctx context.Context, e Env, targetArg, linkArg string, symbolic bool) error {
	args := []string{linkArg}
	if !symbolic {
		args = append(args, targetArg)
	}
	c, ps, err := e.open(ctx, args...)
	if err != nil {
		return err
	}
	defer c.Close()
	lp, ln, err := c.ResolveParent(ctx, ps[0])
	if err != nil {
		return err
	}
	if symbolic {
		_, err = c.Symlink(ctx, fidOf(lp), ln, targetArg)
		return err
	}
	t, err := c.Resolve(ctx, ps[1], false)
	if err != nil {
		return err
	}
	_, err = c.Link(ctx, fidOf(t), fidOf(lp), ln)
	return err
}

// Path2Fid prints the FID of each path.
func Path2Fid(ctx context.Context, e Env, args []string) error {
	c, paths, err := e.open(ctx, args...)
	if err != nil {
		return err
	}
	defer c.Close()
	for i, p := range paths {
		ino, err := c.Resolve(ctx, p, false)
		if err != nil {
			return err
		}
		if len(paths) > 1 {
			fmt.Fprintf(e.Out, "%s: ", args[i])
		}
		fmt.Fprintln(e.Out, fidOf(ino))
	}
	return nil
}

// Fid2Path prints every path of each FID.
func Fid2Path(ctx context.Context, e Env, fids []string) error {
	c, err := e.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, s := range fids {
		f, err := fid.Parse(s)
		if err != nil {
			return err
		}
		paths, err := c.Fid2Path(ctx, f)
		if err != nil {
			return err
		}
		for _, p := range paths {
			fmt.Fprintln(e.Out, p)
		}
	}
	return nil
}
