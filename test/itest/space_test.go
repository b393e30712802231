package itest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/reserve"
	"nacre/internal/server"
	"nacre/internal/target"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestAFullOSTKeepsWorking puts OST0000 on a small tmpfs and fills it
// through a file striped on it. Before this was handled, the last bytes
// went to file data, the OST's store could then no longer flush, and the
// OST hung at its next start, silently, inside its store's open; files
// also kept being placed on the full OST in their round-robin turn. Now:
// the write that would eat into the OST's store reserve fails with ENOSPC
// naming the OST and the fix; new files go to the OST with room, also
// from a directory that asks for OST0000 first; the full OST restarts;
// and once files are removed it takes new files again.
func TestAFullOSTKeepsWorking(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	// nr_inodes=0: a file system without an inode limit (as btrfs), which
	// reports no inodes at all; the OST must not look out of inodes.
	onTmpfs(t, cl, "ost0", "size=256m,nr_inodes=0")

	c := cl.Client(t)
	ctx := context.Background()
	d := dirOnOST0(t, c)
	before := []byte("written before the OST filled up\n")
	kept := createIn(t, c, d, "kept", before)
	if o := ostOf(kept); o != 0 {
		t.Fatalf("a file of a directory set to start on OST0000 is on OST%04x", o)
	}

	// Fill OST0000 until it refuses.
	big, _, err := c.Create(ctx, d, "big", 0o644, client.CreateOpts{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if ostOf(big) != 0 {
		t.Fatalf("big is on OST%04x, not OST0000", ostOf(big))
	}
	f := c.OpenInode(big)
	chunk := bytes.Repeat([]byte{0xa5}, 1<<20)
	var werr error
	written := uint64(0)
	for i := 0; i < 512 && werr == nil; i++ {
		if _, werr = f.WriteAt(ctx, chunk, written); werr == nil {
			written += uint64(len(chunk))
			if i%8 == 7 {
				werr = f.Sync(ctx)
			}
		}
	}
	if werr == nil {
		werr = f.Sync(ctx)
	}
	f.Close(ctx)
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("after %d MiB on a 256 MiB OST: want ENOSPC, got %v", written>>20, werr)
	}
	if msg := werr.Error(); !strings.Contains(msg, "OST0000 is full") || !strings.Contains(msg, "remove files") {
		t.Errorf("the ENOSPC does not name the full OST and the fix: %v", werr)
	}
	// The store keeps two 4 MiB memtables and 16 MiB (server.StoreOptions
	// gives a 256 MiB device small memtables).
	keep := reserve.Bytes(256<<20, server.StoreOptions(target.OST, 256<<20).MemTable())
	if written > 256<<20-keep {
		t.Errorf("%d MiB of data went onto a 256 MiB device: the store's reserve of %d MiB was not kept", written>>20, keep>>20)
	}
	// Nor much more than it: the OST's store must be sized to the device
	// too (it once took the default memtables, and kept 80 MiB of 256).
	if written < 256<<20-keep-24<<20 {
		t.Errorf("only %d MiB of data went onto a 256 MiB device whose store keeps %d MiB", written>>20, keep>>20)
	}
	t.Logf("OST0000 took %d MiB, then: %v", written>>20, werr)

	// df counts the store's reserve as not available: OST0000 shows 100 %.
	wait.NoErr(t, 10*time.Second, "df to show OST0000 full once it refused writes", func() error {
		out, err := cl.Run("df", "--json")
		var d cli.DfJSON
		if err != nil || json.Unmarshal([]byte(out), &d) != nil {
			t.Fatalf("df --json: %v\n%s", err, out)
		}
		for _, r := range d.Targets {
			if strings.HasSuffix(r.Name, "OST0000") && r.UsePercent != nil && *r.UsePercent == 100 && r.BytesAvail < 4<<20 {
				return nil
			}
		}
		return errors.New(out)
	})

	// The MDT learns it (heartbeat, then its configuration refresh) and
	// places new files on OST0001, even where the directory asks for
	// OST0000 first.
	probes := 0
	wait.For(t, 15*time.Second, "new files to leave out the full OST0000", func() bool {
		probes++
		return ostOf(createIn(t, c, d, "probe"+itoa(probes), nil)) == 1
	})
	for i := 0; i < 4; i++ {
		if o := ostOf(createIn(t, c, d, "after"+itoa(i), nil)); o != 0x1 {
			t.Errorf("file %d created while OST0000 is full is on OST%04x", i, o)
		}
	}

	// A put that asks for both OSTs is refused, saying which is full and
	// what to do (it said to wait for the OSTs to come up).
	out, err := cl.Run("put", "-c", "2", "/etc/hostname", "/two")
	for _, w := range []string{"OST0000 is full", "remove files to make room", "give -c 1"} {
		if err == nil || !strings.Contains(out, w) {
			t.Errorf("put -c 2 with OST0000 full: want a failure saying %q, got %v: %s", w, err, out)
		}
	}
	if strings.Contains(out, "once the OSTs are up") {
		t.Errorf("put -c 2 with OST0000 full tells the user to wait for OSTs: %s", out)
	}

	// The full OST restarts (its store opens and replays) and serves
	// what it holds.
	cl.Kill("ost0", syscall.SIGTERM)
	cl.Restart()
	c2 := cl.Client(t)
	if got := readAll(t, c2, kept); !bytes.Equal(got, before) {
		t.Errorf("after the full OST restarted, kept reads %q, want %q", got, before)
	}

	// Removing the big file makes room; OST0000 takes new files again.
	if _, err := c2.Unlink(ctx, d, "big"); err != nil {
		t.Fatal(err)
	}
	probes = 0
	wait.For(t, 20*time.Second, "OST0000 to take new files once the big file was removed", func() bool {
		probes++
		return ostOf(createIn(t, c2, d, "again"+itoa(probes), nil)) == 0
	})
}

// dirOnOST0 makes the directory /d, whose files get one stripe, on
// OST0000.
func dirOnOST0(t *testing.T, c *client.Client) fid.FID {
	t.Helper()
	ctx := context.Background()
	dir, _, err := c.Create(ctx, fid.Root, "d", syscall.S_IFDIR|0o755, client.CreateOpts{Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	d := fid.FromPB(dir.Fid)
	if _, err := c.SetLayout(ctx, d, &pb.Layout{StripeCount: 1, StripeOffset: 0, StripeSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	return d
}

// onTmpfs stops the target name, moves its directory onto a tmpfs
// mounted in its place with the given options, starts it again and
// returns the directory; the tmpfs is unmounted when the test ends, after
// the cluster is stopped.
func onTmpfs(t *testing.T, cl *testcluster.Cluster, name, opts string) string {
	t.Helper()
	dir := cl.TargetDir(name)
	cl.Kill(name, syscall.SIGTERM)
	hold := filepath.Join(t.TempDir(), "hold")
	if out, err := exec.Command("cp", "-a", dir, hold).CombinedOutput(); err != nil {
		t.Fatalf("copy %s: %v\n%s", dir, err, out)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "nacre-test", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s (the test needs root): %v\n%s", dir, err, out)
	}
	t.Cleanup(func() {
		cl.Stop()
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
			// Detach it anyway, so that the test's directory can go.
			exec.Command("umount", "-l", dir).Run()
		}
	})
	if out, err := exec.Command("cp", "-a", hold+"/.", dir+"/").CombinedOutput(); err != nil {
		t.Fatalf("copy back %s: %v\n%s", dir, err, out)
	}
	cl.Restart()
	return dir
}

// createIn creates name in dir with data (none if nil) and returns its
// inode.
func createIn(t *testing.T, c *client.Client, dir fid.FID, name string, data []byte) *pb.Inode {
	t.Helper()
	ctx := context.Background()
	ino, _, err := c.Create(ctx, dir, name, 0o644, client.CreateOpts{Exclusive: true})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if data != nil {
		f := c.OpenInode(ino)
		if _, err := f.WriteAt(ctx, data, 0); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		if err := f.Close(ctx); err != nil {
			t.Fatalf("close %s: %v", name, err)
		}
	}
	return ino
}

func ostOf(ino *pb.Inode) uint32 {
	if ino.Layout == nil || len(ino.Layout.Objects) == 0 {
		return ^uint32(0)
	}
	return ino.Layout.Objects[0].Ost
}

func readAll(t *testing.T, c *client.Client, ino *pb.Inode) []byte {
	t.Helper()
	ctx := context.Background()
	f, err := c.Open(ctx, fid.FromPB(ino.Fid), os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(ctx)
	buf := make([]byte, 4096)
	n, err := f.ReadAt(ctx, buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return buf[:n]
}

// TestAFullMDTRefusesNewNamesAndRecovers fills the MDT's device with
// something else's file (a device shared with another tenant): creates
// then fail with ENOSPC naming the MDT while removals still work, and
// once the space is back creates work again. Without the reserve the
// MDT's store took the last bytes and its memtable flush then failed
// for good.
func TestAFullMDTRefusesNewNamesAndRecovers(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	mdt := onTmpfs(t, cl, "mdt0", "size=512m")
	c := cl.Client(t)
	createIn(t, c, fid.Root, "before", []byte("x"))

	// Leave half the MDT's reserve free.
	junk := filepath.Join(mdt, "junk")
	if out, err := exec.Command("fallocate", "-l", strconv.FormatUint(shortOf(t, mdt), 10), junk).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v\n%s", err, out)
	}
	refusesNewNames(t, c, "MDT0000 is full", junk)
}

// shortOf is how many bytes to take on the device of MDT directory dir so
// that half the reserve its store keeps is left.
func shortOf(t *testing.T, dir string) uint64 {
	t.Helper()
	u, err := reserve.Statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	keep := reserve.Bytes(u.Total, server.StoreOptions(target.MDT, u.Total).MemTable())
	return u.Avail - keep/2
}

// refusesNewNames checks an MDT whose device is short (of space or
// inodes, taken by junk): a create fails with ENOSPC and a message with
// want, a removal works, and once junk is gone a create works again (the
// guard looks again at once when it would refuse).
func refusesNewNames(t *testing.T, c *client.Client, want, junk string) {
	t.Helper()
	ctx := context.Background()
	// The guard may go on with the view it took before junk was made for
	// up to reserve.RefreshEvery; its next look sees junk. (Waiting out
	// that period is the behaviour under test: a create must be refused
	// once it has passed, with no retry.)
	time.Sleep(2 * reserve.RefreshEvery)
	_, _, err := c.Create(ctx, fid.Root, "refused", 0o644, client.CreateOpts{Exclusive: true})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), want) {
		t.Fatalf("a create on a short MDT: want ENOSPC with %q, got %v", want, err)
	}
	if _, err := c.Unlink(ctx, fid.Root, "before"); err != nil {
		t.Errorf("a removal on a short MDT: %v", err)
	}
	if err := os.RemoveAll(junk); err != nil {
		t.Fatal(err)
	}
	createIn(t, c, fid.Root, "after", []byte("y"))
}

// TestAnMDTOutOfInodesRefusesNewNamesAndRecovers: another tenant of the
// MDT's device takes its inodes; creates fail with ENOSPC naming the MDT
// and the cause before the store's own inodes are gone, removals still
// work, and creates work again once the inodes are back.
func TestAnMDTOutOfInodesRefusesNewNamesAndRecovers(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	mdt := onTmpfs(t, cl, "mdt0", "size=512m,nr_inodes=2000")
	c := cl.Client(t)
	createIn(t, c, fid.Root, "before", []byte("x"))

	// Leave fewer free inodes than the store keeps.
	junk := filepath.Join(mdt, "junk")
	if err := os.Mkdir(junk, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		u, err := reserve.Statfs(mdt)
		if err != nil {
			t.Fatal(err)
		}
		if u.FilesFree < reserve.Inodes/2 {
			break
		}
		if err := os.WriteFile(filepath.Join(junk, itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	refusesNewNames(t, c, "MDT0000 is out of inodes", junk)
}

// TestAnOSTOutOfInodesKeepsWorking puts OST0000 on a device with few
// inodes and writes into files placed there while it still had many (an
// empty file takes no inode on the OST; its first write makes one). The
// OST refuses the writes that would take the inodes its own store needs,
// with ENOSPC naming it and the cause, restarts, and takes writes again
// once files are removed. Before, the writes took the last inode and the
// store could not make a new file: the OST did not start again.
func TestAnOSTOutOfInodesKeepsWorking(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	onTmpfs(t, cl, "ost0", "size=512m,nr_inodes=1400")

	c := cl.Client(t)
	ctx := context.Background()
	d := dirOnOST0(t, c)
	var files []*pb.Inode
	for i := 0; i < 1200; i++ {
		if ino := createIn(t, c, d, "f"+itoa(i), nil); ostOf(ino) == 0 {
			files = append(files, ino)
		}
	}
	if len(files) < 1100 {
		t.Fatalf("only %d of 1200 files went to OST0000, which had room for their objects", len(files))
	}
	write := func(ino *pb.Inode) error {
		f := c.OpenInode(ino)
		_, err := f.WriteAt(ctx, []byte("x"+fid.FromPB(ino.Fid).String()), 0)
		if cerr := f.Close(ctx); err == nil {
			err = cerr
		}
		return err
	}
	var werr error
	written := 0
	for _, ino := range files {
		if werr = write(ino); werr != nil {
			break
		}
		written++
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("after %d files written on a device of 1400 inodes: want ENOSPC, got %v", written, werr)
	}
	if msg := werr.Error(); !strings.Contains(msg, "OST0000 is out of inodes") || !strings.Contains(msg, "remove files") {
		t.Errorf("the ENOSPC does not name the OST, the cause and the fix: %v", werr)
	}
	t.Logf("OST0000 took %d files, then: %v", written, werr)
	var st syscall.Statfs_t
	if err := syscall.Statfs(cl.TargetDir("ost0"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Ffree < 200 {
		t.Errorf("the OST's device has %d free inodes left: its store's reserve was not kept", st.Ffree)
	}

	// The OST restarts (its store makes new files to open) and serves
	// what it holds.
	cl.Kill("ost0", syscall.SIGTERM)
	cl.Restart()
	c2 := cl.Client(t)
	first := files[0]
	if got, want := readAll(t, c2, first), "x"+fid.FromPB(first.Fid).String(); string(got) != want {
		t.Errorf("after the OST restarted, the first file reads %q, want %q", got, want)
	}

	// Removing written files frees their inodes: the rest can be written.
	for i := 0; i < written/2; i++ {
		if _, err := c2.Unlink(ctx, d, "f"+itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	next := files[written]
	wait.NoErr(t, 30*time.Second, fmt.Sprintf("a write to work once %d files were removed", written/2), func() error {
		f := c2.OpenInode(next)
		_, err := f.WriteAt(ctx, []byte("again"), 0)
		if cerr := f.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("a write once %d files were removed: %v", written/2, err)
		}
		return err
	})
}

// TestAFullFollowerReplicaStopsNewNames: one follower replica of a
// three-replica MDT sits on a device with less free space than its
// store's reserve. The leader, whose own device has room, refuses new
// names with ENOSPC naming that replica, since the follower would apply
// them too; removals still work; once the follower has room again,
// creates work again. Before, the leader took the names and the follower
// filled its device.
func TestAFullFollowerReplicaStopsNewNames(t *testing.T) {
	cl := startReplicated(t)
	leader := waitLeader(t, cl, "mdt0")
	follower := aFollower(t, cl, "mdt0", leader)
	dir := onTmpfs(t, cl, follower, "size=512m")
	if l := waitLeader(t, cl, "mdt0"); l != leader {
		t.Fatalf("leadership moved from %s to %s while %s restarted", leader, l, follower)
	}
	c := cl.Client(t)
	ctx := context.Background()
	createIn(t, c, fid.Root, "before", []byte("x"))

	// Leave half its reserve free on the follower's device.
	junk := filepath.Join(dir, "junk")
	if out, err := exec.Command("fallocate", "-l", strconv.FormatUint(shortOf(t, dir), 10), junk).CombinedOutput(); err != nil {
		t.Fatalf("fallocate: %v\n%s", err, out)
	}
	// The leader hears of it through the follower's heartbeat to the MGS.
	probes := 0
	wait.For(t, 15*time.Second, "the leader to refuse new names once a follower's device filled up", func() bool {
		probes++
		_, _, err := c.Create(ctx, fid.Root, "probe"+itoa(probes), 0o644, client.CreateOpts{Exclusive: true})
		if err == nil {
			return false
		}
		if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "replica") || !strings.Contains(err.Error(), "is full") {
			t.Fatalf("a create while a follower is full: want ENOSPC naming the replica, got %v", err)
		}
		t.Logf("refused: %v", err)
		return true
	})
	if _, err := c.Unlink(ctx, fid.Root, "before"); err != nil {
		t.Errorf("a removal while a follower is full: %v", err)
	}
	if err := os.Remove(junk); err != nil {
		t.Fatal(err)
	}
	wait.NoErr(t, 15*time.Second, "a create to work once the follower's space came back", func() error {
		_, _, err := c.Create(ctx, fid.Root, "after", 0o644, client.CreateOpts{Exclusive: true})
		if err != nil && !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("after the follower's space came back: %v", err)
		}
		return err
	})
}
