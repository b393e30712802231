package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/user"
	"path"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
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
	// User and Group name uid and gid as this machine knows them (left
	// out if it does not, and with -n).
	User   string `json:"user,omitempty"`
	Group  string `json:"group,omitempty"`
	Mtime  string `json:"mtime"` // RFC 3339
	FID    string `json:"fid"`
	Target string `json:"symlink_target,omitempty"`
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

// LsOptions are the options of `nacre ls`.
type LsOptions struct {
	// Long lists mode, links, owner, group, size and mtime (-l).
	Long bool
	// Numeric shows owners and groups by number, not by name (-n; implies
	// Long, as in ls(1)).
	Numeric bool
	// JSON prints an array of LsEntry.
	JSON bool
}

// lsRow is one entry being listed.
type lsRow struct {
	name string
	ino  *pb.Inode
	ent  *pb.DirEntry
	// noSize: the size is the OSTs' to tell and they could not (one is
	// down); the MDT's figure is not shown as if it were.
	noSize bool
	// err: why the entry's attributes could not be read.
	err string
}

// Ls lists a directory (or describes a file), sorted by name. Without a
// path ("") it lists the current directory if that is on a Nacre mount,
// else the root. A symbolic link given as the path is described itself
// with -l or --json, as by ls -l.
func Ls(ctx context.Context, e Env, arg string, o LsOptions) error {
	if o.Numeric {
		o.Long = true
	}
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
	attrs := o.Long || o.JSON
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
	var rows []lsRow
	if isDir(ino) {
		ents, err := c.ReadDirAll(ctx, fidOf(ino), attrs)
		if err != nil {
			return opError("ls", arg, err)
		}
		for _, en := range ents {
			rows = append(rows, lsRow{name: string(en.Name), ino: en.Inode, ent: en})
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].name < rows[j].name })
	} else {
		rows = append(rows, lsRow{name: path.Base(p), ino: ino})
	}
	if !attrs {
		writeNames(e.Out, rows)
		return nil
	}
	failed := false
	// Names on standard error are shown as on standard output: quoted at
	// a terminal.
	showErr := showNames(e.Stderr())
	for i, r := range rows {
		if r.ino == nil && r.ent != nil {
			// The MDT lists an entry whose object it could not read
			// (a dangling entry, an OI being rebuilt, a file removed
			// meanwhile): ask for it alone, to show it if it is there
			// now and else to say why, as ls does ("cannot access").
			ino, err := c.Getattr(ctx, fid.FromPB(r.ent.Fid))
			if err != nil {
				rows[i].err, failed = shortMessage(err), true
				fmt.Fprintf(e.Stderr(), "nacre: ls: cannot access %s: %s\n", showErr(path.Join(arg, r.name)), rows[i].err)
				continue
			}
			rows[i].ino, r.ino = ino, ino
		}
		if r.ino != nil && isReg(r.ino) && r.ino.Flags&uint32(pb.InodeFlag_INODE_FLAG_SIZE_DIRTY) != 0 {
			s, err := c.Stat(ctx, fidOf(r.ino))
			if err != nil {
				// As ls does for what it cannot stat: said on standard
				// error, the listing goes on, the exit status is 1.
				fmt.Fprintf(e.Stderr(), "nacre: ls: %s: size unknown: %v\n", showErr(path.Join(arg, r.name)), err)
				rows[i].noSize, failed = true, true
				continue
			}
			rows[i].ino = s
		}
	}
	var werr error
	if o.JSON {
		werr = writeLsJSON(e.Out, rows, o.Numeric, newOwners())
	} else {
		writeLong(e.Out, rows, o.Numeric, newOwners())
	}
	if werr != nil {
		return werr
	}
	if failed {
		return ErrReported
	}
	return nil
}

// writeNames is the short listing: a name a line, quoted at a terminal
// (showNames), so that one name is one line there and nothing in a name
// reaches the terminal as a control sequence. Piped, names go out as they
// are, as ls(1) does.
func writeNames(w io.Writer, rows []lsRow) {
	show := showNames(w)
	for _, r := range rows {
		fmt.Fprintln(w, show(r.name))
	}
}

// writeLsJSON is ls --json: names as they are (JSON escapes control
// bytes), ids as numbers, and the names of those this machine knows
// unless numeric.
func writeLsJSON(w io.Writer, rows []lsRow, numeric bool, ids *owners) error {
	out := make([]LsEntry, 0, len(rows))
	for _, r := range rows {
		le := LsEntry{Name: r.name}
		if !utf8.ValidString(r.name) {
			le.NameBase64 = base64.StdEncoding.EncodeToString([]byte(r.name))
		}
		if i := r.ino; i != nil {
			le.Type, le.Mode, le.Nlink, le.Size, le.UID, le.GID = typeName(i.Mode), fmt.Sprintf("%04o", i.Mode&0o7777), i.Nlink, i.Size, i.Uid, i.Gid
			le.Mtime, le.FID, le.Target = time.Unix(0, i.MtimeNs).Format(time.RFC3339Nano), fidOf(i).String(), string(i.Symlink)
			if !numeric {
				le.User, le.Group = ids.user(i.Uid), ids.group(i.Gid)
			}
			if r.noSize {
				le.Size, le.SizeUnknown = 0, true
			}
		} else if r.ent != nil { // no attributes: what the entry says
			le.Type, le.FID, le.Error = typeName(r.ent.Type<<12), fid.FromPB(r.ent.Fid).String(), r.err
		}
		out = append(out, le)
	}
	return JSON(w, out)
}

// writeLong is ls -l: owners and groups by name where this machine knows
// them (by number if numeric, or if it does not), each column as wide as
// its widest entry, names left-aligned and numbers right-aligned as in
// ls(1); names and link targets quoted at a terminal.
func writeLong(w io.Writer, rows []lsRow, numeric bool, ids *owners) {
	show := showNames(w)
	type owner struct {
		user, group string
		userNum     bool // user is a number (right-aligned)
		groupNum    bool
	}
	own := make([]owner, len(rows))
	uw, gw := 0, 0
	for k, r := range rows {
		if r.ino == nil {
			continue
		}
		o := &own[k]
		if !numeric {
			o.user, o.group = ids.user(r.ino.Uid), ids.group(r.ino.Gid)
		}
		if o.user == "" {
			o.user, o.userNum = strconv.FormatUint(uint64(r.ino.Uid), 10), true
		}
		if o.group == "" {
			o.group, o.groupNum = strconv.FormatUint(uint64(r.ino.Gid), 10), true
		}
		uw, gw = max(uw, len(o.user)), max(gw, len(o.group))
	}
	pad := func(s string, width int, right bool) string {
		if right {
			return fmt.Sprintf("%*s", width, s)
		}
		return fmt.Sprintf("%-*s", width, s)
	}
	for k, r := range rows {
		i := r.ino
		if i == nil {
			fmt.Fprintf(w, "?????????? %s (no attributes)\n", show(r.name))
			continue
		}
		name := show(r.name)
		if i.Mode&syscall.S_IFMT == syscall.S_IFLNK {
			name += " -> " + show(string(i.Symlink))
		}
		mode := ModeString(i.Mode)
		if i.Flags&uint32(pb.InodeFlag_INODE_FLAG_ACL) != 0 {
			mode += "+" // as ls -l marks a file with an ACL
		}
		size := fmt.Sprint(i.Size)
		if r.noSize {
			size = "?"
		}
		o := own[k]
		fmt.Fprintf(w, "%s %3d %s %s %12s %s %s\n", mode, i.Nlink, pad(o.user, uw, o.userNum), pad(o.group, gw, o.groupNum), size,
			time.Unix(0, i.MtimeNs).Format("Jan _2 15:04"), name)
	}
}

// owners names users and groups by their ids as this machine knows them
// (os/user: the password and group files, or NSS), asking once per id of
// a listing.
type owners struct {
	users, groups map[uint32]string
}

func newOwners() *owners {
	return &owners{users: map[uint32]string{}, groups: map[uint32]string{}}
}

// user is the name of the user uid, or "" if this machine has none.
func (o *owners) user(uid uint32) string {
	n, ok := o.users[uid]
	if !ok {
		if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
			n = u.Username
		}
		o.users[uid] = n
	}
	return n
}

// group is the name of the group gid, or "" if this machine has none.
func (o *owners) group(gid uint32) string {
	n, ok := o.groups[gid]
	if !ok {
		if g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10)); err == nil {
			n = g.Name
		}
		o.groups[gid] = n
	}
	return n
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
