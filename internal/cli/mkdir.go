package cli

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
)

// Mkdir makes directories (and their parents with parents; then an
// existing directory is no error).
// A mode of -1 is mkdir(1)'s default: 0777 less the umask (which the MDT
// applies, unless the parent has a default ACL); parents made by -p also
// get u+wx, as mkdir -p gives them.
// With on set, each directory named is made on MDT *on (-1: the one
// with the most free inodes, chosen for each).
func Mkdir(ctx context.Context, e Env, args []string, parents bool, mode int, on *int) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("mkdir")
	for i, op := range ops {
		if op.Err == nil {
			op.Err = mkdir(ctx, c, op.Path, parents, mode, on)
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
		}
	}
	return r.result()
}

func mkdir(ctx context.Context, c *client.Client, p string, parents bool, mode int, on *int) error {
	var mdt *uint32
	if on != nil {
		idx := uint32(*on)
		if *on < 0 {
			var err error
			if idx, err = emptiestMDT(ctx, c); err != nil {
				return err
			}
		}
		mdt = &idx
	}
	made := func(parent fid.FID, name string, last bool) (*pb.Inode, error) {
		m, mask := uint32(0o777), umask()
		switch {
		case mode >= 0 && last:
			m, mask = uint32(mode), 0
		case !last:
			m = (0o777 &^ mask) | 0o300
			mask = 0
		}
		o := client.CreateOpts{Exclusive: true, Umask: mask}
		if last {
			o.MDT = mdt
		}
		ino, _, err := c.Create(ctx, parent, name, syscall.S_IFDIR|m&0o7777, o)
		return ino, err
	}
	if !parents {
		parent, name, err := c.ResolveParent(ctx, p)
		if errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("no such file or directory: a parent directory is missing (-p makes parents)")
		}
		if err != nil {
			return err
		}
		_, err = made(fidOf(parent), name, true)
		return err
	}
	parts := strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
	cur := fid.Root
	done := "/"
	for i, part := range parts {
		done = path.Join(done, part)
		ino, err := c.Lookup(ctx, cur, part)
		if errors.Is(err, syscall.ENOENT) {
			ino, err = made(cur, part, i == len(parts)-1)
			if errors.Is(err, syscall.EEXIST) {
				ino, err = c.Lookup(ctx, cur, part)
			}
		}
		if err == nil && ino.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			ino, err = c.Resolve(ctx, done, true) // a symbolic link to a directory is followed
		}
		if err != nil {
			return err
		}
		if !isDir(ino) {
			return fmt.Errorf("%s is not a directory", done)
		}
		cur = fidOf(ino)
	}
	return nil
}

// emptiestMDT is where mkdir -i -1 puts a directory: the MDT with the
// most free inodes; of those tied (within 5 %, as MDTs whose stores
// share a device are), the one that holds the fewest, then the lowest
// index.
func emptiestMDT(ctx context.Context, c *client.Client) (uint32, error) {
	st, err := c.MDTStatfs(ctx)
	if err != nil {
		return 0, fmt.Errorf("read the MDTs' free inodes (for -i -1): %w", err)
	}
	idx, ok := pickEmptiest(st)
	if !ok {
		return 0, fmt.Errorf("no MDT answered statfs (for -i -1)")
	}
	return idx, nil
}

func pickEmptiest(st map[uint32]*pb.Statfs) (uint32, bool) {
	used := func(s *pb.Statfs) uint64 { return s.InodesTotal - s.InodesFree }
	better := func(a, b uint32) bool {
		sa, sb := st[a], st[b]
		// Free counts within 5 % of each other are a tie (Lustre's QOS
		// threshold): on one device they differ by what changed between
		// two reads.
		hi, lo := max(sa.InodesFree, sb.InodesFree), min(sa.InodesFree, sb.InodesFree)
		switch {
		case hi-lo > hi/20:
			return sa.InodesFree > sb.InodesFree
		case used(sa) != used(sb):
			return used(sa) < used(sb)
		}
		return a < b
	}
	best, found := uint32(0), false
	for idx := range st {
		if !found || better(idx, best) {
			best, found = idx, true
		}
	}
	return best, found
}
