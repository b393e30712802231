package itest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/fid"
	"nacre/test/testcluster"
)

// TestLfsckCommandsFollowTheMDTLeader: right after the MDT leader is
// killed, `nacre lfsck query` and `stop` reach the new leader (the MGS
// still shows the dead one up and leading for seconds), and only once
// its checker took over the interrupted run. Before, they failed with
// "MDT0000 (ADDR) does not answer: connection refused" for 1-2 s after a
// kill; then the new leader answered "the checker is not running" with
// status init, and the run it resumed a moment later went on regardless.
func TestLfsckCommandsFollowTheMDTLeader(t *testing.T) {
	// Every replica scans slowly enough to be still running when the
	// leader dies and when the next one has resumed.
	cl := startReplicated(t, "NACRE_FAULTS=lfsck.scan.object=delay:100ms")
	c := cl.Client(t)
	ctx := context.Background()
	for i := 0; i < 40; i++ {
		writeFile(t, ctx, c, fid.Root, fmt.Sprintf("f%d", i), 1, []byte("x"))
	}
	leader := waitLeader(t, cl, "mdt0")
	if out, err := cl.Run("lfsck", "start", "-t", "namespace"); err != nil {
		t.Fatalf("lfsck start: %v\n%s", err, out)
	}
	cl.Kill(leader, syscall.SIGKILL)
	if s := lfsckQuery(t, cl).Components["namespace"].Status; s != "crashed" && s != "scanning-phase1" && s != "scanning-phase2" {
		t.Fatalf("query right after the leader died: namespace %s, want the interrupted run (crashed or resumed)", s)
	}
	out, err := cl.Run("lfsck", "stop")
	if err != nil {
		t.Fatalf("lfsck stop right after the leader died: %v\n%s", err, out)
	}
	// The run stays stopped: the new leader does not resume it a second
	// later either.
	time.Sleep(time.Second)
	if s := lfsckQuery(t, cl).Components["namespace"].Status; s != "stopped" {
		t.Fatalf("after stop on the new leader: namespace %s", s)
	}
}

// TestFaultArmSaysWhatItDid: `nacre fault arm` refuses points that do not
// exist in the target named (before, it armed them, and they never fired)
// and targets that are not there, and says what it armed or disarmed and
// what is armed now (before, disarming printed "armed" and the points left,
// and an error's message was dropped).
func TestFaultArmSaysWhatItDid(t *testing.T) {
	cl := startReplicated(t)
	for _, c := range []struct {
		args []string
		ok   bool
		want string
	}{
		{[]string{"bogus.point=error", "--target", "mdt0"}, false, `no fault point "bogus.point" in an MDT; its points: lfsck.checkpoint`},
		{[]string{"oss.lfsck.check=error", "--target", "mdt0"}, false, `no fault point "oss.lfsck.check" in an MDT`},
		{[]string{"lfsck.scan.object=error", "--target", "mdt7"}, false, "no MDT 7 (MDT0007) in the configuration"},
		{[]string{"lfsck.scan.object=error", "--target", "mdtx"}, false, `--target "mdtx": give mdtN or ostN`},
		{[]string{"oss.lfsck.check=error", "--target", "ost9"}, false, "no OST 9 (OST0009) in the configuration"},
		{[]string{"lfsck.scan.object=error:boom*1", "--target", "mdt0"}, true, "mdt0: armed lfsck.scan.object=error:boom*1 (armed now: lfsck.scan.object=error:boom*1)"},
		{[]string{"oss.lfsck.check=delay:1ms", "--target", "ost1"}, true, "ost1: armed oss.lfsck.check=delay:1ms (armed now: oss.lfsck.check=delay:1ms)"},
		{[]string{"lfsck.scan.object=off", "--target", "mdt0"}, true, "mdt0: disarmed lfsck.scan.object (armed now: none)"},
		{[]string{"oss.lfsck.check=off", "--target", "ost1"}, true, "ost1: disarmed oss.lfsck.check (armed now: none)"},
	} {
		out, err := cl.Run(append([]string{"fault", "arm"}, c.args...)...)
		if (err == nil) != c.ok || !strings.Contains(out, c.want) {
			t.Errorf("fault arm %s: %v, want ok=%v and %q in:\n%s", strings.Join(c.args, " "), err, c.ok, c.want, out)
		}
	}
	if out, err := cl.Run("lfsck", "status", "-t", "layout", "--mdt", "7"); err == nil || !strings.Contains(out, "no MDT 7 (MDT0007) in the configuration") {
		t.Errorf("lfsck status --mdt 7: %v\n%s", err, out)
	}
}

// TestFuseDropsItsCacheOfAFileTheCheckerChanged: a mount that read a file
// reads what the checker made of it, not its cached pages, once the
// layout check re-created the file's lost stripe (empty: its bytes read as
// zeros through the library and the mount alike). Before, the mount kept
// serving the old bytes from its page cache: the repair changed neither
// size nor mtime, and nothing told the clients.
func TestFuseDropsItsCacheOfAFileTheCheckerChanged(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	m := mountFuse(t, cl)
	data := patterned(256<<10, 9)
	if err := os.WriteFile(m.Path("f"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(m.Path("f")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back before the damage: %v", err)
	}
	if out, err := cl.Run("fault", "inject", "ost_object_missing", "--path", "/f", "--yes"); err != nil {
		t.Fatalf("inject: %v\n%s", err, out)
	}
	if f, _ := found(lfsckRun(t, cl, "-r", "-t", "layout", "-c")); f != 1 {
		t.Fatalf("the check found %d inconsistencies, want the one injected", f)
	}
	want, err := lfsckRead(t, context.Background(), cl.Client(t), "/f")
	if err != nil || bytes.Equal(want, data) || len(want) != len(data) {
		t.Fatalf("the library reads %d bytes (%v), the old data: %v; want the file with a stripe empty", len(want), err, bytes.Equal(want, data))
	}
	if got, err := os.ReadFile(m.Path("f")); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the mount reads %d bytes (%v), not what the checker made of the file (equal to the old data: %v)", len(got), err, bytes.Equal(got, data))
	}
}

// TestFuseReadOfADanglingStripeIsAnIOError: a read through the mount of a
// file whose OST object is missing fails with EIO, and the mount's log
// says what is wrong and what finds it. Before, it failed with ENOENT,
// which `cat` reports as "No such file or directory" for a file that is
// there.
func TestFuseReadOfADanglingStripeIsAnIOError(t *testing.T) {
	needFUSE(t)
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	m := mountFuse(t, cl)
	if err := os.WriteFile(m.Path("f"), patterned(64<<10, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cl.Run("fault", "inject", "ost_object_missing", "--path", "/f", "--yes"); err != nil {
		t.Fatalf("inject: %v\n%s", err, out)
	}
	f, err := os.OpenFile(m.Path("f"), os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(make([]byte, 4096), 0); !errors.Is(err, syscall.EIO) {
		t.Fatalf("read of a dangling stripe: %v, want EIO", err)
	}
	if log, _ := os.ReadFile(m.Log); !strings.Contains(string(log), "dangling stripe") || !strings.Contains(string(log), "nacre lfsck") {
		t.Fatalf("the mount's log does not say the object is missing:\n%s", log)
	}
}
