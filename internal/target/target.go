// Package target manages a target directory: the identity file that
// `nacre format` writes (file system name, role, index, format version,
// addresses) and the checks that stop a server from opening a directory,
// or a store, that belongs to another target, file system or format.
//
// Layout of a target directory:
//
//	nacre-target.json   identity (this package)
//	store/              pebble store (MGS config, MDT metadata + raft log, OST attributes)
//	raftlog/            MGS, MDT: the Raft log (internal/raftlog)
//	raft-snap/          a replica's snapshots received from its leader
//	objects/            OST only: object data as sparse files
//	serve.pid           pid of the process serving it (internal/target/proc)
//	serve.log           that process's log (nacre up; internal/target/proc)
//	tls/                with TLS: ca.pem, cert.pem, key.pem (Secure; internal/pki), 0700 and 0600
//
// The data directories (store/, raftlog/, raft-snap/, objects/) are
// their owner's alone, 0700 (MakePrivate).
package target

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"nacre/internal/kv"
	"nacre/internal/pki"
	"nacre/internal/version"
)

// Kind is a target's role.
type Kind string

const (
	MGS Kind = "mgs"
	MDT Kind = "mdt"
	OST Kind = "ost"
)

// IdentityFile is the name of the identity file inside a target directory.
const IdentityFile = "nacre-target.json"

// Identity is what `nacre format` records about a target.
type Identity struct {
	Fsname        string    `json:"fsname"`
	Kind          Kind      `json:"kind"`
	Index         uint32    `json:"index"`
	UUID          string    `json:"uuid"`
	FormatVersion int       `json:"format_version"`
	Created       time.Time `json:"created"`
	// MGSNode is the MGS address (MDT and OST only).
	MGSNode string `json:"mgs_node,omitempty"`
	// Listen is the gRPC address; port 0 picks a free port at the first
	// start, which is then written back so restarts keep it.
	Listen string `json:"listen"`
	// DataListen is the OST's framed data protocol address.
	DataListen string `json:"data_listen,omitempty"`
	// MetricsListen is the Prometheus HTTP address.
	MetricsListen string `json:"metrics_listen,omitempty"`
	// ReplicaID and Peers describe the target's Raft group (MDT, MGS):
	// replica ids to raft addresses. Empty means one replica.
	ReplicaID uint64            `json:"replica_id,omitempty"`
	Peers     map[uint64]string `json:"peers,omitempty"`
	// Started is when the target first ran on its store: from then on a
	// missing or empty store is lost data, never a new target.
	Started time.Time `json:"started,omitzero"`
	// TLSDir is the target's credentials directory (internal/pki: ca.pem,
	// cert.pem, key.pem), relative to the target directory or absolute;
	// empty: the target serves and dials without TLS.
	TLSDir string `json:"tls_dir,omitempty"`
}

// TLSPath is the target's credentials directory ("" without TLS).
func (id Identity) TLSPath(dir string) string {
	if id.TLSDir == "" || filepath.IsAbs(id.TLSDir) {
		return id.TLSDir
	}
	return filepath.Join(dir, id.TLSDir)
}

// Name is the Lustre-style target name, e.g. nacre-MDT0000.
func (id Identity) Name() string {
	switch id.Kind {
	case MGS:
		return "MGS"
	case MDT:
		return fmt.Sprintf("%s-MDT%04x", id.Fsname, id.Index)
	case OST:
		return fmt.Sprintf("%s-OST%04x", id.Fsname, id.Index)
	}
	return fmt.Sprintf("%s-%s%04x", id.Fsname, id.Kind, id.Index)
}

// Describe names the target for error messages.
func (id Identity) Describe() string {
	return fmt.Sprintf("%s of file system %q (format version %d)", id.Label(), id.Fsname, id.FormatVersion)
}

// Label is MGS, MDT0000 or OST0001.
func (id Identity) Label() string {
	if id.Kind == MGS {
		return "MGS"
	}
	return fmt.Sprintf("%s%04x", upper(id.Kind), id.Index)
}

func upper(k Kind) string {
	switch k {
	case MDT:
		return "MDT"
	case OST:
		return "OST"
	}
	return string(k)
}

// NewUUID returns a random identifier for a new target.
func NewUUID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// MaxIndex is the largest MDT or OST index (names print it in four hex
// digits, OST0000 to OSTffff).
const MaxIndex = 0xffff

// CheckFsname accepts a file system name as Lustre does: 1 to 8
// letters, digits, '_' or '-', not starting with '-'. The name becomes
// part of target names, log lines, mount sources and paths.
func CheckFsname(name string) error {
	ok := name != "" && len(name) <= 8 && name[0] != '-'
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("file system name %q: use 1 to 8 letters, digits, '_' or '-' (not first), e.g. \"scratch\"", name)
	}
	return nil
}

// ErrNotFormatted is returned by Load for a directory without identity.
var ErrNotFormatted = errors.New("not a formatted Nacre target")

// Format writes the identity of a new target into dir. It refuses a
// directory that already holds a target (of any kind, file system or
// format version) or other files.
func Format(dir string, id Identity) error {
	if err := CheckFsname(id.Fsname); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	if id.Index > MaxIndex {
		return fmt.Errorf("format %s: index %d: MDT and OST indexes go from 0 to %d, as Lustre's", dir, id.Index, MaxIndex)
	}
	if id.UUID == "" {
		id.UUID = NewUUID()
	}
	id.FormatVersion = version.Format
	if id.Created.IsZero() {
		id.Created = time.Now().UTC()
	}
	old, err := Load(dir)
	switch {
	case err == nil:
		return fmt.Errorf("refusing to format %s as %s: it already holds %s; use another directory or remove this one first",
			dir, id.Describe(), old.Describe())
	case errors.Is(err, ErrNotFormatted):
		if Empty(dir) {
			break
		}
		rec, serr := StoreIdentity(StoreDir(dir))
		if serr != nil {
			return fmt.Errorf("refusing to format %s: the directory is not empty and holds no Nacre target; use an empty directory", dir)
		}
		// The identity file was lost and the store kept: write the file
		// again for the target the store belongs to, keeping its UUID.
		f := storeFields(rec)
		if f == nil || f[0] != id.Fsname || f[1] != string(id.Kind) || f[2] != strconv.FormatUint(uint64(id.Index), 10) {
			return fmt.Errorf("refusing to format %s as %s: its store belongs to another target (%s); give the type, index and file system name it records, or use an empty directory",
				dir, id.Describe(), rec)
		}
		if f[4] != strconv.Itoa(version.Format) {
			return fmt.Errorf("refusing to format %s: its store is of format version %s, this nacre (%s) writes version %d",
				dir, f[4], version.Software, version.Format)
		}
		id.UUID = f[3]
		id.Started = time.Now().UTC()
	case errors.Is(err, os.ErrNotExist):
	default:
		return fmt.Errorf("refusing to format %s as %s: %w", dir, id.Describe(), err)
	}
	made, err := mkdirAll(dir)
	if err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	// The data directories are made here, their owner's alone, rather
	// than by the first start with the modes of the libraries that fill
	// them.
	for _, d := range formatDirs(dir, id.Kind) {
		if err := os.Mkdir(d, 0o700); err == nil {
			made = append(made, d)
		} else if !errors.Is(err, os.ErrExist) {
			err = fmt.Errorf("format %s: %w", dir, err)
			for i := len(made) - 1; i >= 0; i-- {
				os.Remove(made[i])
			}
			return err
		}
	}
	if err := MakePrivate(dir); err != nil {
		return fmt.Errorf("format %s: %w", dir, err)
	}
	if err := Save(dir, id); err != nil {
		// A retry must find the directory as it was: one this format
		// made, left behind, is no longer new, and holds no target.
		for i := len(made) - 1; i >= 0; i-- {
			if os.Remove(made[i]) != nil {
				break
			}
		}
		return err
	}
	return nil
}

// mkdirAll is os.MkdirAll that returns the directories it made, outermost
// first.
func mkdirAll(dir string) ([]string, error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
		missing = append(missing, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	slices.Reverse(missing)
	var made []string
	for _, d := range missing {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			for i := len(made) - 1; i >= 0; i-- {
				os.Remove(made[i])
			}
			return nil, err
		} else if err == nil {
			made = append(made, d)
		}
	}
	return made, nil
}

// Save rewrites the identity file atomically (write, fsync, rename). On
// failure the temporary file is removed: left behind it would make the
// directory "not empty" to a retried format.
func Save(dir string, id Identity) (err error) {
	data, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, IdentityFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write identity of %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write identity of %s: %w", dir, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync identity of %s: %w", dir, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write identity of %s: %w", dir, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, IdentityFile)); err != nil {
		return fmt.Errorf("write identity of %s: %w", dir, err)
	}
	return SyncDir(dir)
}

// SyncDir makes the entries of dir (a rename, a new file) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Load reads and checks the identity of the target in dir.
func Load(dir string) (Identity, error) {
	var id Identity
	st, err := os.Stat(dir)
	if err != nil {
		return id, fmt.Errorf("target directory %s: %w", dir, err)
	}
	if !st.IsDir() {
		return id, fmt.Errorf("target directory %s is not a directory", dir)
	}
	data, err := os.ReadFile(filepath.Join(dir, IdentityFile))
	if errors.Is(err, os.ErrNotExist) {
		if rec, serr := StoreIdentity(StoreDir(dir)); serr == nil {
			what := rec
			if f := storeFields(rec); f != nil {
				what = fmt.Sprintf("%s index %s of file system %q", strings.ToUpper(f[1]), f[2], f[0])
			}
			return id, fmt.Errorf("%s: %w: %s is missing, but the store there belongs to %s; restore %s from a backup, or write it again with `nacre format` and the target's type, index, file system name and MGS (format adopts the store it finds)",
				dir, ErrNotFormatted, IdentityFile, what, IdentityFile)
		}
		return id, fmt.Errorf("%s: %w (no %s); run `nacre format` first", dir, ErrNotFormatted, IdentityFile)
	}
	if err != nil {
		return id, fmt.Errorf("read identity of %s: %w", dir, err)
	}
	if err := json.Unmarshal(data, &id); err != nil {
		return id, fmt.Errorf("identity file %s is corrupt: %v; restore it from a backup, or remove it and run `nacre format` with the target's type, index and file system name (format adopts the store it finds)", filepath.Join(dir, IdentityFile), err)
	}
	if id.FormatVersion == 0 {
		return id, fmt.Errorf("identity file %s names no format version: it is damaged or was not written by nacre; restore it from a backup, or remove it and run `nacre format` with the target's type, index and file system name (format adopts the store it finds)",
			filepath.Join(dir, IdentityFile))
	}
	if id.FormatVersion != version.Format {
		return id, fmt.Errorf("%s holds a target of format version %d, but this nacre (%s) reads format version %d; use a nacre release that reads version %d",
			dir, id.FormatVersion, version.Software, version.Format, id.FormatVersion)
	}
	switch id.Kind {
	case MGS, MDT, OST:
	default:
		return id, fmt.Errorf("identity file of %s names unknown kind %q", dir, id.Kind)
	}
	return id, nil
}

// StoreDir is where the target's pebble store lives.
func StoreDir(dir string) string { return filepath.Join(dir, "store") }

// ObjectsDir is where an OST keeps its objects' data (internal/ost).
func ObjectsDir(dir string) string { return filepath.Join(dir, "objects") }

// RaftSnapDir is where a replica of a replicated group receives the
// snapshots its leader sends (internal/raftgroup).
func RaftSnapDir(dir string) string { return filepath.Join(dir, "raft-snap") }

// dataDirs are the directories of a target directory that hold its
// data: the store, the Raft log and its snapshots, the objects.
func dataDirs(dir string) []string {
	return []string{StoreDir(dir), RaftLogDir(dir), RaftSnapDir(dir), ObjectsDir(dir)}
}

// formatDirs are the data directories Format makes for a target of
// kind k: the Raft log's directory is left to the log, whose absence
// means a new log (internal/raftlog).
func formatDirs(dir string, k Kind) []string {
	if k == OST {
		return []string{StoreDir(dir), ObjectsDir(dir)}
	}
	return []string{StoreDir(dir)}
}

// MakePrivate makes the data directories of the target in dir that
// exist readable by their owner alone (0700): metadata, file names and
// file data are no business of other users of the server's machine
// (docs/architecture.md, "Who may do what"). Format makes them so, and
// every start runs it, so that a target formatted by an older release
// (0755 directories, 0644 files) is fixed at its next start.
//
// It changes these few top-level directories only, never what is in
// them: an OST holds millions of object files, in thousands of bucket
// directories, and a walk of them all would hold up every start. A file
// or directory below a 0700 directory cannot be reached by others, so
// the old modes inside no longer matter; what is created there from
// now on is made 0700 (directories) or 0600 (object files) anyway.
func MakePrivate(dir string) error {
	for _, d := range dataDirs(dir) {
		fi, err := os.Stat(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("make %s private: %w", d, err)
		}
		if fi.IsDir() && fi.Mode().Perm() != 0o700 {
			if err := os.Chmod(d, 0o700); err != nil {
				return fmt.Errorf("make %s readable by its owner only: %w", d, err)
			}
		}
	}
	return nil
}

// RaftLogDir is where the Raft log of a target's group lives (MGS, MDT;
// internal/raftlog), beside its store.
func RaftLogDir(dir string) string { return filepath.Join(dir, "raftlog") }

// identityKey is the store key under which CheckStore records the owner.
var identityKey = []byte("\x00identity")

// CheckStore makes sure the store belongs to this target: on first use it
// records the identity; later it refuses a store of another target, file
// system or format version.
func CheckStore(db *kv.DB, id Identity) error {
	want := fmt.Sprintf("%s|%s|%d|%s|%d", id.Fsname, id.Kind, id.Index, id.UUID, id.FormatVersion)
	got, err := db.Get(identityKey)
	if errors.Is(err, kv.ErrNotFound) {
		if !id.Started.IsZero() {
			return fmt.Errorf("the store %s of %s holds none of its data, although the target has run on it since %s: %w",
				db.Dir(), id.Label(), id.Started.Format(time.RFC3339), ErrStoreLost)
		}
		return db.Set(identityKey, []byte(want), true)
	}
	if err != nil {
		return fmt.Errorf("read store identity in %s: %w", db.Dir(), err)
	}
	if string(got) != want {
		return storeMismatch(db.Dir(), string(got), want, id)
	}
	return nil
}

// VerifyStore is CheckStore without writing: for a tool that reads a
// stopped target's store (a backup), a store that records no owner is
// refused too, as lost data when the target has run (ErrStoreLost).
func VerifyStore(db *kv.DB, id Identity) error {
	if _, err := db.Get(identityKey); errors.Is(err, kv.ErrNotFound) && id.Started.IsZero() {
		return fmt.Errorf("the store %s of %s records no target: it was never used, or it lost its data", db.Dir(), id.Label())
	}
	return CheckStore(db, id)
}

// storeMismatch explains a store whose recorded owner (got) is not the
// identity file's (want, same encoding): a format version alone is
// another release's store; anything else is a store and an identity file
// of different targets, and which one is wrong only the admin can tell.
// Reformatting is never the advice: it destroys the store.
func storeMismatch(dir, got, want string, id Identity) error {
	g, w := strings.Split(got, "|"), strings.Split(want, "|")
	if len(g) == len(w) && slices.Equal(g[:len(g)-1], w[:len(w)-1]) {
		return fmt.Errorf("store %s has format version %s, and this nacre (%s) reads format %d: start it with a release that reads format %s",
			dir, g[len(g)-1], version.Software, id.FormatVersion, g[len(g)-1])
	}
	return fmt.Errorf("store %s belongs to another target (%s), not to the one its directory's %s names, %s (%s): "+
		"either the store or the identity file was copied from another target or edited; put back the right one "+
		"(the store is not touched: reformatting would destroy its data)",
		dir, got, IdentityFile, id.Describe(), want)
}

// ErrStoreLost says a target that has run finds no store: its device is
// not mounted, or its data was removed.
var ErrStoreLost = errors.New("its data is not there; mount the device that holds it or restore it from a backup (nacre mdt restore for an MDT), or, to start it empty and lose what it held, format a new target in an empty directory")

// HasRun says whether the target in dir has run before: its identity says
// so, or (identity files older than that record) it left a Raft log or OST
// objects, which a first start makes only after its store.
func HasRun(dir string, id Identity) bool {
	if !id.Started.IsZero() {
		return true
	}
	for _, sub := range []string{RaftLogDir(dir), ObjectsDir(dir)} {
		if entries, err := os.ReadDir(sub); err == nil && len(entries) > 0 {
			return true
		}
	}
	return false
}

// StoreIdentity reads what a store records of its target
// ("fsname|kind|index|uuid|version"), without changing it.
func StoreIdentity(storeDir string) (string, error) {
	db, err := kv.Open(storeDir, kv.Options{ReadOnly: true, CacheSize: 1 << 20})
	if err != nil {
		return "", err
	}
	defer db.Close()
	v, err := db.Get(identityKey)
	if err != nil {
		return "", fmt.Errorf("read the identity the store %s records: %w", storeDir, err)
	}
	return string(v), nil
}

// storeFields splits what StoreIdentity read into fsname, kind, index,
// uuid and format version (nil if it is not that).
func storeFields(rec string) []string {
	if f := strings.Split(rec, "|"); len(f) == 5 {
		return f
	}
	return nil
}

// Empty says whether dir holds nothing a format could destroy: no entries,
// or only an empty lost+found (a freshly made ext4 file system mounted
// there, to give the target a device of its own).
func Empty(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Name() == "lost+found" && e.IsDir() {
			// mke2fs makes it root's with mode 0700: one that cannot
			// be read is taken for the empty one a new ext4 has.
			sub, err := os.ReadDir(filepath.Join(dir, e.Name()))
			if (err == nil && len(sub) == 0) || errors.Is(err, fs.ErrPermission) {
				continue
			}
		}
		return false
	}
	return true
}

// TLSDirName is where Secure puts a target's credentials, in its
// directory.
const TLSDirName = "tls"

// Secure issues the target in dir a node certificate of ca, for the
// hosts of its addresses and this machine's name, into dir/tls, and
// records that directory in the identity: from its next start the target
// serves and dials over TLS only.
func Secure(dir string, ca *pki.CA) error {
	id, err := Load(dir)
	if err != nil {
		return err
	}
	hosts := []string{pki.HostOf(id.Listen), pki.HostOf(id.DataListen)}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	name := id.Name()
	if id.ReplicaID != 0 {
		name = fmt.Sprintf("%s-r%d", name, id.ReplicaID)
	}
	if err := ca.Issue(filepath.Join(dir, TLSDirName), pki.Request{Name: name, Role: pki.RoleNode, Hosts: hosts}); err != nil {
		return fmt.Errorf("%s: %w", id.Name(), err)
	}
	id.TLSDir = TLSDirName
	return Save(dir, id)
}
