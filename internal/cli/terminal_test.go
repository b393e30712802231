package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/test/testpty"
)

// wrapped is a writer over a file that is not the *os.File itself but
// gives its descriptor, as cmd/nacre's count of standard output does.
type wrapped struct{ f *os.File }

func (w wrapped) Write(p []byte) (int, error) { return w.f.Write(p) }
func (w wrapped) Fd() uintptr                 { return w.f.Fd() }

// shown is what reaches the terminal of p from what write writes to it,
// through a wrapper.
func shown(t *testing.T, p *testpty.PTY, write func(w io.Writer)) string {
	t.Helper()
	write(wrapped{p.Term})
	p.Term.Close()
	return string(p.ReadAll(5 * time.Second))
}

func TestIsTerminalSeesThroughAWrapper(t *testing.T) {
	p := testpty.Open(t)
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, c := range []struct {
		what string
		w    io.Writer
		want bool
	}{
		{"a terminal", p.Term, true},
		{"a wrapper over a terminal", wrapped{p.Term}, true},
		{"a wrapper that hides its file", struct{ io.Writer }{p.Term}, false},
		{"/dev/null", null, false},
		{"a pipe", w, false},
		{"a buffer", &bytes.Buffer{}, false},
	} {
		if got := IsTerminal(c.w); got != c.want {
			t.Errorf("IsTerminal(%s) = %v, want %v", c.what, got, c.want)
		}
	}
}

// evil is the name of issue 26: at a terminal, raw, it turned the screen
// red and printed a line of its own.
const evil = "evil\x1b[31mRED\nfake-second-line"

// TestNamesNeverReachATerminalRaw: what ls, ls -l, stat, getstripe print
// at a terminal holds no control byte of a name (no ESC, one line per
// name), and shows the name as the shell reads it back; piped, names go
// out as they are, for scripts.
func TestNamesNeverReachATerminalRaw(t *testing.T) {
	file := &pb.Inode{Mode: syscall.S_IFREG | 0o644, Nlink: 1, Size: 3, Fid: &pb.FID{Seq: 0x200000400, Oid: 1},
		Layout: &pb.Layout{StripeCount: 1, StripeSize: 1 << 20, Objects: []*pb.StripeObject{{Ost: 0, Seq: 0x100000000, Oid: 7}}}}
	link := &pb.Inode{Mode: syscall.S_IFLNK | 0o777, Nlink: 1, Symlink: []byte("to-" + evil), Fid: &pb.FID{Seq: 0x200000400, Oid: 2}}
	rows := []lsRow{{name: "plain", ino: file}, {name: evil, ino: file}, {name: "l", ino: link}}
	quoted := `$'evil\x1b[31mRED\nfake-second-line'`
	for _, c := range []struct {
		what  string
		write func(w io.Writer)
		lines int
		want  []string
	}{
		{"ls", func(w io.Writer) { writeNames(w, rows) }, 3, []string{"plain\n", quoted + "\n", "l\n"}},
		{"ls -l", func(w io.Writer) { writeLong(w, rows, false, newOwners()) }, 3, []string{" " + quoted + "\n", "l -> $'to-evil\\x1b[31mRED\\nfake-second-line'\n"}},
		{"stat", func(w io.Writer) { writeStat(w, statInfo("/d/"+evil, file), file.Mode) }, 7, []string{"  File: $'/d/evil\\x1b[31mRED\\nfake-second-line'\n"}},
		{"getstripe", func(w io.Writer) { writeStripe(w, stripeOf("/"+evil, file), file) }, 9, []string{"$'/evil\\x1b[31mRED\\nfake-second-line'\n"}},
	} {
		got := shown(t, testpty.Open(t), c.write)
		if strings.ContainsAny(got, "\x1b\r") {
			t.Errorf("%s at a terminal: a control byte reaches it raw:\n%q", c.what, got)
		}
		if n := strings.Count(got, "\n"); n != c.lines {
			t.Errorf("%s at a terminal: %d lines, want %d:\n%s", c.what, n, c.lines, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s at a terminal: no %q in\n%s", c.what, w, got)
			}
		}
		var piped bytes.Buffer
		c.write(&piped)
		if !strings.Contains(piped.String(), evil) {
			t.Errorf("%s piped: the name is not as it is:\n%q", c.what, piped.String())
		}
	}
}

// TestTopRedrawsInPlaceOnlyAtATerminal: at a terminal every table starts
// at the top left corner and erases what the last one left; elsewhere
// tables are appended, with no terminal sequence in a log.
func TestTopRedrawsInPlaceOnlyAtATerminal(t *testing.T) {
	s := &StatsJSON{Fsname: "nacre", Targets: []TargetStats{{Name: "MDT0000", Ops: map[string]OpStat{"getattr": {Rate: 5}}}}}
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	got := shown(t, testpty.Open(t), func(w io.Writer) {
		scr := newTopScreen(w)
		for range 2 {
			if err := scr.draw(s, time.Second, at); err != nil {
				t.Fatal(err)
			}
		}
	})
	frames := strings.Split(got, cursorHome)
	if len(frames) != 3 || frames[0] != "" {
		t.Fatalf("at a terminal: want 2 frames each from the top left corner, got %q", got)
	}
	for _, f := range frames[1:] {
		if !strings.HasSuffix(f, eraseLine+"\n"+eraseScreen) || !strings.Contains(f, "MDT0000") {
			t.Errorf("at a terminal: a frame does not erase what the last one left: %q", f)
		}
	}

	var log bytes.Buffer
	scr := newTopScreen(&log)
	for range 2 {
		if err := scr.draw(s, time.Second, at); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Contains(log.String(), "\x1b") {
		t.Errorf("not at a terminal: terminal sequences in %q", log.String())
	}
	if n := strings.Count(log.String(), "nacre top — nacre — 15:04:05"); n != 2 {
		t.Errorf("not at a terminal: %d tables, want 2 one after the other:\n%s", n, log.String())
	}
}

// unknownID is a uid that is no user of this machine and a gid that is no
// group of it.
func unknownID(t *testing.T) uint32 {
	for id := uint32(4_000_000_000); id < 4_000_000_100; id++ {
		s := strconv.FormatUint(uint64(id), 10)
		_, uerr := user.LookupId(s)
		_, gerr := user.LookupGroupId(s)
		if uerr != nil && gerr != nil {
			return id
		}
	}
	t.Skip("every id tried is known here")
	return 0
}

// TestLsLongNamesOwnersThisMachineKnows: ls -l shows root for uid and gid
// 0, the number of an id this machine does not know, and numbers only
// with -n; --json keeps the numbers and adds the names it knows.
func TestLsLongNamesOwnersThisMachineKnows(t *testing.T) {
	root, err := user.LookupGroupId("0")
	if err != nil {
		t.Skipf("no group 0 here: %v", err)
	}
	unknown := unknownID(t)
	ino := func(uid, gid uint32) *pb.Inode {
		return &pb.Inode{Mode: syscall.S_IFREG | 0o644, Nlink: 1, Uid: uid, Gid: gid, Fid: &pb.FID{Seq: 0x200000400, Oid: 1}}
	}
	rows := []lsRow{{name: "a", ino: ino(0, 0)}, {name: "b", ino: ino(unknown, unknown)}}
	u, g := strconv.FormatUint(uint64(unknown), 10), strconv.FormatUint(uint64(unknown), 10)
	w := len(u)
	for _, c := range []struct {
		numeric bool
		want    []string
	}{
		// Names left-aligned, numbers right-aligned, in columns as wide
		// as their widest entry.
		{false, []string{fmt.Sprintf(" %-*s %-*s ", w, "root", w, root.Name), fmt.Sprintf(" %s %s ", u, g)}},
		{true, []string{fmt.Sprintf(" %*s %*s ", w, "0", w, "0"), fmt.Sprintf(" %s %s ", u, g)}},
	} {
		var out bytes.Buffer
		writeLong(&out, rows, c.numeric, newOwners())
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if len(lines) != 2 {
			t.Fatalf("-n %v: want 2 lines, got\n%s", c.numeric, out.String())
		}
		for i, want := range c.want {
			if !strings.Contains(lines[i], want) {
				t.Errorf("-n %v: line %q has no %q", c.numeric, lines[i], want)
			}
		}
	}

	for _, c := range []struct {
		numeric bool
		want    string
	}{
		{false, `"uid": 0,` + "\n" + `    "gid": 0,` + "\n" + `    "user": "root",` + "\n" + `    "group": "` + root.Name + `",`},
		{true, `"uid": 0,` + "\n" + `    "gid": 0,` + "\n" + `    "mtime"`},
	} {
		var out bytes.Buffer
		if err := writeLsJSON(&out, rows, c.numeric, newOwners()); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), c.want) {
			t.Errorf("--json (-n %v): no %q in\n%s", c.numeric, c.want, out.String())
		}
		if strings.Contains(out.String(), `"user": "`+u) || strings.Count(out.String(), `"user"`) > 1 {
			t.Errorf("--json (-n %v): a name for the unknown id %s:\n%s", c.numeric, u, out.String())
		}
	}
}
