// Package proc tells which process serves a target directory: the pid
// file `nacre serve` keeps there (serve.pid, beside its log serve.log),
// checked against what /proc says of the process. A pid file outlives its
// process (a power cut, kill -9) and its pid may be reused by any process
// after a reboot: only a running `nacre serve --dir` of that very
// directory serves it. Commands that only ask (`nacre status`, `nacre
// down`, a backup) use this package without linking the server.
package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// PidFile is the name of the file holding the serving process's pid.
const PidFile = "serve.pid"

// LogFile is where `nacre up` sends a target's log.
const LogFile = "serve.log"

// Claim records this process in dir's pid file, refusing if another live
// process serves dir.
func Claim(dir string) error {
	if pid, ok := Serving(dir); ok && pid != os.Getpid() {
		return fmt.Errorf("%s is already served by process %d; stop it first (nacre down, or kill %d)", dir, pid, pid)
	}
	return WritePid(dir, os.Getpid())
}

// WritePid records pid as the process serving dir. The file is replaced
// whole (written aside, then renamed over), so a reader never finds it
// empty or half-written.
func WritePid(dir string, pid int) error {
	p := filepath.Join(dir, PidFile)
	tmp, err := os.CreateTemp(dir, "."+PidFile+".*")
	if err != nil {
		return fmt.Errorf("write the pid file of %s: %w", dir, err)
	}
	_, err = tmp.WriteString(strconv.Itoa(pid) + "\n")
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write the pid file of %s: %w", dir, err)
	}
	return nil
}

// ReadPid reads the pid file of a target directory.
func ReadPid(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, PidFile))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Serving returns the pid of the process serving the target in dir, by
// its pid file, if that process runs and is `nacre serve` of that very
// directory. After a reboot (a power cut) the pid in the file may belong
// to any process; trusting it made `nacre up` skip the target and `nacre
// down` signal a stranger.
func Serving(dir string) (int, bool) {
	pid, err := ReadPid(dir)
	if err != nil || !Running(pid) {
		return 0, false
	}
	return pid, servesDir(pid, dir)
}

// Serves reports whether process pid runs, not as a zombie, and serves the
// target in dir (its command line is `serve --dir` of that directory).
func Serves(pid int, dir string) bool { return Running(pid) && servesDir(pid, dir) }

// servesDir says whether process pid runs `serve --dir D` with D the
// directory dir. Where /proc cannot tell, it trusts the pid file.
func servesDir(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist) || !procMounted()
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if !slices.Contains(args, "serve") {
		return false
	}
	for i, a := range args {
		var d string
		switch {
		case a == "--dir" && i+1 < len(args):
			d = args[i+1]
		case strings.HasPrefix(a, "--dir="):
			d = strings.TrimPrefix(a, "--dir=")
		default:
			continue
		}
		if !filepath.IsAbs(d) {
			cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
			if err != nil {
				return true // cannot resolve it: trust the pid file
			}
			d = filepath.Join(cwd, d)
		}
		a, errA := os.Stat(d)
		b, errB := os.Stat(dir)
		if errB != nil {
			// The directory is gone (moved away, unmounted): only a
			// process started on that very path serves it.
			return filepath.Clean(d) == filepath.Clean(dir)
		}
		return errA == nil && os.SameFile(a, b)
	}
	return false
}

func procMounted() bool {
	_, err := os.Stat("/proc/self/cmdline")
	return err == nil
}

// zombie says whether pid has exited and waits for its parent to reap it.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// A killed process's main thread can be a zombie while its other
	// threads still exit and still hold its files (the store's lock):
	// it is gone only once a single thread is left (num_threads, field
	// 20 of stat, is f[17]).
	return len(f) > 17 && f[0] == "Z" && f[17] == "1"
}

// Running reports whether pid is a process that has not exited: it
// exists and is not a zombie waiting to be reaped.
func Running(pid int) bool { return Alive(pid) && !zombie(pid) }

// Alive reports whether a process exists (a zombie too: see Running).
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
