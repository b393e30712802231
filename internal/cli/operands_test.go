package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

func TestOperandMessageNamesTheOperandOnce(t *testing.T) {
	lookup := &errno.Errno{Op: "resolve /a/b", Errno: syscall.ENOENT, Msg: `lookup a: no entry "a" in [0x200000007:0x1:0x0]: no such file or directory`}
	down := &client.OSTDownError{OST: 1, Addr: "127.0.0.1:9", File: fid.Root, Stripe: 1, Op: "read", For: 5 * time.Second, Err: syscall.ECONNREFUSED}
	cases := []struct {
		cmd, arg string
		err      error
		want     string
	}{
		{"rm", "/a/b", lookup, "rm /a/b: no such file or directory"},
		{"rm", "/a/b", fmt.Errorf("wrapped: %w", lookup), "rm /a/b: no such file or directory"},
		// A path of this machine outside the mounts: say how it was taken.
		{"stat", "/etc/passwd", lookup, "stat /etc/passwd: no such file or directory (/etc/passwd is a path of this machine, not on a Nacre mount: a path outside the mounts is taken from the Nacre file system's root)"},
		// ... also a path to be made in a directory of this machine, given
		// as the operand or as the other path (mv's destination).
		{"put", "/etc/nacre-none/x", lookup, "put /etc/nacre-none/x: no such file or directory"},
		{"put", "/etc/nacre-none", lookup, "put /etc/nacre-none: no such file or directory (/etc is a directory of this machine, not on a Nacre mount: a path outside the mounts is taken from the Nacre file system's root)"},
		{"mv", "/a", atOtherPath("to", "/etc/nacre-none", lookup), "mv /a to /etc/nacre-none: no such file or directory (/etc is a directory of this machine, not on a Nacre mount: a path outside the mounts is taken from the Nacre file system's root)"},
		{"ln", "/a", atOtherPath("as", "/etc/passwd", lookup), "ln /a as /etc/passwd: no such file or directory (/etc/passwd is a path of this machine, not on a Nacre mount: a path outside the mounts is taken from the Nacre file system's root)"},
		// Every machine has the root: no note for a path in it.
		{"stat", "/nacre-none", lookup, "stat /nacre-none: no such file or directory"},
		{"rm", "/d", fmt.Errorf("is a directory (use -r to remove it and its contents)"), "rm /d: is a directory (use -r to remove it and its contents)"},
		{"mv", "x", fmt.Errorf("mv x: already named"), "mv x: already named"},
		{"rm", "/x", &errno.Errno{Op: "unlink x", Errno: syscall.EACCES, Msg: "sticky directory"}, "rm /x: unlink x: sticky directory"},
		{"cat", "/f", fmt.Errorf("read: %w", down), "cat /f: OST0001 (127.0.0.1:9) is down: stripe 1 of /f cannot be read (no answer for 5.0s: connection refused); check `nacre status`"},
		{"mv", "/a", atOtherPath("to", "/nodir/b", lookup), "mv /a to /nodir/b: no such file or directory"},
		{"ln", "t", fmt.Errorf("wrapped: %w", atOtherPath("as", "/x/l", &errno.Errno{Op: "symlink l", Errno: syscall.EEXIST})), "ln t as /x/l: file exists"},
		{"mv", "/a", atOtherPath("to", "/b", &errno.Errno{Op: "rename", Errno: syscall.EACCES, Msg: "sticky directory"}), "mv /a to /b: rename: sticky directory"},
		// A full target's message says which and what to do; the object
		// and offset add nothing.
		{"put", "/a", fmt.Errorf("write: %w", &errno.Errno{Op: "write OST0001 object 0x100000000:0x1 at 50331648", Errno: syscall.ENOSPC, Msg: "OST0001 is full: 80.6MB free of 200MB, and it keeps 80MB for its own store; remove files, or add or grow a target"}),
			"put /a: OST0001 is full: 80.6MB free of 200MB, and it keeps 80MB for its own store; remove files, or add or grow a target"},
		{"mkdir", "/d", &errno.Errno{Op: "mkdir d", Errno: syscall.ENOSPC}, "mkdir /d: mkdir d: no space left on device"},
		// A full MDT's message names it and what to do.
		{"mkdir", "/d", &errno.Errno{Op: "mkdir d", Errno: syscall.ENOSPC, Msg: "MDT0000 is full: 140MB free"}, "mkdir /d: MDT0000 is full: 140MB free"},
		// A missing object of a file that is there is not "no such file".
		{"cat", "/f", fmt.Errorf("read: %w", &errno.Errno{Op: "read OST0001 object 0x100000000:0x5 at 1048576", Errno: syscall.ENOENT, Msg: "no such file or directory"}),
			"cat /f: read OST0001 object 0x100000000:0x5 at 1048576: the OST object is missing (a dangling stripe: `nacre lfsck start -t layout` reports it, and with -c makes it again, empty)"},
	}
	for _, c := range cases {
		if got := operandMessage(c.cmd, c.arg, c.err); got != c.want {
			t.Errorf("operandMessage(%s, %s, %v)\n got %q\nwant %q", c.cmd, c.arg, c.err, got, c.want)
		}
	}
}

func TestAtOtherPathKeepsNilAndTheCode(t *testing.T) {
	if atOtherPath("to", "/b", nil) != nil {
		t.Fatal("a nil error must stay nil")
	}
	// A server that does not answer still stops the command (fatal).
	err := atOtherPath("to", "/b", errno.New(errno.Unavailable, "gone"))
	if !fatal(context.Background(), err) {
		t.Errorf("%v is not fatal", err)
	}
}

func TestReporterStopsNamingTheOperandsNotTried(t *testing.T) {
	var buf bytes.Buffer
	r := &reporter{cmd: "rm", w: &buf}
	r.fail("/a", fmt.Errorf("boom"))
	err := r.stop([]string{"/a", "/b", "/c", "/d"}, 1, fmt.Errorf("MDT gone"))
	if err == nil || err.Error() != "rm: stopped; not tried: /c /d" {
		t.Fatalf("stop: %v", err)
	}
	if buf.String() != "nacre: rm /a: boom\nnacre: rm /b: MDT gone\n" {
		t.Fatalf("reported %q", buf.String())
	}
	if r.stop([]string{"/a"}, 0, fmt.Errorf("x")) != ErrReported {
		t.Fatal("stop at the last operand is ErrReported")
	}
}

func TestFatalErrorsAreTheMetadataServersNotAnswering(t *testing.T) {
	ctx := context.Background()
	if !fatal(ctx, fmt.Errorf("lookup x: gave up after 40 attempts: %w", errno.New(errno.Unavailable, "connection refused"))) {
		t.Error("an MDT that does not answer is not fatal")
	}
	if fatal(ctx, &errno.Errno{Op: "lookup x", Errno: syscall.ENOENT}) {
		t.Error("ENOENT is fatal")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if !fatal(cancelled, fmt.Errorf("anything")) {
		t.Error("an interrupt is not fatal")
	}
}

func TestJSONOneOrMany(t *testing.T) {
	var buf bytes.Buffer
	jsonOneOrMany(&buf, 1, []PathFID{{Path: "/a", FID: "[0x1:0x2:0x0]"}})
	var one PathFID
	if err := json.Unmarshal(buf.Bytes(), &one); err != nil || one.Path != "/a" {
		t.Fatalf("one operand: %v %s", err, buf.String())
	}
	buf.Reset()
	jsonOneOrMany[PathFID](&buf, 2, nil) // both failed
	if strings.TrimSpace(buf.String()) != "[]" {
		t.Fatalf("two failed operands: %q", buf.String())
	}
}

func TestMountViewShowsPathsUnderTheMount(t *testing.T) {
	pe := &PathEnv{Cwd: "/", Mounts: testMounts, EvalSymlinks: testEvalSymlinks}
	whole, err := newMountView(pe, "/mnt/nacre")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := whole.show([]string{"/a/b", "/c"}); !slices.Equal(got, []string{"/mnt/nacre/a/b", "/mnt/nacre/c"}) {
		t.Fatalf("whole mount: %v", got)
	}
	bind, err := newMountView(pe, "/home/u/proj") // shows /m1/proj
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := bind.show([]string{"/m1/proj/x", "/other/x", "/m1/proj"}); !slices.Equal(got, []string{"/home/u/proj/x", "/home/u/proj"}) {
		t.Fatalf("bind mount: %v", got)
	}
	if _, err := bind.show([]string{"/other/x"}); err == nil || !strings.Contains(err.Error(), "its paths from the file system root: /other/x") {
		t.Fatalf("no path under the bind mount: %v", err)
	}
}
