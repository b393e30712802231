package fusefs

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"nacre/internal/client"
)

// MountOptions configure Mount.
type MountOptions struct {
	Options
	// AllowOther lets users other than the one who mounted use the mount.
	AllowOther bool
	// DefaultPermissions has the kernel check permissions from the
	// attributes (with every supplementary group of the caller) before it
	// asks the file system; the MDT checks again with the caller's
	// identity.
	DefaultPermissions bool
	ReadOnly           bool
	Debug              bool
	// MaxBackground bounds the kernel's asynchronous requests (readahead,
	// writeback); default 64.
	MaxBackground int
	// ReadAheadKB sets the mount's readahead window (the backing device's
	// read_ahead_kb); default 4096, 0 leaves the kernel's.
	ReadAheadKB int
	// FsName is shown as the device in /proc/mounts and df.
	FsName string
	// ACL enables POSIX ACLs (needs DefaultPermissions: the kernel checks
	// access against the ACLs it reads back).
	ACL bool
}

// DefaultMountOptions are the options `nacre mount` starts from.
func DefaultMountOptions() MountOptions {
	return MountOptions{DefaultPermissions: true, ACL: true, MaxBackground: 64, ReadAheadKB: 4096}
}

// ParseOptions applies a comma-separated -o list to o.
func ParseOptions(o *MountOptions, s string) error {
	for _, opt := range strings.Split(s, ",") {
		if opt == "" {
			continue
		}
		k, v, hasV := strings.Cut(opt, "=")
		dur := func() (time.Duration, error) {
			f, err := strconv.ParseFloat(v, 64)
			if !hasV || err != nil || f < 0 {
				return 0, fmt.Errorf("option %s needs a number of seconds", k)
			}
			return time.Duration(f * float64(time.Second)), nil
		}
		num := func() (int, error) {
			n, err := strconv.Atoi(v)
			if !hasV || err != nil || n < 0 {
				return 0, fmt.Errorf("option %s needs a whole number", k)
			}
			return n, nil
		}
		var err error
		switch k {
		case "allow_other":
			o.AllowOther = true
		case "default_permissions":
			o.DefaultPermissions = true
		case "no_default_permissions":
			o.DefaultPermissions = false
		case "acl":
			o.ACL = true
		case "noacl":
			o.ACL = false
		case "ro":
			o.ReadOnly = true
		case "rw":
			o.ReadOnly = false
		case "debug":
			o.Debug = true
		case "attr_timeout":
			o.AttrTimeout, err = dur()
			if o.AttrTimeout == 0 {
				o.AttrTimeout = time.Nanosecond
			}
		case "entry_timeout":
			o.EntryTimeout, err = dur()
			if o.EntryTimeout == 0 {
				o.EntryTimeout = time.Nanosecond
			}
		case "negative_timeout":
			o.NegativeTimeout, err = dur()
		case "max_background":
			o.MaxBackground, err = num()
		case "readahead_kb":
			o.ReadAheadKB, err = num()
		case "fsname":
			o.FsName = v
		case "noatime", "relatime", "nodev", "nosuid", "flock", "user_xattr", "_netdev", "defaults", "auto", "noauto":
			// Accepted for fstab compatibility: Nacre never updates atime
			// on reads, always has flock and user xattrs; nodev/nosuid
			// are always on for FUSE mounts.
		default:
			return fmt.Errorf("unknown mount option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// Mount is a mounted file system.
type Mount struct {
	Dir    string
	FS     *FS
	Server *fuse.Server
	sess   *client.Session
}

// MountFS mounts the file system of c at dir and serves it in the
// background; Wait returns when it is unmounted.
func MountFS(ctx context.Context, c *client.Client, dir string, o MountOptions) (*Mount, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if o.Name == "" {
		host, _ := os.Hostname()
		o.Name = host + ":" + dir
	}
	if !o.DefaultPermissions {
		// The kernel caches no names (FS.noNameCache): what the mount
		// notes of the names it holds (checkName) expires at once too.
		o.EntryTimeout = time.Nanosecond
	}
	fs := New(c, o.Options)
	fs.noNameCache = !o.DefaultPermissions
	fs.kernelChecks = o.DefaultPermissions
	fs.kernelACLs = o.DefaultPermissions && o.ACL
	sess, err := c.StartSession(ctx, o.Name, client.SessionHandlers{Invalidate: fs.Invalidate, RevokeAppend: fs.RevokeAppend, RevokeLookup: fs.RevokeLookup, AskClose: fs.AskClose, SessionLost: fs.SessionLost, OpenFIDs: fs.openFileFIDs})
	if err != nil {
		return nil, fmt.Errorf("open a session with the MDS: %w", err)
	}
	fs.SetSession(sess)
	if o.MaxBackground == 0 {
		o.MaxBackground = 64
	}
	fsname := o.FsName
	if fsname == "" {
		fsname = c.Fsname()
	}
	mo := &fuse.MountOptions{
		AllowOther:    o.AllowOther,
		FsName:        fsname,
		Name:          "nacre",
		MaxWrite:      1 << 20,
		MaxReadAhead:  1 << 20,
		MaxBackground: o.MaxBackground,
		DirectMount:   true,
		EnableLocks:   true,
		// Reads answer with bytes, never a file descriptor to splice
		// from: go-fuse would only try to grow a pipe past its 1 MiB
		// limit for every 1 MiB read, and log that it could not.
		DisableSplice: true,
		Debug:         o.Debug,
		// DIRECT_IO_ALLOW_MMAP: O_APPEND handles are direct (append.go)
		// and may still be mapped shared.
		ExtraCapabilities: fuse.CAP_READDIRPLUS_AUTO | fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_DIRECT_IO_ALLOW_MMAP,
	}
	if o.DefaultPermissions {
		mo.Options = append(mo.Options, "default_permissions")
		if o.ACL {
			// The kernel enforces the ACLs; it passes the umask
			// instead of applying it, since a default ACL replaces
			// it (the MDT decides).
			mo.EnableAcl = true
			mo.ExtraCapabilities |= fuse.CAP_DONT_MASK
		}
	}
	if o.ReadOnly {
		mo.Options = append(mo.Options, "ro")
		mo.DirectMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_RDONLY
	}
	srv, err := fuse.NewServer(fs, dir, mo)
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		sess.Close()
		return nil, fmt.Errorf("mount %s: %w", dir, err)
	}
	if o.ReadAheadKB > 0 {
		if err := SetReadAhead(dir, o.ReadAheadKB); err != nil {
			o.Log.Info("could not set the readahead window", "err", err)
		}
	}
	return &Mount{Dir: dir, FS: fs, Server: srv, sess: sess}, nil
}

// Wait returns when the file system is unmounted, after the files that
// were still open are flushed and the session is closed.
func (m *Mount) Wait() {
	m.Server.Wait()
	m.FS.Close()
	m.FS.flushCloses()
	m.sess.Close()
}

// Unmount unmounts; with lazy, a busy mount is detached and goes when its
// last file is closed.
func (m *Mount) Unmount(lazy bool) error {
	err := m.Server.Unmount()
	if err != nil && lazy {
		return syscall.Unmount(m.Dir, syscall.MNT_DETACH)
	}
	return err
}

// SetReadAhead sets the readahead window of the mount at dir.
func SetReadAhead(dir string, kb int) error {
	var st syscall.Stat_t
	if err := syscall.Stat(dir, &st); err != nil {
		return err
	}
	major, minor := (st.Dev>>8)&0xfff|(st.Dev>>32)&^0xfff, st.Dev&0xff|(st.Dev>>12)&^0xff
	p := fmt.Sprintf("/sys/class/bdi/%d:%d/read_ahead_kb", major, minor)
	return os.WriteFile(p, []byte(strconv.Itoa(kb)), 0o644)
}
