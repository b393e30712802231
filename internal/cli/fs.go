package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/layout"
	"nacre/internal/reserve"
	"nacre/internal/rpc"
)

// LsEntry is one entry of `nacre ls --json` (a file given as the path
// is listed as its only entry).
type LsEntry struct {
	Name string `json:"name"`
	// NameBase64 holds the name's bytes when they are not UTF-8 (JSON
	// strings are, so Name shows them as U+FFFD), so that a script can
	// still name the file.
	NameBase64 string `json:"name_base64,omitempty"`
	Type       string `json:"type"` // as stat's: "regular file", "directory", "symbolic link", ...
	Mode       string `json:"mode"` // permission bits, octal ("0644")
	Nlink      uint32 `json:"nlink"`
	Size       uint64 `json:"size"`
	UID        uint32 `json:"uid"`
	GID        uint32 `json:"gid"`
	Mtime      string `json:"mtime"` // RFC 3339
	FID        string `json:"fid"`
	Target     string `json:"symlink_target,omitempty"`
	// SizeUnknown: the file's size lives on an OST that did not answer
	// (size is then 0); ls exits 1.
	SizeUnknown bool `json:"size_unknown,omitempty"`
	// Error: the entry is listed but its attributes could not be read
	// (why, as on standard error); only name, type and fid are then
	// given, and ls exits 1.
	Error string `json:"error,omitempty"`
}

// MarshalJSON leaves out the attributes of an entry that could not be
// stat'ed: zeros there would read as a real empty file of mode 0 from 1970.
func (le LsEntry) MarshalJSON() ([]byte, error) {
	type plain LsEntry // without this method
	if le.Error == "" {
		return json.Marshal(plain(le))
	}
	return json.Marshal(struct {
		Name       string `json:"name"`
		NameBase64 string `json:"name_base64,omitempty"`
		Type       string `json:"type"`
		FID        string `json:"fid"`
		Error      string `json:"error"`
	}{le.Name, le.NameBase64, le.Type, le.FID, le.Error})
}

// Ls lists a directory (or describes a file), sorted by name. Without a
// path ("") it lists the current directory if that is on a Nacre mount,
// else the root. asJSON prints an array of LsEntry. A symbolic link given
// as the path is described itself with long or asJSON, as by ls -l.
func Ls(ctx context.Context, e Env, arg string, long, asJSON bool) error {
	if arg == "" {
		arg = "/"
		if e.cwdOnMount() {
			arg = "."
		}
	}
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	p := ps[0]
	attrs := long || asJSON
	// As ls(1): a symbolic link given as the path is shown itself with -l
	// (and --json, which has its target), and followed otherwise, so that
	// the directory it names is listed; a trailing slash follows it always.
	trailing := strings.HasSuffix(arg, "/")
	follow := !attrs || trailing
	ino, err := c.Resolve(ctx, p, follow)
	if follow && !trailing && errors.Is(err, syscall.ENOENT) {
		// A dangling link is still listed (by its name), as ls does.
		if l, lerr := c.Resolve(ctx, p, false); lerr == nil && l.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			ino, err = l, nil
		}
	}
	if err != nil {
		return opError("ls", arg, err)
	}
	type row struct {
		name string
		ino  *pb.Inode
		ent  *pb.DirEntry
		// noSize: the size is the OSTs' to tell and they could not
		// (one is down); the MDT's figure is not shown as if it were.
		noSize bool
		// err: why the entry's attributes could not be read.
		err string
	}
	var rows []row
	if isDir(ino) {
		ents, err := c.ReadDirAll(ctx, fidOf(ino), attrs)
		if err != nil {
			return opError("ls", arg, err)
		}
		for _, en := range ents {
			rows = append(rows, row{name: string(en.Name), ino: en.Inode, ent: en})
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	} else {
		rows = append(rows, row{name: path.Base(p), ino: ino})
	}
	if !asJSON && isTerminal(e.Out) {
		// As ls(1) at a terminal: a name with a newline or another
		// control byte, or bytes that are not UTF-8, is shown quoted, so
		// that one name is one line and nothing reaches the terminal as
		// a control sequence. Piped, names go out as they are.
		for i := range rows {
			rows[i].name = QuoteName(rows[i].name)
		}
	}
	if !attrs {
		for _, r := range rows {
			fmt.Fprintln(e.Out, r.name)
		}
		return nil
	}
	failed := false
	for i, r := range rows {
		if r.ino == nil && r.ent != nil {
			// The MDT lists an entry whose object it could not read
			// (a dangling entry, an OI being rebuilt, a file removed
			// meanwhile): ask for it alone, to show it if it is there
			// now and else to say why, as ls does ("cannot access").
			ino, err := c.Getattr(ctx, fid.FromPB(r.ent.Fid))
			if err != nil {
				rows[i].err, failed = shortMessage(err), true
				fmt.Fprintf(e.Stderr(), "nacre: ls: cannot access %s: %s\n", path.Join(arg, r.name), rows[i].err)
				continue
			}
			rows[i].ino, r.ino = ino, ino
		}
		if r.ino != nil && isReg(r.ino) && r.ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0 {
			s, err := c.Stat(ctx, fidOf(r.ino))
			if err != nil {
				// As ls does for what it cannot stat: said on standard
				// error, the listing goes on, the exit status is 1.
				fmt.Fprintf(e.Stderr(), "nacre: ls: %s: size unknown: %v\n", path.Join(arg, r.name), err)
				rows[i].noSize, failed = true, true
				continue
			}
			rows[i].ino = s
		}
	}
	done := func() error {
		if failed {
			return ErrReported
		}
		return nil
	}
	if asJSON {
		out := make([]LsEntry, 0, len(rows))
		for _, r := range rows {
			le := LsEntry{Name: r.name}
			if !utf8.ValidString(r.name) {
				le.NameBase64 = base64.StdEncoding.EncodeToString([]byte(r.name))
			}
			if i := r.ino; i != nil {
				le.Type, le.Mode, le.Nlink, le.Size, le.UID, le.GID = typeName(i.Mode), fmt.Sprintf("%04o", i.Mode&0o7777), i.Nlink, i.Size, i.Uid, i.Gid
				le.Mtime, le.FID, le.Target = time.Unix(0, i.MtimeNs).Format(time.RFC3339Nano), fidOf(i).String(), string(i.Symlink)
				if r.noSize {
					le.Size, le.SizeUnknown = 0, true
				}
			} else if r.ent != nil { // no attributes: what the entry says
				le.Type, le.FID, le.Error = typeName(r.ent.Type<<12), fid.FromPB(r.ent.Fid).String(), r.err
			}
			out = append(out, le)
		}
		if err := JSON(e.Out, out); err != nil {
			return err
		}
		return done()
	}
	for _, r := range rows {
		i := r.ino
		if i == nil {
			fmt.Fprintf(e.Out, "?????????? %s (no attributes)\n", r.name)
			continue
		}
		name := r.name
		if i.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			name += " -> " + string(i.Symlink)
		}
		mode := ModeString(i.Mode)
		if i.Flags&uint32(pb.InodeFlag_INODE_FLAG_ACL) != 0 {
			mode += "+" // as ls -l marks a file with an ACL
		}
		size := fmt.Sprint(i.Size)
		if r.noSize {
			size = "?"
		}
		fmt.Fprintf(e.Out, "%s %3d %5d %5d %12s %s %s\n", mode, i.Nlink, i.Uid, i.Gid, size,
			time.Unix(0, i.MtimeNs).Format("Jan _2 15:04"), name)
	}
	return done()
}

// Mkdir makes directories (and their parents with parents; then an
// existing directory is no error).
// A mode of -1 is mkdir(1)'s default: 0777 less the umask (which the MDT
// applies, unless the parent has a default ACL); parents made by -p also
// get u+wx, as mkdir -p gives them.
func Mkdir(ctx context.Context, e Env, args []string, parents bool, mode int) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("mkdir")
	for i, op := range ops {
		if op.Err == nil {
			op.Err = mkdir(ctx, c, op.Path, parents, mode)
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
		}
	}
	return r.result()
}

func mkdir(ctx context.Context, c *client.Client, p string, parents bool, mode int) error {
	made := func(parent fid.FID, name string, last bool) (*pb.Inode, error) {
		m, mask := uint32(0o777), umask()
		switch {
		case mode >= 0 && last:
			m, mask = uint32(mode), 0
		case !last:
			m = (0o777 &^ mask) | 0o300
			mask = 0
		}
		ino, _, err := c.Create(ctx, parent, name, syscall.S_IFDIR|m&0o7777, client.CreateOpts{Exclusive: true, Umask: mask})
		return ino, err
	}
	if !parents {
		parent, name, err := c.ResolveParent(ctx, p)
		if errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("no such file or directory: a parent directory is missing (-p makes parents)")
		}
		if err != nil {
			return err
		}
		_, err = made(fidOf(parent), name, true)
		return err
	}
	parts := strings.FieldsFunc(p, func(r rune) bool { return r == '/' })
	cur := fid.Root
	done := "/"
	for i, part := range parts {
		done = path.Join(done, part)
		ino, err := c.Lookup(ctx, cur, part)
		if errors.Is(err, syscall.ENOENT) {
			ino, err = made(cur, part, i == len(parts)-1)
			if errors.Is(err, syscall.EEXIST) {
				ino, err = c.Lookup(ctx, cur, part)
			}
		}
		if err == nil && ino.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			ino, err = c.Resolve(ctx, done, true) // a symbolic link to a directory is followed
		}
		if err != nil {
			return err
		}
		if !isDir(ino) {
			return fmt.Errorf("%s is not a directory", done)
		}
		cur = fidOf(ino)
	}
	return nil
}

// StripeOpts are the -c/-S/-i options of put and setstripe.
type StripeOpts struct {
	Count  int    // 0 = default, -1 = all OSTs
	Size   uint64 // 0 = default
	Offset int    // -1 = any
}

func (s StripeOpts) layout() (*pb.Layout, error) {
	if s.Size != 0 {
		if err := layout.CheckStripeSize(s.Size); err != nil {
			return nil, err
		}
	}
	if s.Count < -1 || s.Count > layout.MaxStripeCount {
		return nil, fmt.Errorf("stripe count %d is invalid: use -1 (all OSTs) or 1..%d", s.Count, layout.MaxStripeCount)
	}
	if s.Count == 0 && s.Size == 0 && s.Offset < 0 {
		return nil, nil
	}
	return &pb.Layout{Pattern: 1, StripeCount: int32(s.Count), StripeSize: uint32(s.Size), StripeOffset: int32(s.Offset)}, nil
}

// checkOSTs refuses a first OST (-i) that the file system does not have.
func (s StripeOpts) checkOSTs(ctx context.Context, c *client.Client) error {
	if s.Offset < 0 {
		return nil
	}
	cfg, err := c.Config(ctx)
	if err != nil {
		return err
	}
	return checkOSTIndex(s.Offset, cfg.Targets)
}

func checkOSTIndex(index int, targets []*pb.TargetInfo) error {
	seen := map[uint32]bool{}
	for _, t := range targets {
		if t.Kind == pb.TargetKind_TARGET_OST {
			seen[t.Index] = true // once per OST, however many replicas
		}
	}
	if index >= 0 && index <= math.MaxUint32 && seen[uint32(index)] {
		return nil
	}
	idx := make([]int, 0, len(seen))
	for i := range seen {
		idx = append(idx, int(i))
	}
	sort.Ints(idx)
	valid := make([]string, len(idx))
	for k, i := range idx {
		valid[k] = strconv.Itoa(i)
	}
	if len(valid) == 0 {
		return fmt.Errorf("OST index %d: the file system has no OSTs", index)
	}
	return fmt.Errorf("OST index %d is not in the file system: valid indexes are %s", index, strings.Join(valid, ", "))
}

// copyBuf is the size of one put/get call: 16 stripes of 1 MiB in flight.
const copyBuf = 16 << 20

// partialSuffix marks the temporary files put and get write
// (".NAME.nacre-partial-RANDOM" in the destination's directory).
const partialSuffix = ".nacre-partial"

// Put copies a local file into the file system; local "-" is standard
// input (e.Stdin if set). It writes a temporary file in the destination's
// directory and renames it over the destination once every byte is
// written and durable, so an interrupted or failed put leaves the
// destination as it was (and removes the temporary file; only a client
// killed outright leaves one behind). The destination is a new file with
// the source's permission bits less the umask, as cp (from standard input: 0666 less it,
// as a shell redirection) and the layout asked, else the layout of the
// file it replaces, else its directory's default. A file that would get
// fewer stripes than the first two ask is not written (checkStripes).
// Holes of the source, and blocks of zeros, stay holes (copyIn).
func Put(ctx context.Context, e Env, local, remoteArg string, so StripeOpts) error {
	var src io.Reader
	var perm uint32
	if local == "-" {
		src = e.Stdin
		if src == nil {
			src = os.Stdin
		}
		perm = 0o666
	} else {
		f, err := os.Open(local)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		if st.IsDir() {
			return fmt.Errorf("put %s: is a directory (copy files one by one)", local)
		}
		// As cp(1) makes a new file: the source's bits less the umask
		// (the MDT applies it, unless the directory has a default ACL,
		// which replaces it as in the kernel).
		src, perm = f, uint32(st.Mode().Perm())
	}
	l, err := so.layout()
	if err != nil {
		return err
	}
	c, ps, err := e.open(ctx, remoteArg)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := so.checkOSTs(ctx, c); err != nil {
		return err
	}
	remote := ps[0]
	intoDir := strings.HasSuffix(remoteArg, "/")
	if !intoDir {
		if ino, err := c.Resolve(ctx, remote, true); err == nil && isDir(ino) {
			intoDir = true
		}
	}
	if intoDir {
		if local == "-" {
			return fmt.Errorf("put - %s: is a directory; name the file to write standard input to (put - %s/NAME)", remoteArg, strings.TrimSuffix(remoteArg, "/"))
		}
		remote = strings.TrimSuffix(remote, "/") + "/" + path.Base(local)
	}
	parent, name, err := c.ResolveParent(ctx, remote)
	if err != nil {
		return opError("put", remoteArg, err)
	}
	if len(name) > 255 {
		// Known now, not after the data is copied (the rename would
		// refuse it).
		return opError("put", remoteArg, &rpc.Errno{Op: "name", Errno: syscall.ENAMETOOLONG, Msg: fmt.Sprintf("a name of %d bytes (at most 255)", len(name))})
	}
	dir := fidOf(parent)
	asked := fmt.Sprintf("asked (-c %d)", so.Count)
	if l == nil {
		// Replacing a file keeps its layout (as `lfs setstripe F; cp S F`).
		if old, err := c.Lookup(ctx, dir, name); err == nil && isReg(old) && old.Layout != nil {
			l = &pb.Layout{Pattern: old.Layout.Pattern, StripeCount: old.Layout.StripeCount, StripeSize: old.Layout.StripeSize, StripeOffset: old.Layout.StripeOffset}
			asked = "of the file it replaces"
		}
	}
	tmp := partialName(name)
	ino, _, err := c.Create(ctx, dir, tmp, syscall.S_IFREG|perm, client.CreateOpts{Exclusive: true, Layout: l, Umask: umask()})
	if err != nil {
		if mdtDown(err) || errors.Is(err, syscall.ENOSPC) {
			return opError("put", remoteArg, err)
		}
		return fmt.Errorf("put %s: %w", remoteArg, err) // err names tmp
	}
	done := false
	defer func() {
		if done {
			return
		}
		// Also after an interrupt (ctx is cancelled then).
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := c.Unlink(cctx, dir, tmp); err != nil && !errors.Is(err, syscall.ENOENT) {
			fmt.Fprintf(e.Stderr(), "nacre: put %s: could not remove the partial file %s: %v\n", remoteArg, tmp, err)
		}
	}()
	if err := checkStripes(ctx, c, l, ino, asked); err != nil {
		return fmt.Errorf("put %s: %w", remoteArg, err)
	}
	f := c.OpenInode(ino)
	what := local
	if local == "-" {
		what = "standard input"
	}
	total := int64(-1) // standard input: not known
	if lf, ok := src.(*os.File); ok && local != "-" {
		if st, err := lf.Stat(); err == nil && st.Mode().IsRegular() {
			total = st.Size()
		}
	}
	p := newProgress(e, "put "+remoteArg, total)
	_, err = copyIn(ctx, f, src, local != "-", what, p)
	p.end()
	if err != nil {
		var re *remoteError
		if errors.As(err, &re) {
			return opError("put", remoteArg, re.err)
		}
		return err
	}
	if err := f.Close(ctx); err != nil {
		return opError("put", remoteArg, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := c.Rename(ctx, dir, tmp, dir, name, 0); err != nil {
		if mdtDown(err) {
			return opError("put", remoteArg, err)
		}
		return fmt.Errorf("put %s: rename %s over it: %w", remoteArg, tmp, err)
	}
	done = true
	return nil
}

// mdtDown reports whether err is an MDT that did not answer.
func mdtDown(err error) bool {
	var d *client.MDTDownError
	return errors.As(err, &d)
}

// checkStripes refuses a new file (ino) that got fewer stripes than its
// layout l asks (asked says where the count comes from), which the MDS
// does when OSTs are down or full: as Lustre fails a create whose stripe
// count was given rather than defaulted, a put neither halves a file's
// bandwidth nor moves all of it onto fewer OSTs without being told to. A
// count of -1 (every OST) and a directory's default are what the OSTs up
// can give.
func checkStripes(ctx context.Context, c *client.Client, l *pb.Layout, ino *pb.Inode, asked string) error {
	got, want, why, short := stripesShort(ctx, c, l, ino)
	if !short {
		return nil
	}
	if tooFewOSTs(why) {
		return fmt.Errorf("not written: it would have %s, not the %d %s, as %s; give -c %d, or -c -1 for every OST",
			plural(got, "stripe"), want, asked, why, got)
	}
	return fmt.Errorf("not written: it would have %s, not the %d %s, as %s; %sgive -c %d to accept %s",
		plural(got, "stripe"), want, asked, why, retryHint(why), got, plural(got, "stripe"))
}

const (
	onlyOSTs = "the file system has only "
	fullOSTs = " is full (check `nacre df`)"
)

// retryHint is what to do about stripesShort's reason, followed by ", or ".
func retryHint(why string) string {
	switch {
	case tooFewOSTs(why):
		return ""
	case strings.Contains(why, " full (check"):
		return "remove files to make room, or "
	}
	return "try again once the OSTs are up, or "
}

// tooFewOSTs says whether stripesShort's reason is that the file system
// has fewer OSTs than asked (waiting for OSTs to come up does not help).
func tooFewOSTs(why string) bool { return strings.HasPrefix(why, onlyOSTs) }

// stripesShort reports whether ino got fewer stripes than l asks, how
// many of how many, and why (the OSTs that are down, if any).
func stripesShort(ctx context.Context, c *client.Client, l *pb.Layout, ino *pb.Inode) (got, want int, why string, short bool) {
	if l == nil || l.StripeCount <= 0 || ino.Layout == nil {
		return 0, 0, "", false
	}
	want, got = int(l.StripeCount), len(ino.Layout.Objects)
	if got >= want {
		return got, want, "", false
	}
	why = "no more OSTs could take an object (check `nacre status` and `nacre df`)"
	if cfg, err := c.Config(ctx); err == nil {
		seen := map[uint32]bool{}
		osts := map[uint32]bool{}
		var down []string
		for _, t := range cfg.Targets {
			if t.Kind == pb.TargetKind_TARGET_OST {
				osts[t.Index] = true
			}
			if t.Kind == pb.TargetKind_TARGET_OST && t.State != "up" && !seen[t.Index] {
				seen[t.Index] = true
				down = append(down, fmt.Sprintf("OST%04x", t.Index))
			}
		}
		sort.Strings(down)
		// The MDS leaves out an OST that is full, as one that is down; the
		// MGS has its last figures.
		var full []string
		seen = map[uint32]bool{}
		for _, t := range cfg.Targets {
			st := t.Statfs
			if t.Kind == pb.TargetKind_TARGET_OST && t.State == "up" && !seen[t.Index] && st != nil && st.BytesTotal > 0 && st.BytesAvail < reserve.FullMargin(st.BytesTotal) {
				seen[t.Index] = true
				full = append(full, fmt.Sprintf("OST%04x", t.Index))
			}
		}
		sort.Strings(full)
		switch {
		case len(osts) < want:
			why = fmt.Sprintf(onlyOSTs+"%s (a file gets at most one stripe per OST)", plural(len(osts), "OST"))
		case len(down) == 0 && len(full) == 1:
			why = full[0] + fullOSTs
		case len(down) == 0 && len(full) > 1:
			why = strings.Join(full, ", ") + strings.Replace(fullOSTs, " is ", " are ", 1)
		case len(down) == 0:
		case len(down) == 1:
			why = down[0] + " is down (check `nacre status`)"
		default:
			why = strings.Join(down, ", ") + " are down (check `nacre status`)"
		}
	}
	return got, want, why, true
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// QuoteName returns name as ls(1) shows it at a terminal (its
// shell-escape style): unchanged if it is printable UTF-8 with no
// control character, else as $'...' with \n, \t, \\, \' and \xHH escapes,
// which a shell reads back as the same bytes.
func QuoteName(name string) string {
	plain := utf8.ValidString(name)
	for _, r := range name {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			plain = false
		}
	}
	if plain {
		return name
	}
	var b strings.Builder
	b.WriteString("$'")
	for i := 0; i < len(name); {
		r, n := utf8.DecodeRuneInString(name[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, "\\x%02x", name[i])
		case r == '\n':
			b.WriteString("\\n")
		case r == '\t':
			b.WriteString("\\t")
		case r == '\\':
			b.WriteString("\\\\")
		case r == '\'':
			b.WriteString("\\'")
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			for _, c := range []byte(name[i : i+n]) {
				fmt.Fprintf(&b, "\\x%02x", c)
			}
		default:
			b.WriteString(name[i : i+n])
		}
		i += n
	}
	b.WriteString("'")
	return b.String()
}

// partialName is the name of put's temporary file for name (at most 255
// bytes, so that any name that fits gets one).
func partialName(name string) string {
	var r [4]byte
	rand.Read(r[:])
	suffix := partialSuffix + "-" + hex.EncodeToString(r[:])
	if limit := 255 - 1 - len(suffix); len(name) > limit {
		name = name[:limit]
	}
	return "." + name + suffix
}

// umask is the process's file mode creation mask.
func umask() uint32 {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return uint32(m)
}

// Get copies a file out of the file system ("-" writes to standard
// output), as cp(1) writes its destination: into LOCAL/NAME if LOCAL is a
// directory; through a symbolic link to the file it names (the link
// stays); straight into a FIFO, device or other file that is not a
// regular file (it is not replaced); and to a regular file, new or not,
// through a hidden temporary file beside it (".NAME.nacre-partial-XXXXXXXX",
// unique to this get) renamed over it once every byte is on the local
// disk, so that an interrupted or failed get leaves it as it was. A file
// replaced keeps its permission bits (and owner, where allowed); a new
// file gets the remote file's permission bits less the umask. Blocks of
// zeros become holes in a regular file written (sparseFile).
func Get(ctx context.Context, e Env, arg, local string) error {
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	remote := ps[0]
	ino, err := c.Resolve(ctx, remote, true)
	if err != nil {
		return opError("get", arg, err)
	}
	if !isReg(ino) {
		return fmt.Errorf("get %s: not a regular file", arg)
	}
	if local == "-" {
		p := newProgressBeside(e, "get "+arg, int64(ino.Size))
		defer p.end()
		if err := copyOut(ctx, c, ino, e.Out, p); err != nil {
			return opError("get", arg, err)
		}
		return nil
	}
	if st, err := os.Stat(local); err == nil && st.IsDir() {
		local = filepath.Join(local, path.Base(remote))
	}
	p := newProgress(e, "get "+arg, int64(ino.Size))
	err = writeLocal(local, os.FileMode(ino.Mode&0o777), func(w io.Writer) error {
		return copyOut(ctx, c, ino, w, p)
	})
	p.end()
	var le *localError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &le):
		return fmt.Errorf("get %s: %w", arg, err)
	}
	return opError("get", arg, err)
}

// localError is a failure to write Get's local file (not to read the
// remote one); its text names the local file.
type localError struct{ err error }

func (e *localError) Error() string { return e.err.Error() }
func (e *localError) Unwrap() error { return e.err }

// localWriter makes the write errors of Get's local file localErrors.
type localWriter struct {
	w    io.Writer
	name string
}

func (l localWriter) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if err != nil {
		err = &localError{fmt.Errorf("cannot write %s: %w", l.name, unwrapPath(err))}
	}
	return n, err
}

// writeLocal writes a local file (Get's destination) with fill: see Get.
// perm is the permission bits of a new file, before the umask. Its own
// errors, and fill's errors writing the file, are *localErrors naming
// local; fill's other errors are returned as they are.
func writeLocal(local string, perm os.FileMode, fill func(io.Writer) error) error {
	var fillErr error
	err := writeLocalFile(local, perm, func(w io.Writer) error {
		fillErr = fill(localWriter{w, local})
		return fillErr
	})
	if err == nil || err == fillErr {
		return err
	}
	return &localError{err}
}

// writeLocalFile is writeLocal; fill's errors are returned as they are.
func writeLocalFile(local string, perm os.FileMode, fill func(io.Writer) error) error {
	dest := local
	if lst, err := os.Lstat(local); err == nil && lst.Mode()&os.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(local)
		if err != nil {
			link, _ := os.Readlink(local)
			if errors.Is(err, fs.ErrNotExist) {
				// As cp: a dangling link is not written through (it may
				// point where the user did not mean to create a file).
				return fmt.Errorf("cannot write %s: it is a symbolic link to %s, which does not exist (not writing through a dangling link; remove the link or create %s)", local, link, link)
			}
			return fmt.Errorf("cannot write %s (a symbolic link to %s): %w", local, link, unwrapPath(err))
		}
		dest = target
	}
	st, err := os.Stat(dest)
	switch {
	case err == nil && st.IsDir():
		return fmt.Errorf("cannot write %s: it is a directory", local)
	case err == nil && !st.Mode().IsRegular():
		// A FIFO, a device, a socket: write into it (`get F /dev/null`),
		// never replace it with a regular file.
		return writeInto(local, dest, fill)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	return replaceFile(local, dest, st, perm, fill)
}

// writeInto writes into the existing file dest (not a regular file),
// named local in messages.
func writeInto(local, dest string, fill func(io.Writer) error) error {
	// O_TRUNC as cp's; devices and FIFOs ignore it.
	f, err := os.OpenFile(dest, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	if err := fill(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	return nil
}

// replaceFile writes the regular file dest (old: its attributes, nil if it
// does not exist yet; local: its name in messages) through a temporary
// file in its directory, renamed over it once durable.
func replaceFile(local, dest string, old os.FileInfo, perm os.FileMode, fill func(io.Writer) error) (err error) {
	dir, name := filepath.Split(dest)
	if dir == "" {
		dir = "."
	}
	// O_EXCL with the mode: the kernel applies the umask, and a temporary
	// name is never shared by two gets (or taken from another file).
	var f *os.File
	for try := 0; ; try++ {
		tmp := filepath.Join(dir, partialName(name))
		f, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err == nil || !errors.Is(err, fs.ErrExist) || try == 100 {
			break
		}
	}
	if err != nil {
		if old != nil {
			// The file may be writable when its directory is not (or is
			// no place for new files, as /proc).
			return fmt.Errorf("cannot write %s: cannot create the temporary file that replaces it in %s: %w", local, dir, unwrapPath(err))
		}
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if old != nil {
		// The file replaced keeps its owner (when allowed: only root may
		// give a file away) and then its mode, as cp writing into it would.
		if s, ok := old.Sys().(*syscall.Stat_t); ok && (int(s.Uid) != os.Geteuid() || int(s.Gid) != os.Getegid()) {
			f.Chown(int(s.Uid), int(s.Gid))
		}
		if err := f.Chmod(old.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)); err != nil {
			return fmt.Errorf("cannot write %s: give the temporary file %s its mode: %w", local, tmp, unwrapPath(err))
		}
	}
	// The file is new: blocks of zeros can stay holes (sparseFile).
	sf := &sparseFile{f: f}
	if err := fill(sf); err != nil {
		return err
	}
	if err := sf.finish(); err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("cannot write %s: %w", local, unwrapPath(err))
	}
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("cannot write %s: rename the temporary file %s over it: %w", local, tmp, unwrapPath(err))
	}
	return nil
}

// unwrapPath drops an *fs.PathError's operation and path, for messages
// that name the file themselves.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// copyOut writes the regular file ino to dst, keeping it (client.Hold)
// so that a removal elsewhere meanwhile does not cut the copy short; p is
// told how far the copy is.
func copyOut(ctx context.Context, c *client.Client, ino *pb.Inode, dst io.Writer, p *progress) error {
	// The OSTs serve any object: the read permission is asked here, as
	// the kernel asks before a mount reads.
	if ok, err := c.MayAccess(ctx, ino, 4); err != nil {
		return err
	} else if !ok {
		return syscall.EACCES
	}
	_, release, err := c.Hold(ctx, fidOf(ino))
	if err != nil {
		return err
	}
	defer release()
	f := c.OpenInode(ino)
	buf := make([]byte, copyBuf)
	var off uint64
	for {
		n, err := f.ReadAt(ctx, buf, off)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
			off += uint64(n)
			p.at(off)
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Cat writes files to the output, in order; a file that cannot be read
// is reported and the next one written.
func Cat(ctx context.Context, e Env, args []string) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("cat")
	for i, op := range ops {
		if op.Err == nil {
			op.Err = func() error {
				ino, err := c.Resolve(ctx, op.Path, true)
				if err != nil {
					return err
				}
				if isDir(ino) {
					return fmt.Errorf("is a directory")
				}
				if !isReg(ino) {
					return fmt.Errorf("not a regular file")
				}
				return copyOut(ctx, c, ino, e.Out, nil)
			}()
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
		}
	}
	return r.result()
}

// StatInfo is the JSON form of `nacre stat`.
type StatInfo struct {
	Path   string `json:"path"`
	FID    string `json:"fid"`
	Type   string `json:"type"`
	Mode   string `json:"mode"`
	Nlink  uint32 `json:"nlink"`
	UID    uint32 `json:"uid"`
	GID    uint32 `json:"gid"`
	ProjID uint32 `json:"projid"`
	Size   uint64 `json:"size"`
	Blocks uint64 `json:"blocks"`
	Atime  string `json:"atime"`
	Mtime  string `json:"mtime"`
	Ctime  string `json:"ctime"`
	Target string `json:"symlink_target,omitempty"`
	// Error: why the path could not be stat'ed (one of several operands;
	// stat exits 1); only path is then given.
	Error string `json:"error,omitempty"`
}

// MarshalJSON gives a path that could not be stat'ed as {path, error}:
// zeros in the other fields would read as a real file.
func (si StatInfo) MarshalJSON() ([]byte, error) {
	type plain StatInfo // without this method
	if si.Error == "" {
		return json.Marshal(plain(si))
	}
	return json.Marshal(struct {
		Path  string `json:"path"`
		Error string `json:"error"`
	}{si.Path, si.Error})
}

func typeName(mode uint32) string {
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return "directory"
	case syscall.S_IFLNK:
		return "symbolic link"
	case syscall.S_IFIFO:
		return "fifo"
	case syscall.S_IFSOCK:
		return "socket"
	case syscall.S_IFCHR:
		return "character device"
	case syscall.S_IFBLK:
		return "block device"
	}
	return "regular file"
}

// Stat prints the attributes of each path (a symbolic link's own). With
// asJSON it prints a StatInfo for one path, an array of them for several.
func Stat(ctx context.Context, e Env, args []string, asJSON bool) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("stat")
	var infos []StatInfo
	for i, op := range ops {
		if op.Err == nil {
			var ino *pb.Inode
			if ino, op.Err = c.Resolve(ctx, op.Path, false); op.Err == nil {
				si := statInfo(op.Arg, ino)
				infos = append(infos, si)
				if !asJSON {
					writeStat(e.Out, si, ino.Mode)
				}
			}
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
			if len(args) > 1 {
				// The array has an element per operand, in order, so
				// that a script can pair them up and see which failed.
				why := strings.TrimPrefix(operandMessage("stat", op.Arg, op.Err), "stat "+op.Arg+": ")
				infos = append(infos, StatInfo{Path: op.Arg, Error: why})
			}
		}
	}
	if asJSON {
		if err := jsonOneOrMany(e.Out, len(args), infos); err != nil {
			return err
		}
	}
	return r.result()
}

// jsonOneOrMany prints the result of a command given n operands: the one
// object for one operand (when it succeeded), an array for several.
func jsonOneOrMany[T any](w io.Writer, n int, items []T) error {
	if n == 1 {
		if len(items) == 0 {
			return nil
		}
		return JSON(w, items[0])
	}
	if items == nil {
		items = []T{}
	}
	return JSON(w, items)
}

func statInfo(arg string, ino *pb.Inode) StatInfo {
	ts := func(ns int64) string { return time.Unix(0, ns).Format(time.RFC3339Nano) }
	return StatInfo{Path: arg, FID: fidOf(ino).String(), Type: typeName(ino.Mode), Mode: fmt.Sprintf("%04o", ino.Mode&0o7777),
		Nlink: ino.Nlink, UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid, Size: ino.Size, Blocks: ino.Blocks,
		Atime: ts(ino.AtimeNs), Mtime: ts(ino.MtimeNs), Ctime: ts(ino.CtimeNs), Target: string(ino.Symlink)}
}

func writeStat(w io.Writer, si StatInfo, mode uint32) {
	fmt.Fprintf(w, "  File: %s", si.Path)
	if si.Target != "" {
		fmt.Fprintf(w, " -> %s", si.Target)
	}
	fmt.Fprintf(w, "\n   FID: %s\n  Size: %-12d Blocks: %-8d %s\n", si.FID, si.Size, si.Blocks, si.Type)
	fmt.Fprintf(w, "Access: (%s/%s)  Uid: %d  Gid: %d  Links: %d  Project: %d\n", si.Mode, ModeString(mode), si.UID, si.GID, si.Nlink, si.ProjID)
	fmt.Fprintf(w, "Access: %s\nModify: %s\nChange: %s\n", si.Atime, si.Mtime, si.Ctime)
}

// RmOpts are rm's options.
type RmOpts struct {
	Recursive bool // remove directories and their contents
	Force     bool // a name that does not exist is no error
}

// Rm removes files, and directories with o.Recursive, as rm(1): every
// operand is tried; with o.Force a missing one is no error. It refuses
// the file system root and paths ending in . or .., as rm does.
func Rm(ctx context.Context, e Env, args []string, o RmOpts) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("rm")
	for i, op := range ops {
		if op.Err == nil {
			op.Err = rm(ctx, c, op, o, r)
		}
		if op.Err != nil {
			if o.Force && errors.Is(op.Err, syscall.ENOENT) {
				continue
			}
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
		}
	}
	return r.result()
}

// errTreeReported: removeTree reported what it could not remove.
var errTreeReported = errors.New("directory not empty: its contents could not all be removed (see above)")

func rm(ctx context.Context, c *client.Client, op operand, o RmOpts, r *reporter) error {
	switch base := path.Base(strings.TrimRight(op.Arg, "/")); {
	case op.AtMountPoint:
		return fmt.Errorf("refusing to remove the mount point %s (unmount it first, or name the directory by its path from the file system root)", op.Mount)
	case strings.Trim(op.Path, "/") == "":
		return fmt.Errorf("refusing to remove the file system root")
	case base == "." || base == "..":
		return fmt.Errorf("refusing to remove . or ..")
	}
	parent, name, err := c.ResolveParent(ctx, op.Path)
	if err != nil {
		return err
	}
	ino, err := c.Lookup(ctx, fidOf(parent), name)
	if err != nil {
		return err
	}
	if !isDir(ino) {
		if strings.HasSuffix(op.Arg, "/") {
			return fmt.Errorf("not a directory")
		}
		_, err := c.Unlink(ctx, fidOf(parent), name)
		return err
	}
	if !o.Recursive {
		return fmt.Errorf("is a directory (use -r to remove it and its contents)")
	}
	if !removeTree(ctx, c, fidOf(ino), strings.TrimSuffix(op.Arg, "/"), r) {
		return errTreeReported
	}
	if err := c.Rmdir(ctx, fidOf(parent), name); err != nil && !(errors.Is(err, syscall.ENOENT) && o.Force) {
		return err
	}
	return nil
}

// removeTree empties a directory (shown as p in messages), reporting each
// entry it cannot remove and going on with the others; it returns whether
// the directory is empty.
func removeTree(ctx context.Context, c *client.Client, dir fid.FID, p string, r *reporter) bool {
	for {
		ents, err := c.ReadDirAll(ctx, dir, false)
		if err != nil {
			r.fail(p, err)
			return false
		}
		if len(ents) == 0 {
			return true
		}
		ok := true
		var files []string
		for _, en := range ents {
			if ctx.Err() != nil {
				return false
			}
			name := string(en.Name)
			child := p + "/" + name
			if en.Type != syscall.S_IFDIR>>12 {
				files = append(files, name)
				continue
			}
			if !removeTree(ctx, c, fid.FromPB(en.Fid), child, r) {
				ok = false
				continue
			}
			if err := c.Rmdir(ctx, dir, name); err != nil && !errors.Is(err, syscall.ENOENT) {
				r.fail(child, err)
				ok = false
			}
		}
		for i, err := range unlinkAll(ctx, c, dir, files) {
			if err != nil && !errors.Is(err, syscall.ENOENT) && ctx.Err() == nil {
				r.fail(p+"/"+files[i], err)
				ok = false
			}
		}
		if !ok || ctx.Err() != nil {
			return false
		}
		// Entries made meanwhile: read again.
	}
}

// rmWorkers is how many unlinks of one directory rm -r keeps in flight:
// each waits for the MDT's durable commit, which takes the concurrent ones
// in one sync, so one at a time removed trees at a third of the rate
// they were made.
const rmWorkers = 8

// unlinkAll unlinks names in dir, rmWorkers at a time, and returns each
// one's error.
func unlinkAll(ctx context.Context, c *client.Client, dir fid.FID, names []string) []error {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	sem := make(chan struct{}, rmWorkers)
	for i, name := range names {
		if ctx.Err() != nil {
			break // interrupted: the caller says so once
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			_, errs[i] = c.Unlink(ctx, dir, name)
		}()
	}
	wg.Wait()
	return errs
}

// Mv renames SOURCE to DEST (args: SOURCE DEST), or moves each SOURCE
// into the directory DEST (args: SOURCE... DEST); a DEST that is a
// directory receives the source inside it.
func Mv(ctx context.Context, e Env, args []string) error {
	if len(args) < 2 {
		return fmt.Errorf("mv: give a source and a destination")
	}
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	srcs, dst := ops[:len(ops)-1], ops[len(ops)-1]
	if dst.Err != nil {
		return fmt.Errorf("mv: destination %s: %w", dst.Arg, dst.Err)
	}
	into, err := targetDir(ctx, c, dst, len(srcs), "moving")
	if err != nil {
		return fmt.Errorf("mv: %w", err)
	}
	r := e.reporter("mv")
	for i, op := range srcs {
		if op.Err == nil {
			op.Err = func() error {
				sp, sn, err := c.ResolveParent(ctx, op.Path)
				if err != nil {
					return err
				}
				to, toArg := dst.Path, dst.Arg
				if into {
					to = strings.TrimSuffix(to, "/") + "/" + sn
					toArg = strings.TrimSuffix(toArg, "/") + "/" + sn
				}
				dp, dn, err := c.ResolveParent(ctx, to)
				if err != nil {
					return atOtherPath("to", toArg, err)
				}
				// The destination's directory exists: a missing name now is
				// the source's, anything else is about the destination.
				err = c.Rename(ctx, fidOf(sp), sn, fidOf(dp), dn, 0)
				if err != nil && !errors.Is(err, syscall.ENOENT) {
					return atOtherPath("to", toArg, err)
				}
				return err
			}()
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args[:len(srcs)], i, op.Err)
			}
			r.fail(op.Arg, op.Err)
		}
	}
	return r.result()
}

// targetDir reports whether dst, the last operand of mv or ln, is an
// existing directory that the n sources go into; several sources need one.
func targetDir(ctx context.Context, c *client.Client, dst operand, n int, doing string) (bool, error) {
	ino, err := c.Resolve(ctx, dst.Path, true)
	if err == nil && isDir(ino) {
		return true, nil
	}
	if n == 1 {
		return false, nil
	}
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return false, fmt.Errorf("target %s: %w", dst.Arg, err)
	}
	return false, fmt.Errorf("target %s is not a directory (%s several files needs one)", dst.Arg, doing)
}

// Ln makes a hard link (symbolic: a symbolic link) to TARGET named LINK
// (args: TARGET LINK), or to each TARGET in the directory LINK (args:
// TARGET... DIRECTORY; also when LINK is a directory), named as the
// target. A symbolic link's target is stored as given; a hard link's
// target is a path argument like the link.
func Ln(ctx context.Context, e Env, args []string, symbolic bool) error {
	if len(args) < 2 {
		return fmt.Errorf("ln: give a target and a link name")
	}
	targets, linkArg := args[:len(args)-1], args[len(args)-1]
	resolve := []string{linkArg}
	if !symbolic {
		resolve = append(resolve, targets...)
	}
	c, ops, err := e.openEach(ctx, resolve)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	link := ops[0]
	if link.Err != nil {
		return fmt.Errorf("ln: link %s: %w", linkArg, link.Err)
	}
	into, err := targetDir(ctx, c, link, len(targets), "linking")
	if err != nil {
		return fmt.Errorf("ln: %w", err)
	}
	r := e.reporter("ln")
	for i, t := range targets {
		var err error
		if !symbolic {
			err = ops[i+1].Err
		}
		if err == nil {
			err = func() error {
				name, nameArg := link.Path, linkArg
				if into {
					base := path.Base(strings.TrimRight(t, "/"))
					name = strings.TrimSuffix(name, "/") + "/" + base
					nameArg = strings.TrimSuffix(nameArg, "/") + "/" + base
				}
				lp, ln, err := c.ResolveParent(ctx, name)
				if err != nil {
					return atOtherPath("as", nameArg, err)
				}
				if symbolic {
					_, err = c.Symlink(ctx, fidOf(lp), ln, t)
					return atOtherPath("as", nameArg, err)
				}
				ti, err := c.Resolve(ctx, ops[i+1].Path, false)
				if err != nil {
					return err
				}
				if isDir(ti) {
					return fmt.Errorf("is a directory (hard links to directories are not allowed)")
				}
				// As for mv: a missing name now is the target's.
				if _, err = c.Link(ctx, fidOf(ti), fidOf(lp), ln); err != nil && !errors.Is(err, syscall.ENOENT) {
					return atOtherPath("as", nameArg, err)
				}
				return err
			}()
		}
		if err != nil {
			if fatal(ctx, err) {
				return r.stop(targets, i, err)
			}
			r.fail(t, err)
		}
	}
	return r.result()
}

// PathFID is one result of `nacre path2fid --json`.
type PathFID struct {
	Path  string `json:"path"` // as given
	FID   string `json:"fid,omitempty"`
	Error string `json:"error,omitempty"` // why it failed (several operands)
}

// Path2Fid prints the FID of each path ("PATH: FID" when there are
// several). With asJSON it prints a PathFID for one path, an array of
// them for several.
func Path2Fid(ctx context.Context, e Env, args []string, asJSON bool) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("path2fid")
	var out []PathFID
	for i, op := range ops {
		if op.Err == nil {
			var ino *pb.Inode
			if ino, op.Err = c.ResolveMeta(ctx, op.Path, false); op.Err == nil {
				out = append(out, PathFID{Path: op.Arg, FID: fidOf(ino).String()})
				if !asJSON {
					if len(args) > 1 {
						fmt.Fprintf(e.Out, "%s: ", op.Arg)
					}
					fmt.Fprintln(e.Out, fidOf(ino))
				}
			}
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
			if len(args) > 1 {
				// An element per operand, in order, as stat --json.
				why := strings.TrimPrefix(operandMessage("path2fid", op.Arg, op.Err), "path2fid "+op.Arg+": ")
				out = append(out, PathFID{Path: op.Arg, Error: why})
			}
		}
	}
	if asJSON {
		if err := jsonOneOrMany(e.Out, len(args), out); err != nil {
			return err
		}
	}
	return r.result()
}

// FIDPaths is one result of `nacre fid2path --json`.
type FIDPaths struct {
	FID   string   `json:"fid"` // as given
	Paths []string `json:"paths"`
	Error string   `json:"error,omitempty"` // why it failed (several operands)
}

// Fid2Path prints every path of each FID (args: [MOUNTPOINT] FID...). As
// `lfs fid2path /mnt/lustre FID`, the paths are under the Nacre mount
// MOUNTPOINT when one is given (or any path on that mount), else under
// the Nacre mount holding the current directory if there is one (of this
// file system), else from the file system root. A mount of a
// subdirectory (a bind mount) shows only the paths inside it. With asJSON
// it prints a FIDPaths for one FID, an array of them for several.
func Fid2Path(ctx context.Context, e Env, args []string, asJSON bool) error {
	var mountArg string
	if len(args) > 1 {
		if _, err := fid.Parse(args[0]); err != nil {
			mountArg, args = args[0], args[1:]
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("fid2path: give a FID ([0xSEQ:0xOID:0xVER], as path2fid prints)")
	}
	var mnt *mountView
	pe := e.pathEnv()
	if mountArg != "" {
		mgs, fps, err := e.resolvePaths(mountArg)
		if err != nil {
			return fmt.Errorf("fid2path %s: %w", mountArg, err)
		}
		if fps[0].Mount == "" {
			return fmt.Errorf("fid2path: %s is not a Nacre mount (no fuse.nacre mount covers it in /proc/self/mountinfo): give the mount point of a Nacre mount, or only FIDs for paths from the file system root", mountArg)
		}
		if mnt, err = newMountView(pe, fps[0].Mount); err != nil {
			return err
		}
		e.MGS = mgs
	} else if fp, err := pe.Resolve("."); err == nil && fp.Mount != "" && (fp.MGS == "" || e.MGS == "" || client.SameMGS(e.MGS, fp.MGS)) {
		if mnt, err = newMountView(pe, fp.Mount); err != nil {
			return err
		}
		if e.MGS == "" {
			e.MGS = fp.MGS
		}
	}
	c, err := e.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	r := e.reporter("fid2path")
	var out []FIDPaths
	for i, s := range args {
		err := func() error {
			f, err := fid.Parse(s)
			if err != nil {
				return err
			}
			paths, err := c.Fid2Path(ctx, f)
			if err != nil {
				return err
			}
			if mnt != nil {
				if paths, err = mnt.show(paths); err != nil {
					return err
				}
			}
			out = append(out, FIDPaths{FID: s, Paths: paths})
			if !asJSON {
				for _, p := range paths {
					fmt.Fprintln(e.Out, p)
				}
			}
			return nil
		}()
		if err != nil {
			if fatal(ctx, err) {
				return r.stop(args, i, err)
			}
			r.fail(s, err)
			if len(args) > 1 {
				why := strings.TrimPrefix(operandMessage("fid2path", s, err), "fid2path "+s+": ")
				out = append(out, FIDPaths{FID: s, Error: why})
			}
		}
	}
	if asJSON {
		if err := jsonOneOrMany(e.Out, len(args), out); err != nil {
			return err
		}
	}
	return r.result()
}

// mountView shows paths from the file system root as paths on a mount.
type mountView struct {
	dir  string // the mount point
	root string // the directory of the file system it shows ("/" unless a bind mount)
}

func newMountView(pe *PathEnv, dir string) (*mountView, error) {
	fp, err := pe.Resolve(dir)
	if err != nil {
		return nil, err
	}
	return &mountView{dir: dir, root: fp.Path}, nil
}

// show maps paths from the file system root to paths on the mount,
// leaving out those outside the directory it shows.
func (m *mountView) show(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if under(p, m.root) {
			out = append(out, path.Join(m.dir, strings.TrimPrefix(p, m.root)))
		}
	}
	if len(out) == 0 && len(paths) > 0 {
		return nil, fmt.Errorf("no path under the mount %s, which shows %s of the file system; its paths from the file system root: %s",
			m.dir, m.root, strings.Join(paths, " "))
	}
	return out, nil
}
