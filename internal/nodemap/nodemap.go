// Package nodemap maps the user and group ids of a client's requests to
// the file system's, as Lustre's nodemap does: per client certificate
// (the common name internal/pki's certificates carry), root squash, a
// trusted flag, uid and gid maps, and the refusal of ids no rule maps.
// The MDSs apply a client's nodemap to the credentials of every request
// (client ids to file system ids) before any permission check, and to
// the ids of every reply (file system ids back to client ids); a client
// applies its own to its own checks (Map.Local). The functions here are
// pure: no clock, no I/O.
//
// The rules, for one id, client to file system (ToFS) and back (ToClient):
//
//   - 0 is root: the squash id if squash_root (Lustre's admin=0), else 0;
//   - any other id, on a trusted nodemap: itself;
//   - else: what uid_map or gid_map pairs it with, or, when no pair
//     names it, the squash id. Such an id is "unknown": a request whose
//     uid or gid is unknown is refused (EACCES) if deny_unknown.
//
// A request whose uid is squashed (root squashed, or unknown) loses its
// supplementary groups; other requests keep the groups that map, each
// mapped. Ids in POSIX ACLs (system.posix_acl_access and _default) are
// mapped too: a named entry whose id does not map is refused on the way
// in (EINVAL) and left out on the way back.
//
// Which nodemap applies (Set.For): the one named after the certificate,
// whatever its role; else, for a certificate of the client role, the
// default one ("*"); else none, and ids are used as sent. A cluster
// without TLS has no certificate names, and so no nodemaps.
package nodemap

import (
	"cmp"
	"crypto/x509"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/acl"
	"nacre/internal/errno"
	"nacre/internal/pki"
)

// Default is the client name of the nodemap of every client certificate
// that has none of its own.
const Default = "*"

// SquashID is the squash uid and gid of a nodemap that sets none: nobody
// and nogroup.
const SquashID = 65534

// maxName is the longest common name a certificate may carry (X.509's
// ub-common-name).
const maxName = 64

// noID is (uid_t)-1, which chown(2) takes as "leave it": never an id.
const noID = math.MaxUint32

// CheckName refuses what cannot be a certificate's common name, or the
// default nodemap's name.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a nodemap needs a client: the common name of its certificate (nacre cert add --client NAME), or %q for every client certificate without a nodemap of its own", Default)
	case len(name) > maxName:
		return fmt.Errorf("client name %.20q... is %d bytes: a certificate's common name has at most %d", name, len(name), maxName)
	}
	for _, r := range name {
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return fmt.Errorf("client name %q has a character that is not printable UTF-8", name)
		}
	}
	return nil
}

// Normalize fills in a nodemap's defaults (the squash ids) and sorts its
// maps, so that two nodemaps that mean the same are equal. It changes e.
func Normalize(e *pb.Nodemap) {
	if e.SquashUid == 0 {
		e.SquashUid = SquashID
	}
	if e.SquashGid == 0 {
		e.SquashGid = SquashID
	}
	byClient := func(a, b *pb.IDPair) int { return cmp.Compare(a.Client, b.Client) }
	slices.SortFunc(e.UidMap, byClient)
	slices.SortFunc(e.GidMap, byClient)
}

// Check reports what is wrong with a nodemap, normalized or not, in
// words that name the fix; nil if nothing is.
func Check(e *pb.Nodemap) error {
	if err := CheckName(e.Client); err != nil {
		return err
	}
	if e.Trusted && (len(e.UidMap) > 0 || len(e.GidMap) > 0) {
		return fmt.Errorf("nodemap of %s: trusted uses ids as sent, and the uid or gid map maps them: give one or the other", e.Client)
	}
	if e.Trusted && e.DenyUnknown {
		return fmt.Errorf("nodemap of %s: deny_unknown refuses ids that no map names, and a trusted client's ids are all used as sent: give one or the other", e.Client)
	}
	for _, id := range []struct {
		what string
		v    uint32
	}{{"squash uid", e.SquashUid}, {"squash gid", e.SquashGid}} {
		if id.v == noID {
			return fmt.Errorf("nodemap of %s: %s %d is no id (it is -1): give an unprivileged id such as %d", e.Client, id.what, id.v, SquashID)
		}
	}
	if err := checkPairs(e.Client, "uid", e.UidMap); err != nil {
		return err
	}
	return checkPairs(e.Client, "gid", e.GidMap)
}

func checkPairs(client, what string, m []*pb.IDPair) error {
	byClient := map[uint32]uint32{}
	byFS := map[uint32]uint32{}
	for _, p := range m {
		for _, id := range []uint32{p.Client, p.Fs} {
			switch id {
			case 0:
				return fmt.Errorf("nodemap of %s: %s map pair %d:%d maps %s 0: root is root or squashed (squash_root), never mapped", client, what, p.Client, p.Fs, what)
			case noID:
				return fmt.Errorf("nodemap of %s: %s map pair %d:%d names %d, which is no id (it is -1)", client, what, p.Client, p.Fs, noID)
			}
		}
		if fs, ok := byClient[p.Client]; ok {
			return fmt.Errorf("nodemap of %s: client %s %d is mapped twice (to %d and to %d): give each client id one pair", client, what, p.Client, fs, p.Fs)
		}
		if c, ok := byFS[p.Fs]; ok {
			return fmt.Errorf("nodemap of %s: file system %s %d is mapped twice (from %d and from %d): the map must go both ways, so give each file system id one pair", client, what, p.Fs, c, p.Client)
		}
		byClient[p.Client], byFS[p.Fs] = p.Fs, p.Client
	}
	return nil
}

// ParseIDMap parses a map given as CLIENT:FS pairs separated by commas
// ("1000:5000,1001:5001"); what ("uid" or "gid") names it in errors.
// It does not check the pairs against each other (Check does).
func ParseIDMap(what, s string) ([]*pb.IDPair, error) {
	var out []*pb.IDPair
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		c, fs, ok := strings.Cut(f, ":")
		cid, err1 := strconv.ParseUint(strings.TrimSpace(c), 10, 32)
		fid, err2 := strconv.ParseUint(strings.TrimSpace(fs), 10, 32)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s map %q: %q is not CLIENT:FS, two %ss from 0 to %d (like 1000:5000,1001:5001)", what, s, f, what, uint32(noID))
		}
		out = append(out, &pb.IDPair{Client: uint32(cid), Fs: uint32(fid)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s map %q names no pair: give CLIENT:FS pairs (like 1000:5000,1001:5001)", what, s)
	}
	return out, nil
}

// FormatIDMap is a map as ParseIDMap takes it.
func FormatIDMap(m []*pb.IDPair) string {
	parts := make([]string, len(m))
	for i, p := range m {
		parts[i] = fmt.Sprintf("%d:%d", p.Client, p.Fs)
	}
	return strings.Join(parts, ",")
}

// Set is a cluster's nodemaps, by client name.
type Set struct {
	byName map[string]*Map
}

// NewSet compiles nodemaps (each as Check accepts it) into a Set.
func NewSet(es []*pb.Nodemap) *Set {
	s := &Set{byName: make(map[string]*Map, len(es))}
	for _, e := range es {
		s.byName[e.Client] = New(e)
	}
	return s
}

// Len is how many nodemaps s holds.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.byName)
}

// For is the nodemap that applies to a peer's certificate (nil: ids are
// used as sent): the one named after it, else, for a certificate of the
// client role, the default one. Node and admin certificates are mapped
// only by a nodemap that names them.
func (s *Set) For(cert *x509.Certificate) *Map {
	if s == nil || cert == nil {
		return nil
	}
	return s.ForName(cert.Subject.CommonName, pki.RoleOf(cert))
}

// ForName is For of a certificate named name with role.
func (s *Set) ForName(name string, role pki.Role) *Map {
	if s == nil {
		return nil
	}
	if m := s.byName[name]; m != nil {
		return m
	}
	if role == pki.RoleClient {
		return s.byName[Default]
	}
	return nil
}

// Map is one nodemap, compiled for lookups. A nil *Map maps nothing:
// every method gives back what it is given.
type Map struct {
	e *pb.Nodemap
	// toFS and toClient of uids [0] and gids [1].
	toFS, toClient [2]map[uint32]uint32
}

type kind int

const (
	uid kind = iota
	gid
)

func (k kind) String() string { return [...]string{"uid", "gid"}[k] }

// New compiles a nodemap (as Check accepts it; the squash ids default to
// SquashID).
func New(e *pb.Nodemap) *Map {
	e = proto.Clone(e).(*pb.Nodemap)
	Normalize(e)
	m := &Map{e: e}
	for k, pairs := range [][]*pb.IDPair{e.UidMap, e.GidMap} {
		m.toFS[k] = make(map[uint32]uint32, len(pairs))
		m.toClient[k] = make(map[uint32]uint32, len(pairs))
		for _, p := range pairs {
			m.toFS[k][p.Client] = p.Fs
			m.toClient[k][p.Fs] = p.Client
		}
	}
	return m
}

// Nodemap is the nodemap m was compiled from (do not change it).
func (m *Map) Nodemap() *pb.Nodemap {
	if m == nil {
		return nil
	}
	return m.e
}

func (m *Map) squash(k kind) uint32 {
	if k == uid {
		return m.e.SquashUid
	}
	return m.e.SquashGid
}

// mapID maps id one way (toFS: client to file system) by the package's
// rules. known is false for an id that only the squash rule maps (not
// root's).
func (m *Map) mapID(k kind, id uint32, toFS bool) (out uint32, squashed, known bool) {
	switch {
	case id == 0 && m.e.SquashRoot:
		return m.squash(k), true, true
	case id == 0, m.e.Trusted:
		return id, false, true
	}
	t := m.toClient[k]
	if toFS {
		t = m.toFS[k]
	}
	if v, ok := t[id]; ok {
		return v, false, true
	}
	return m.squash(k), true, false
}

// UID maps a client's uid to the file system's.
func (m *Map) UID(id uint32) uint32 { return m.one(uid, id, true) }

// GID maps a client's gid to the file system's.
func (m *Map) GID(id uint32) uint32 { return m.one(gid, id, true) }

// ClientUID maps a file system uid to the client's.
func (m *Map) ClientUID(id uint32) uint32 { return m.one(uid, id, false) }

// ClientGID maps a file system gid to the client's.
func (m *Map) ClientGID(id uint32) uint32 { return m.one(gid, id, false) }

// one maps an id either way; a nil Map keeps it.
func (m *Map) one(k kind, id uint32, toFS bool) uint32 {
	if m == nil {
		return id
	}
	v, _, _ := m.mapID(k, id, toFS)
	return v
}

// denied is the refusal of an unknown id by deny_unknown.
func (m *Map) denied(k kind, id uint32) error {
	return &errno.Errno{Errno: syscall.EACCES, Msg: fmt.Sprintf("%s %d of client %q has no mapping in its nodemap, which refuses unknown ids (deny_unknown): map it (nacre nodemap set --client %s --%s-map %d:FS,...)",
		k, id, m.e.Client, m.e.Client, k, id)}
}

// Cred is a request's credentials in file system ids: a new Cred (c is
// not changed). A nil c is root's, as the MDT takes it. An unknown uid or
// gid fails with EACCES if the nodemap denies unknown ids.
func (m *Map) Cred(c *pb.Cred) (*pb.Cred, error) {
	if m == nil {
		return c, nil
	}
	if c == nil {
		c = &pb.Cred{}
	}
	u, squashed, uKnown := m.mapID(uid, c.Uid, true)
	g, _, gKnown := m.mapID(gid, c.Gid, true)
	if m.e.DenyUnknown && !uKnown {
		return nil, m.denied(uid, c.Uid)
	}
	if m.e.DenyUnknown && !gKnown {
		return nil, m.denied(gid, c.Gid)
	}
	out := &pb.Cred{Uid: u, Gid: g}
	if squashed {
		// As Lustre: a squashed user has no supplementary groups.
		return out, nil
	}
	for _, cg := range c.Groups {
		fg, _, known := m.mapID(gid, cg, true)
		if known && !slices.Contains(out.Groups, fg) {
			out.Groups = append(out.Groups, fg)
		}
	}
	return out, nil
}

// Owner maps the uid and gid a chown(2) gives (valid says which, as
// SetattrOp.valid) to file system ids. An unknown id becomes the squash
// id, or fails with EACCES if the nodemap denies unknown ids.
func (m *Map) Owner(valid uint32, u, g uint32) (uint32, uint32, error) {
	if m == nil {
		return u, g, nil
	}
	if valid&uint32(pb.SetattrValid_SETATTR_UID) != 0 {
		v, _, known := m.mapID(uid, u, true)
		if !known && m.e.DenyUnknown {
			return 0, 0, m.denied(uid, u)
		}
		u = v
	}
	if valid&uint32(pb.SetattrValid_SETATTR_GID) != 0 {
		v, _, known := m.mapID(gid, g, true)
		if !known && m.e.DenyUnknown {
			return 0, 0, m.denied(gid, g)
		}
		g = v
	}
	return u, g, nil
}

// Inode is ino with its owner and group in the client's ids: ino itself
// when they do not change (it may be shared, so it is never changed), a
// copy when they do.
func (m *Map) Inode(ino *pb.Inode) *pb.Inode {
	if m == nil || ino == nil {
		return ino
	}
	u, g := m.ClientUID(ino.Uid), m.ClientGID(ino.Gid)
	if u == ino.Uid && g == ino.Gid {
		return ino
	}
	out := proto.Clone(ino).(*pb.Inode)
	out.Uid, out.Gid = u, g
	return out
}

// Local is how the MDSs see the caller c, in the client's ids: what a
// client checks access with itself before it reads or cuts objects (the
// OSTs check nothing), so that it allows what the MDSs would. A squashed
// root is the squash uid there, with no groups; a caller the nodemap
// refuses is the squash ids.
func (m *Map) Local(c *pb.Cred) *pb.Cred {
	if m == nil {
		return c
	}
	f, err := m.Cred(c)
	if err != nil {
		return &pb.Cred{Uid: m.ClientUID(m.e.SquashUid), Gid: m.ClientGID(m.e.SquashGid)}
	}
	out := &pb.Cred{Uid: m.ClientUID(f.Uid), Gid: m.ClientGID(f.Gid)}
	for _, g := range f.Groups {
		out.Groups = append(out.Groups, m.ClientGID(g))
	}
	return out
}

// Gives reports whether c, in file system ids, is what the nodemap makes
// of some client's credentials (Cred): a request through it could carry
// c. A nil c (root's) is given by a nil Map only.
func (m *Map) Gives(c *pb.Cred) bool {
	if m == nil {
		return true
	}
	if c == nil {
		return false
	}
	back := &pb.Cred{Uid: m.ClientUID(c.Uid), Gid: m.ClientGID(c.Gid)}
	for _, g := range c.Groups {
		back.Groups = append(back.Groups, m.ClientGID(g))
	}
	f, err := m.Cred(back)
	if err != nil || f.Uid != c.Uid || f.Gid != c.Gid {
		return false
	}
	for _, g := range c.Groups {
		if !slices.Contains(f.Groups, g) {
			return false
		}
	}
	return true
}

// IsACL reports whether an extended attribute holds a POSIX ACL.
func IsACL(name string) bool { return name == acl.XattrAccess || name == acl.XattrDefault }

// ACLToFS maps the ids of the named entries of an ACL (a value of
// system.posix_acl_access or _default) to the file system's. A value
// that is not a valid ACL is given back as is, for the MDT to refuse. A
// named entry whose id does not map fails with EINVAL: it would name the
// squash id, granting rights to whoever has it.
func (m *Map) ACLToFS(v []byte) ([]byte, error) {
	if m == nil {
		return v, nil
	}
	a, err := acl.Parse(v)
	if err != nil || len(a) == 0 {
		return v, nil
	}
	for i, e := range a {
		k := uid
		switch e.Tag {
		case acl.User:
		case acl.Group:
			k = gid
		default:
			continue
		}
		id, _, known := m.mapID(k, e.ID, true)
		if !known {
			return nil, &errno.Errno{Errno: syscall.EINVAL, Msg: fmt.Sprintf("the ACL names %s %d, which the nodemap of client %q does not map: map it (nacre nodemap set --client %s --%s-map %d:FS,...) or leave it out",
				k, e.ID, m.e.Client, m.e.Client, k, e.ID)}
		}
		a[i].ID = id
	}
	return a.Encode(), nil
}

// ACLToClient maps the ids of the named entries of an ACL back to the
// client's, leaving out the entries whose id does not map (the client
// has no id for them). A value that is not a valid ACL is given back as
// is.
func (m *Map) ACLToClient(v []byte) []byte {
	if m == nil {
		return v
	}
	a, err := acl.Parse(v)
	if err != nil || len(a) == 0 {
		return v
	}
	out := a[:0:0]
	for _, e := range a {
		k := uid
		switch e.Tag {
		case acl.User:
		case acl.Group:
			k = gid
		default:
			out = append(out, e)
			continue
		}
		if id, _, known := m.mapID(k, e.ID, false); known {
			e.ID = id
			out = append(out, e)
		}
	}
	// Back in canonical order (by tag, then id), which the kernel
	// requires of an ACL; a squashed root's entry may now name the squash
	// id twice: the first is kept.
	slices.SortStableFunc(out, func(x, y acl.Entry) int {
		return cmp.Or(cmp.Compare(x.Tag, y.Tag), cmp.Compare(x.ID, y.ID))
	})
	out = slices.CompactFunc(out, func(x, y acl.Entry) bool {
		return x.Tag == y.Tag && x.ID == y.ID && (x.Tag == acl.User || x.Tag == acl.Group)
	})
	return out.Encode()
}
