package itest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
	"nacre/internal/mds"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
)

// Exactly-once, made deterministic: the MDT leader executes a mutation
// and then loses its reply (fault point mds.reply.drop), so the client
// library retries the request with the same request id; in the failover
// variant the leader also hands its leadership to another replica before
// the reply is lost (mds.reply.stepdown), so the retry lands on the new
// leader. For create, mkdir, rename, unlink, link and setattr the client
// must get success with the original answer (the one the leader logged
// as dropped: same FID, link count and time), and the namespace must show
// one execution: a second one fails with EEXIST or ENOENT, gives a link
// count of 3, or moves ctime to the retry's time.

// droppedReply is what the leader logged when the fault point dropped a
// reply.
type droppedReply struct {
	op           string
	index        uint64
	timeNs       int64
	fid          string
	nlink        uint32
	mode         uint32
	ctimeNs      int64
	hasInode     bool
	errno        int64
	client, reqt uint64
}

// logRecords returns the JSON log records of a target with message msg.
func logRecords(t *testing.T, cl *testcluster.Cluster, name, msg string) []map[string]json.Number {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(cl.TargetDir(name), proc.LogFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]json.Number
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(msg)) {
			continue
		}
		var raw map[string]any
		d := json.NewDecoder(bytes.NewReader(line))
		d.UseNumber()
		if d.Decode(&raw) != nil || raw["msg"] != msg {
			continue
		}
		rec := map[string]json.Number{}
		for k, v := range raw {
			switch v := v.(type) {
			case json.Number:
				rec[k] = v
			case string:
				rec[k] = json.Number(v)
			}
		}
		out = append(out, rec)
	}
	return out
}

func droppedReplies(t *testing.T, cl *testcluster.Cluster, name string) []droppedReply {
	t.Helper()
	var out []droppedReply
	for _, r := range logRecords(t, cl, name, "fault point: reply dropped") {
		u := func(k string) uint64 { v, _ := strconv.ParseUint(string(r[k]), 10, 64); return v }
		i := func(k string) int64 { v, _ := strconv.ParseInt(string(r[k]), 10, 64); return v }
		_, has := r["fid"]
		out = append(out, droppedReply{op: string(r["op"]), index: u("index"), timeNs: i("time_ns"), fid: string(r["fid"]),
			nlink: uint32(u("nlink")), mode: uint32(u("mode")), ctimeNs: i("ctime_ns"), hasInode: has, errno: i("errno"),
			client: u("client"), reqt: u("request")})
	}
	return out
}

// armPoint arms a fault point in one replica's process.
func armPoint(t *testing.T, cl *testcluster.Cluster, name, point, action string, count uint32) []string {
	t.Helper()
	cc, err := grpcx.Dial(replicaAddr(t, cl, name))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := nacregrpc.NewFaultClient(cc).Arm(ctx, &pb.FaultArmRequest{Point: point, Action: action, Count: count}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatalf("arm %s=%s on %s: %v", point, action, name, err)
	}
	return r.Armed
}

// eoCase is one mutation of the table.
type eoCase struct {
	name string
	// prep makes what the operation works on (before the point is armed)
	// and returns the FID of the object it acts on, if any.
	prep func(t *testing.T, ctx context.Context, c *client.Client, dir fid.FID) fid.FID
	// do is the operation; it returns the inode the client library
	// returned (nil if it returns none).
	do func(ctx context.Context, c *client.Client, dir, obj fid.FID) (*pb.Inode, error)
	// check verifies that the operation was executed once.
	check func(t *testing.T, ctx context.Context, c *client.Client, dir, obj fid.FID, got *pb.Inode, drop droppedReply)
}

func eoCases() []eoCase {
	mkfile := func(name string, mode uint32) func(t *testing.T, ctx context.Context, c *client.Client, dir fid.FID) fid.FID {
		return func(t *testing.T, ctx context.Context, c *client.Client, dir fid.FID) fid.FID {
			t.Helper()
			// No OST objects: right after a leader change a create with
			// a layout waits for the new leader's pools.
			ino, _, err := c.Create(ctx, dir, name, mode, client.CreateOpts{Exclusive: true, DelayLayout: true})
			if err != nil {
				t.Fatalf("create %s: %v", name, err)
			}
			return fid.FromPB(ino.Fid)
		}
	}
	return []eoCase{
		{name: "create",
			do: func(ctx context.Context, c *client.Client, dir, _ fid.FID) (*pb.Inode, error) {
				ino, _, err := c.Create(ctx, dir, "new", 0o644, client.CreateOpts{Exclusive: true, Layout: &pb.Layout{StripeCount: 1}})
				return ino, err
			},
			check: func(t *testing.T, ctx context.Context, c *client.Client, dir, _ fid.FID, got *pb.Inode, drop droppedReply) {
				wantNames(t, ctx, c, dir, "new")
				if l := mustLookup(t, ctx, c, dir, "new"); fid.FromPB(l.Fid).String() != drop.fid {
					t.Fatalf("new is %s, the create that was executed made %s", fid.FromPB(l.Fid), drop.fid)
				}
			}},
		{name: "mkdir",
			do: func(ctx context.Context, c *client.Client, dir, _ fid.FID) (*pb.Inode, error) {
				return c.Mkdir(ctx, dir, "sub", 0o755)
			},
			check: func(t *testing.T, ctx context.Context, c *client.Client, dir, _ fid.FID, got *pb.Inode, drop droppedReply) {
				wantNames(t, ctx, c, dir, "sub")
				if l := mustLookup(t, ctx, c, dir, "sub"); fid.FromPB(l.Fid).String() != drop.fid {
					t.Fatalf("sub is %s, the mkdir that was executed made %s", fid.FromPB(l.Fid), drop.fid)
				}
				if d := mustGetattr(t, ctx, c, dir); d.Nlink != 3 {
					t.Fatalf("parent nlink %d after one mkdir, want 3", d.Nlink)
				}
			}},
		{name: "rename",
			prep: mkfile("a", 0o644),
			do: func(ctx context.Context, c *client.Client, dir, _ fid.FID) (*pb.Inode, error) {
				return nil, c.Rename(ctx, dir, "a", dir, "b", 0)
			},
			check: func(t *testing.T, ctx context.Context, c *client.Client, dir, obj fid.FID, _ *pb.Inode, drop droppedReply) {
				wantNames(t, ctx, c, dir, "b")
				if l := mustLookup(t, ctx, c, dir, "b"); fid.FromPB(l.Fid) != obj {
					t.Fatalf("b is %s, want the renamed %s", fid.FromPB(l.Fid), obj)
				}
				// The rename stamped the directory with its time.
				if d := mustGetattr(t, ctx, c, dir); d.MtimeNs != drop.timeNs {
					t.Fatalf("directory mtime %d, want the executed rename's time %d", d.MtimeNs, drop.timeNs)
				}
			}},
		{name: "unlink",
			prep: func(t *testing.T, ctx context.Context, c *client.Client, dir fid.FID) fid.FID {
				f := mkfile("a", 0o644)(t, ctx, c, dir)
				if _, err := c.Link(ctx, f, dir, "a2"); err != nil {
					t.Fatalf("link a2: %v", err)
				}
				return f
			},
			do: func(ctx context.Context, c *client.Client, dir, _ fid.FID) (*pb.Inode, error) {
				return c.Unlink(ctx, dir, "a")
			},
			check: func(t *testing.T, ctx context.Context, c *client.Client, dir, obj fid.FID, got *pb.Inode, _ droppedReply) {
				wantNames(t, ctx, c, dir, "a2")
				if got.Nlink != 1 {
					t.Fatalf("unlink answered nlink %d, want 1", got.Nlink)
				}
				if a := mustGetattr(t, ctx, c, obj); a.Nlink != 1 {
					t.Fatalf("nlink %d after removing one of two names, want 1", a.Nlink)
				}
			}},
		{name: "link",
			prep: mkfile("a", 0o644),
			do: func(ctx context.Context, c *client.Client, dir, obj fid.FID) (*pb.Inode, error) {
				return c.Link(ctx, obj, dir, "l")
			},
			check: func(t *testing.T, ctx context.Context, c *client.Client, dir, obj fid.FID, got *pb.Inode, _ droppedReply) {
				wantNames(t, ctx, c, dir, "a", "l")
				if got.Nlink != 2 {
					t.Fatalf("link answered nlink %d, want 2", got.Nlink)
				}
				if a := mustGetattr(t, ctx, c, obj); a.Nlink != 2 {
					t.Fatalf("nlink %d after one link, want 2", a.Nlink)
				}
			}},
		{name: "setattr",
			prep: mkfile("a", 0o600),
			// chmod is idempotent in the mode, not in ctime: a second
			// execution stamps the file with the retry's time.
			do: func(ctx context.Context, c *client.Client, _, obj fid.FID) (*pb.Inode, error) {
				return c.Setattr(ctx, &pb.SetattrOp{Fid: obj.PB(), Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o640})
			},
			check: func(t *testing.T, ctx context.Context, c *client.Client, _, obj fid.FID, got *pb.Inode, drop droppedReply) {
				a := mustGetattr(t, ctx, c, obj)
				if a.Mode&0o7777 != 0o640 {
					t.Fatalf("mode %o, want 0640", a.Mode&0o7777)
				}
				if a.CtimeNs != drop.timeNs {
					t.Fatalf("ctime %d, want the executed chmod's time %d (%v later: executed again)", a.CtimeNs, drop.timeNs, time.Duration(a.CtimeNs-drop.timeNs))
				}
			}},
	}
}

func wantNames(t *testing.T, ctx context.Context, c *client.Client, dir fid.FID, want ...string) {
	t.Helper()
	ents, err := c.ReadDirAll(ctx, dir, false)
	if err != nil {
		t.Fatalf("readdir: %v", err)
	}
	var got []string
	for _, e := range ents {
		if n := string(e.Name); n != "." && n != ".." {
			got = append(got, n)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("directory holds %q, want %q", got, want)
	}
}

func mustLookup(t *testing.T, ctx context.Context, c *client.Client, dir fid.FID, name string) *pb.Inode {
	t.Helper()
	ino, err := c.Lookup(ctx, dir, name)
	if err != nil {
		t.Fatalf("lookup %s: %v", name, err)
	}
	return ino
}

func mustGetattr(t *testing.T, ctx context.Context, c *client.Client, f fid.FID) *pb.Inode {
	t.Helper()
	ino, err := c.Getattr(ctx, f)
	if err != nil {
		t.Fatalf("getattr %s: %v", f, err)
	}
	return ino
}

// TestExactlyOnceRetriedAfterLostReply runs every mutation a client
// retries with its reply lost: with the leader staying (the retry is
// answered from the reply cache of whichever replica it reaches); with the
// leader handing over before the reply is lost (the new leader answers
// from its replicated reply cache); and with the new leader not looking
// at its reply cache before proposing (fault point
// mds.reply.precheck.skip), as one that has not applied the request's
// entry yet when the retry arrives: the request is in the log twice and
// apply answers the second entry from the reply cache.
func TestExactlyOnceRetriedAfterLostReply(t *testing.T) {
	cl := startReplicated(t)
	c := cl.Client(t)
	ctx := context.Background()
	names := replicaNames(t, cl, "mdt0")
	const applyMsg = "retried request answered from the reply cache by apply"
	for _, variant := range []string{"leader_stays", "leader_changes", "leader_changes_reproposed"} {
		failover := variant != "leader_stays"
		repropose := variant == "leader_changes_reproposed"
		for _, tc := range eoCases() {
			t.Run(variant+"/"+tc.name, func(t *testing.T) {
				dirIno, err := c.Mkdir(ctx, fid.Root, "eo-"+variant+"-"+tc.name, 0o755)
				if err != nil {
					t.Fatal(err)
				}
				dir := fid.FromPB(dirIno.Fid)
				var obj fid.FID
				if tc.prep != nil {
					obj = tc.prep(t, ctx, c, dir)
				}
				leader := waitLeader(t, cl, "mdt0")
				before := len(droppedReplies(t, cl, leader))
				applyHits := map[string]int{}
				for _, n := range names {
					applyHits[n] = len(logRecords(t, cl, n, applyMsg))
				}
				t.Cleanup(func() {
					for _, n := range names {
						for _, p := range []string{mds.FaultReplyDrop, mds.FaultReplyStepDown, mds.FaultReplyPrecheckSkip} {
							armPoint(t, cl, n, p, "off", 0)
						}
					}
				})
				if repropose {
					for _, n := range names {
						if n != leader {
							armPoint(t, cl, n, mds.FaultReplyPrecheckSkip, "error", 0)
						}
					}
				}
				if failover {
					armPoint(t, cl, leader, mds.FaultReplyStepDown, "error", 1)
				}
				armPoint(t, cl, leader, mds.FaultReplyDrop, "error", 1)

				octx, cancel := context.WithTimeout(ctx, 15*time.Second)
				start := time.Now()
				got, err := tc.do(octx, c, dir, obj)
				cancel()
				took := time.Since(start)
				if err != nil {
					t.Fatalf("%s after a lost reply: %v (a retry executed again fails with EEXIST or ENOENT)", tc.name, err)
				}
				drops := droppedReplies(t, cl, leader)
				if len(drops) != before+1 {
					t.Fatalf("%s on %s: %d replies dropped, want 1 (the fault point did not fire?)", tc.name, leader, len(drops)-before)
				}
				drop := drops[len(drops)-1]
				if drop.errno != 0 {
					t.Fatalf("the executed %s failed: errno %d", tc.name, drop.errno)
				}
				// The answer the client got is the one that was dropped.
				if drop.hasInode && got != nil {
					if f := fid.FromPB(got.Fid).String(); f != drop.fid || got.Nlink != drop.nlink || got.Mode != drop.mode || got.CtimeNs != drop.ctimeNs {
						t.Fatalf("the retry answered %s nlink %d mode %o ctime %d; the executed request answered %s nlink %d mode %o ctime %d",
							f, got.Nlink, got.Mode, got.CtimeNs, drop.fid, drop.nlink, drop.mode, drop.ctimeNs)
					}
				}
				newLeader := waitLeader(t, cl, "mdt0")
				if failover && newLeader == leader {
					t.Fatalf("%s still leads after the step-down point fired", leader)
				}
				tc.check(t, ctx, c, dir, obj, got, drop)
				how := "the reply cache before proposing"
				reproposed := false
				for _, n := range names {
					if len(logRecords(t, cl, n, applyMsg)) > applyHits[n] {
						how, reproposed = "the reply cache at apply (proposed again by "+n+")", true
					}
				}
				if repropose && !reproposed {
					t.Fatalf("no replica proposed the retried %s again (mds.reply.precheck.skip did not fire?)", tc.name)
				}
				if !failover && reproposed && newLeader == leader {
					// The leader had applied the request: the retry must
					// not have gone into the log again.
					t.Fatalf("the retried %s was proposed again: the leader that had applied it did not answer from its reply cache", tc.name)
				}
				t.Logf("%s (index %d) on %s, reply dropped; retry answered from %s; leader now %s; %v", tc.name, drop.index, leader, how, newLeader, took.Round(time.Millisecond))
			})
		}
	}
}
