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

	"nacre/internal/client"
	"nacre/internal/errno"
)

// Commands with several operands (rm, mkdir, cat, stat, mv, ln, path2fid,
// fid2path) work as coreutils do: every operand is tried, each one that
// fails gets one line on standard error naming it ("nacre: rm /b: ..."),
// and the command then ends with ErrReported, which cmd/nacre turns into
// exit status 1 without printing more. Only a failure that no other
// operand can escape (the metadata servers do not answer, an interrupt)
// stops the command early, naming the operands left untried.

// ErrReported is returned by a command that has already printed why it
// failed (one line per operand that failed): the caller exits non-zero
// and prints nothing more.
var ErrReported = errors.New("errors were reported above")

// operand is one resolved path argument.
type operand struct {
	Arg          string // as given
	Path         string // from the file system root
	Mount        string // the Nacre mount it is on, if any
	AtMountPoint bool   // it is that mount's mount point
	Err          error  // why the argument could not be resolved
}

// openEach resolves each path argument on its own (one that cannot be
// resolved, or that is on a mount of another file system, carries its
// error) and connects to the file system of those that can. The client
// is nil when no argument could be resolved.
func (e Env) openEach(ctx context.Context, args []string) (*client.Client, []operand, error) {
	pe := e.pathEnv()
	mgs := e.MGS
	from := "--mgs or NACRE_MGS"
	ops := make([]operand, len(args))
	ok := 0
	for i, a := range args {
		ops[i].Arg = a
		fp, err := pe.Resolve(a)
		if err == nil && fp.MGS != "" {
			switch {
			case mgs == "":
				mgs, from = fp.MGS, "the mount "+fp.Mount
			case !client.SameMGS(mgs, fp.MGS):
				err = fmt.Errorf("%s is on the Nacre mount %s of the file system whose MGS is %s, but this command uses the MGS %s (from %s): give --mgs %s, or a path from the file system root",
					a, fp.Mount, fp.MGS, mgs, from, fp.MGS)
			}
		}
		if err != nil {
			ops[i].Err = err
			continue
		}
		ops[i].Path, ops[i].Mount = fp.Path, fp.Mount
		if fp.Mount != "" {
			if mp, err := pe.Resolve(fp.Mount); err == nil && path.Clean(mp.Path) == path.Clean(fp.Path) {
				ops[i].AtMountPoint = true
			}
		}
		ok++
	}
	if ok == 0 {
		return nil, ops, nil
	}
	e.MGS = mgs
	c, err := e.Connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, ops, nil
}

// reporter prints one line per failed operand and remembers that one did.
type reporter struct {
	cmd    string
	w      io.Writer
	failed int
}

func (e Env) reporter(cmd string) *reporter { return &reporter{cmd: cmd, w: e.Stderr()} }

// fail reports that arg failed.
func (r *reporter) fail(arg string, err error) {
	r.failed++
	fmt.Fprintf(r.w, "nacre: %s\n", operandMessage(r.cmd, arg, err))
}

// result is the command's error: ErrReported if an operand failed.
func (r *reporter) result() error {
	if r.failed > 0 {
		return ErrReported
	}
	return nil
}

// stop reports the failure of args[i] that ends the command early (see
// fatal) and returns the error naming the operands not tried.
func (r *reporter) stop(args []string, i int, err error) error {
	r.fail(args[i], err)
	rest := args[i+1:]
	if len(rest) == 0 {
		return ErrReported
	}
	return fmt.Errorf("%s: stopped; not tried: %s", r.cmd, strings.Join(rest, " "))
}

// operandMessage is "CMD ARG: why", naming a down OST's stripe by the
// path given.
func operandMessage(cmd, arg string, err error) string {
	var down *client.OSTDownError
	if errors.As(err, &down) {
		return fmt.Sprintf("%s %s: %s; check `nacre status`", cmd, arg, down.Describe(arg))
	}
	var mdt *client.MDTDownError
	if errors.As(err, &mdt) {
		// The call and FID add nothing the user can act on.
		return fmt.Sprintf("%s %s: %s; check `nacre status`", cmd, arg, mdt.Describe())
	}
	var other *otherPathError
	if errors.As(err, &other) {
		msg := shortMessage(other.err)
		if msg == syscall.ENOENT.Error() {
			msg += localHint(other.path) // `mv /a /tmp/outside`
		}
		return fmt.Sprintf("%s %s %s %s: %s", cmd, arg, other.rel, other.path, msg)
	}
	msg := shortMessage(err)
	if msg == syscall.ENOENT.Error() {
		msg += localHint(arg)
	}
	if strings.HasPrefix(msg, cmd+" "+arg+":") {
		return msg
	}
	return cmd + " " + arg + ": " + msg
}

// localHint explains a path from the root that the file system lacks but
// this machine has (`nacre stat /etc/passwd`): it is not on a Nacre mount,
// so it was taken from the file system's root. A path whose directory this
// machine has is explained too (`nacre put f /tmp/new`, `nacre mv /a
// /tmp/new`: a file to be made there), but not one in the root, whose
// directory every machine has.
func localHint(arg string) string {
	if !strings.HasPrefix(arg, "/") {
		return ""
	}
	const note = " (%s is a %s of this machine, not on a Nacre mount: a path outside the mounts is taken from the Nacre file system's root)"
	if _, err := os.Lstat(arg); err == nil {
		return fmt.Sprintf(note, arg, "path")
	}
	dir := path.Dir(path.Clean(arg))
	if dir == "/" {
		return ""
	}
	if st, err := os.Stat(dir); err == nil && st.IsDir() {
		return fmt.Sprintf(note, dir, "directory")
	}
	return ""
}

// shortMessage is err's text, or only its errno's (or the server's
// message of a full target) for the errors where the layers of lookups,
// objects and FIDs add nothing.
func shortMessage(err error) string {
	var en *errno.Errno
	if errors.As(err, &en) {
		if client.MissingObject(err) {
			// The name and the file are there (stat works); one of its
			// OST objects is not.
			return en.Op + ": the OST object is missing (a dangling stripe: `nacre lfsck start -t layout` reports it, and with -c makes it again, empty)"
		}
		switch en.Errno {
		case syscall.ENOENT, syscall.ENOTDIR, syscall.EEXIST, syscall.ENOTEMPTY, syscall.ELOOP, syscall.EISDIR:
			return en.Errno.Error()
		case syscall.ENOSPC:
			if en.Msg != "" {
				return en.Msg // names the full target and what to do
			}
		}
	}
	return err.Error()
}

// otherPathError is a failure of an operand's command at another path
// than the operand's (mv's destination, ln's link name), so that the
// message names that path: "mv /a to /nodir/b: no such file or
// directory", not "mv /a: no such file or directory" when /a exists.
type otherPathError struct {
	rel  string // "to", "as"
	path string
	err  error
}

func (e *otherPathError) Error() string {
	return e.rel + " " + e.path + ": " + shortMessage(e.err)
}
func (e *otherPathError) Unwrap() error { return e.err }

// atOtherPath wraps err (nil stays nil) as a failure at path.
func atOtherPath(rel, path string, err error) error {
	if err == nil {
		return nil
	}
	return &otherPathError{rel: rel, path: path, err: err}
}

// fatal reports whether err is one that the next operand would meet too:
// an interrupt, or the metadata servers not answering within the
// client's timeout.
func fatal(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	if mdtDown(err) {
		return true
	}
	switch errno.CodeOf(err) {
	case errno.Unavailable, errno.Aborted, errno.DeadlineExceeded:
		return true
	}
	return false
}

// OpError is err with the text of a failed operand ("CMD ARG: why", with
// only the errno for a missing path), for commands of one operand.
func OpError(cmd, arg string, err error) error { return opError(cmd, arg, err) }

// opError is err with operandMessage's text, for commands of one operand.
func opError(cmd, arg string, err error) error {
	return &operandError{msg: operandMessage(cmd, arg, err), err: err}
}

type operandError struct {
	msg string
	err error
}

func (e *operandError) Error() string { return e.msg }
func (e *operandError) Unwrap() error { return e.err }

// mdtDown reports whether err is an MDT that did not answer.
func mdtDown(err error) bool {
	var d *client.MDTDownError
	return errors.As(err, &d)
}
