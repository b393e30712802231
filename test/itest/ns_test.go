package itest

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/nstest"
	"nacre/test/testcluster"
)

// clientNS runs the conformance suite through the client library.
type clientNS struct {
	c   *client.Client
	ctx context.Context
	// mdts > 1 makes each directory of the root on MDT k % mdts for the
	// k-th one made (remote directories): every scenario then runs in a
	// tree of one MDT, the root's or another.
	mdts int
	made *int
}

func (n clientNS) Create(p fid.FID, name string, mode uint32, excl bool) (*pb.Inode, error) {
	ino, _, err := n.c.Create(n.ctx, p, name, mode, client.CreateOpts{Exclusive: excl})
	return ino, err
}
func (n clientNS) Mkdir(p fid.FID, name string, mode uint32) (*pb.Inode, error) {
	if n.mdts > 1 && p == fid.Root {
		on := uint32(*n.made % n.mdts)
		*n.made++
		ino, _, err := n.c.Create(n.ctx, p, name, syscall.S_IFDIR|mode&0o7777, client.CreateOpts{Exclusive: true, MDT: &on})
		return ino, err
	}
	return n.c.Mkdir(n.ctx, p, name, mode)
}
func (n clientNS) Symlink(p fid.FID, name, target string) (*pb.Inode, error) {
	return n.c.Symlink(n.ctx, p, name, target)
}
func (n clientNS) Link(f, p fid.FID, name string) (*pb.Inode, error) {
	return n.c.Link(n.ctx, f, p, name)
}
func (n clientNS) Unlink(p fid.FID, name string) error {
	_, err := n.c.Unlink(n.ctx, p, name)
	return err
}
func (n clientNS) Rmdir(p fid.FID, name string) error { return n.c.Rmdir(n.ctx, p, name) }
func (n clientNS) Rename(sp fid.FID, sn string, dp fid.FID, dn string, flags uint32) error {
	return n.c.Rename(n.ctx, sp, sn, dp, dn, flags)
}
func (n clientNS) Lookup(p fid.FID, name string) (*pb.Inode, error) {
	return n.c.Lookup(n.ctx, p, name)
}
func (n clientNS) Getattr(f fid.FID) (*pb.Inode, error) { return n.c.Getattr(n.ctx, f) }
func (n clientNS) Readdir(f fid.FID) ([]string, error) {
	var names []string
	var cookie uint64
	for {
		// Small pages exercise the cookies.
		ents, eof, err := n.c.Readdir(n.ctx, f, cookie, 13, false)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			names = append(names, string(e.Name))
			cookie = e.Cookie
		}
		if eof {
			return names, nil
		}
	}
}
func (n clientNS) Setattr(op *pb.SetattrOp) (*pb.Inode, error) { return n.c.Setattr(n.ctx, op) }
func (n clientNS) Setxattr(f fid.FID, name string, v []byte, flags uint32) error {
	return n.c.Setxattr(n.ctx, f, name, v, flags)
}
func (n clientNS) Getxattr(f fid.FID, name string) ([]byte, error) {
	return n.c.Getxattr(n.ctx, f, name)
}
func (n clientNS) Listxattr(f fid.FID) ([]string, error) { return n.c.Listxattr(n.ctx, f) }
func (n clientNS) Removexattr(f fid.FID, name string) error {
	return n.c.Removexattr(n.ctx, f, name)
}
func (n clientNS) As(uid, gid uint32) nstest.NS {
	n.ctx = client.WithCred(context.Background(), &pb.Cred{Uid: uid, Gid: gid})
	return n
}

func TestNamespaceConformanceThroughServers(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	c := cl.Client(t)
	nstest.Run(t, clientNS{c: c, ctx: client.WithCred(context.Background(), &pb.Cred{})})
}

// TestNamespaceConformanceOnSeveralMDTs runs the suite on 2 and 4 MDTs,
// each scenario in a directory of the next MDT in turn (remote
// directories of the root, or the root's own MDT).
func TestNamespaceConformanceOnSeveralMDTs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts clusters of 2 and 4 MDTs")
	}
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprintf("%dMDTs", n), func(t *testing.T) {
			cl := testcluster.Start(t, testcluster.Options{MDTs: n, OSTs: 1})
			c := cl.Client(t)
			made := 0
			nstest.Run(t, clientNS{c: c, ctx: client.WithCred(context.Background(), &pb.Cred{}), mdts: n, made: &made})
			if made < 2*n {
				t.Fatalf("only %d case directories were made over %d MDTs", made, n)
			}
		})
	}
}

// TestReaddirOfLargeDirectoryIsCompleteAndStable lists a directory with
// many entries in pages and checks every name appears once.
func TestReaddirOfLargeDirectoryIsCompleteAndStable(t *testing.T) {
	n := 20000
	if os.Getenv("NACRE_ITEST_LONG") != "" {
		n = 1000000 // the million-entry directory
	}
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	c := cl.Client(t)
	ctx := context.Background()
	d, err := c.Mkdir(ctx, fid.Root, "big", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	dir := fid.FromPB(d.Fid)
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		go func(w int) {
			for i := w; i < n; i += 8 {
				if _, err := c.Mkdir(ctx, dir, name(i), 0o755); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	for w := 0; w < 8; w++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	seen := make(map[string]bool, n)
	var cookie uint64
	for {
		ents, eof, err := c.Readdir(ctx, dir, cookie, 500, true)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if seen[string(e.Name)] {
				t.Fatalf("%s listed twice", e.Name)
			}
			seen[string(e.Name)] = true
			if e.Inode == nil || e.Inode.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				t.Fatalf("readdirplus entry %s without directory attributes", e.Name)
			}
			cookie = e.Cookie
		}
		if eof {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("listed %d of %d entries", len(seen), n)
	}
	if got, _ := c.Getattr(ctx, dir); got.Nlink != uint32(n+2) {
		t.Fatalf("nlink %d, want %d", got.Nlink, n+2)
	}
}

func name(i int) string { return "d" + itoa(i) }

func itoa(i int) string {
	const digits = "0123456789"
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{digits[i%10]}, b...)
	}
	return string(b)
}

func fidOf(ino *pb.Inode) fid.FID { return fid.FromPB(ino.Fid) }
