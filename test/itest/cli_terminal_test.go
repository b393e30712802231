package itest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"nacre/test/testcluster"
	"nacre/test/testpty"
)

// nacreAtTerminal runs the nacre binary with its standard output on a
// pseudo-terminal and returns what reached the terminal.
func nacreAtTerminal(t *testing.T, cl *testcluster.Cluster, args ...string) string {
	t.Helper()
	p := testpty.Open(t)
	cmd := exec.Command(cl.Bin, args...)
	cmd.Env = append(os.Environ(), "NACRE_MGS="+cl.MGS)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = p.Term, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.Term.Close() // the command holds it now: its exit ends ReadAll
	out := p.ReadAll(60 * time.Second)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("nacre %q at a terminal: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// TestCLINamesAndTopAtATerminal is issue 26 through the binary, whose
// standard output is wrapped (to tell whether a failed --json command
// printed anything): a name with an escape sequence and a newline is
// quoted at a terminal by every command that prints it, and goes out as
// it is into a pipe; top redraws in place at a terminal and appends
// tables into a pipe.
func TestCLINamesAndTopAtATerminal(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	const evil = "evil\x1b[31mRED\nfake-second-line"
	const quoted = `$'evil\x1b[31mRED\nfake-second-line'`
	if out, err := cl.Run("put", "/etc/hostname", "/"+evil); err != nil {
		t.Fatalf("put: %v\n%s", err, out)
	}
	fidLine, err := cl.Run("path2fid", "/"+evil)
	if err != nil {
		t.Fatalf("path2fid: %v\n%s", err, fidLine)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"ls", "/"}, quoted + "\n"},
		{[]string{"ls", "-l", "/"}, " " + quoted + "\n"},
		{[]string{"stat", "/" + evil}, "File: $'/evil"},
		{[]string{"getstripe", "/" + evil}, "$'/evil"},
		{[]string{"path2fid", "/" + evil, "/"}, "$'/evil"},
		{[]string{"fid2path", strings.TrimSpace(fidLine)}, "$'/evil"},
	} {
		got := nacreAtTerminal(t, cl, c.args...)
		if strings.Contains(got, "\x1b") || strings.Contains(got, "\nfake-second-line") {
			t.Errorf("nacre %q at a terminal: the name reaches it raw:\n%q", c.args, got)
		}
		if !strings.Contains(got, c.want) {
			t.Errorf("nacre %q at a terminal: no %q in\n%q", c.args, c.want, got)
		}
	}
	if out, err := cl.Run("ls", "/"); err != nil || out != evil+"\n" {
		t.Errorf("nacre ls / into a pipe: %q (%v), want the name as it is", out, err)
	}

	top := []string{"top", "-n", "2", "--interval", "100ms"}
	if got := nacreAtTerminal(t, cl, top...); strings.Count(got, "\x1b[H") != 2 || strings.Count(got, "nacre top") != 2 {
		t.Errorf("nacre top at a terminal: want 2 tables each drawn from the top left corner, got\n%q", got)
	}
	out, err := cl.Run(top...)
	if err != nil || strings.Contains(out, "\x1b") || strings.Count(out, "nacre top") != 2 {
		t.Errorf("nacre top into a pipe: want 2 plain tables, got %v\n%q", err, out)
	}
}
