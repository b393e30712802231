// Package localcluster brings up and down a whole Nacre file system on one
// machine: an MGS, M MDTs and N OSTs, each a separate `nacre serve`
// process on loopback, with their directories under one cluster directory:
//
//	D/mgs   D/mdt0 ... D/mdtM-1   D/ost0 ... D/ostN-1
//
// With Replicas R > 1 the MGS and every MDT are R-replica Raft groups, each
// with its own peers, one process and directory per replica:
//
//	D/mgs-r1 ... D/mgs-rR   D/mdt0-r1 ... D/mdt0-rR   D/mdt1-r1 ...   D/ost0 ...
//
// MDT0 holds the root directory; another MDT starts empty and serves the
// FID sequences the MGS grants it. Up formats what is new, starts every
// target that is not running, waits until the MGS reports all of them up
// and every MDT has a leader, and then either
// returns (detached) or waits for a signal and stops the processes. A
// target the MGS has registered whose directory is missing keeps the
// cluster from being declared ready (unless AllowMissing). When Up fails
// it stops the processes it started and leaves alone those that ran
// before. Down stops the processes of a cluster directory by the pids in
// their pid files. An up holds the cluster directory's lock (lockUp)
// while it starts the cluster and, without Detach, while it supervises
// it (Run), so that a second up there is refused naming its pid.
//
// With NodeCPU each target process runs in a cgroup of its own with a CPU
// budget for its role, so that the targets behave as nodes of their own
// (budget.go); Down removes the cgroups.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/cgroup"
	"nacre/internal/fusefs"
	"nacre/internal/grpcx"
	"nacre/internal/layout"
	"nacre/internal/obs"
	"nacre/internal/pki"
	"nacre/internal/ports"
	"nacre/internal/reserve"
	"nacre/internal/server"
	"nacre/internal/target"
	"nacre/internal/target/proc"
	"nacre/internal/version"
)

// Options configure Up.
type Options struct {
	Dir string
	// Fsname names the file system of a new cluster (default "nacre");
	// an existing cluster keeps its own, with a note if this differs.
	Fsname string
	// OSTs is the number of OSTs: a new cluster gets this many (default 2);
	// an existing one grows to it (never shrinks: a smaller number is
	// noted as ignored; 0 keeps what it has).
	OSTs int
	// MDTs is the number of MDTs, as OSTs is of OSTs: a new cluster gets
	// this many (default 1); an existing one grows to it, the new MDTs
	// empty and with as many replicas as MDT0 (never shrinks: an MDT
	// removed would take the metadata it holds with it; 0 keeps what it
	// has). At most MaxLocalMDTs.
	MDTs int
	// Binary is the nacre executable to run the targets (default: this one).
	Binary string
	// Out receives progress lines for people.
	Out io.Writer
	// ReadyTimeout bounds the wait for every target (default 60 s).
	ReadyTimeout time.Duration
	// Mount, if set, is a directory to mount the file system at once it is
	// ready (`nacre up --mount`); Down unmounts it.
	Mount string
	// MountState is where mount daemons record themselves
	// (fusefs.StateDir; "": fusefs.StateDir("")).
	MountState string
	// Replicas is the number of replicas of the MGS and of each MDT of a
	// new cluster (default 1; 1 or an odd number from 3, CheckReplicas);
	// an existing cluster keeps what it has, with a note if this differs.
	Replicas int
	// AllowMissing starts an existing cluster even though the MGS has
	// registered an OST (or an MDT replica) whose directory is missing
	// here; without it Up refuses (`nacre up --allow-missing`).
	AllowMissing bool
	// ExitWithParent has the kernel kill the targets this Up starts when
	// the process that started them dies (tests: a test binary killed by
	// its timeout leaves no servers behind). `nacre up --detach` leaves
	// it off: its servers outlive it.
	ExitWithParent bool
	// NodeCPU gives the target processes Up starts CPU budgets by role,
	// each in a cgroup of its own (`nacre up --node-cpu`; budget.go).
	// Zero: a target started again keeps the budget the cluster's
	// cgroups give it, and a cluster without them runs without budgets.
	NodeCPU NodeCPU
	// TLS makes a new cluster's links TLS (`nacre up --tls`): a
	// certificate authority in DIR/tls, node credentials per target, and
	// admin credentials for the user in DIR/tls/admin (tls.go). A cluster
	// made so keeps TLS without it.
	TLS bool
}

// Cluster describes a running local cluster.
type Cluster struct {
	Dir string
	MGS string
	// TLSDir is the admin credentials directory of a cluster with TLS
	// (what NACRE_TLS_DIR names for its commands; "" without TLS), and
	// TLS what it holds.
	TLSDir  string
	TLS     *pki.Creds
	Targets []Proc
	// cpuAt names the cgroup version of the targets' CPU budgets ("":
	// none has one).
	cpuAt string
	// budgets are the cgroups of the targets this Up starts.
	budgets *budgets
}

// DefaultDir is the cluster directory of `nacre up` and `nacre down`
// without --dir.
const DefaultDir = "nacre-cluster"

// Proc is one target process.
type Proc struct {
	Name string
	Dir  string
	Pid  int
	// Started says that this Up started the process (it was not running
	// before): a failed Up stops only those.
	Started bool
	// CPU is the process's CPU budget in cores, and Cgroup the cgroup
	// that gives it (0, "": none).
	CPU    float64
	Cgroup string
	// logFrom is the size of its log when Up started it: what a failed
	// start wrote begins there.
	logFrom int64
}

// Dirs lists the target directories of a cluster directory: the MGS
// (or its replicas) first, then MDTs, then OSTs, in index (and replica)
// order.
func Dirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, notACluster(dir, "no such directory")
	}
	if err != nil {
		return nil, err
	}
	type named struct {
		name                 string
		kind, index, replica int
	}
	var list []named
	for _, e := range entries {
		n := e.Name()
		// Exactly the names up gives: a copy such as ost0.bak (a
		// backup of the directory) is no target, and started as one
		// it would serve OST0's old objects, or take its port.
		if !e.IsDir() || !targetDirName.MatchString(n) {
			continue
		}
		nd := named{name: n, kind: -1}
		base, rep, _ := strings.Cut(n, "-r")
		if rep != "" {
			if _, err := fmt.Sscanf(rep, "%d", &nd.replica); err != nil {
				continue
			}
		}
		switch {
		case base == "mgs":
			nd.kind = 0
		case strings.HasPrefix(base, "mdt"):
			nd.kind = 1
			fmt.Sscanf(base, "mdt%d", &nd.index)
		case strings.HasPrefix(base, "ost"):
			nd.kind = 2
			fmt.Sscanf(base, "ost%d", &nd.index)
		}
		// An empty directory is not a target yet (a mount point made
		// for one that --osts did not ask for).
		if nd.kind >= 0 && !target.Empty(filepath.Join(dir, n)) {
			list = append(list, nd)
		}
	}
	if !slices.ContainsFunc(list, func(n named) bool { return n.kind == 0 }) {
		return nil, notACluster(dir, "no mgs directory")
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i], list[j]
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		if a.index != b.index {
			return a.index < b.index
		}
		return a.replica < b.replica
	})
	out := make([]string, len(list))
	for i, n := range list {
		out[i] = filepath.Join(dir, n.name)
	}
	return out, nil
}

// isMGSDir tells the MGS's directories (mgs, mgs-rN) from the others.
func isMGSDir(d string) bool {
	b := filepath.Base(d)
	return b == "mgs" || strings.HasPrefix(b, "mgs-r")
}

// MGSAddr reads the MGS address of a cluster directory: "host:port", or
// for a replicated MGS the replicas' addresses, "a,b,c".
func MGSAddr(dir string) (string, error) {
	id, err := target.Load(filepath.Join(dir, "mgs"))
	if err == nil {
		return id.Listen, nil
	}
	reps, _ := filepath.Glob(filepath.Join(dir, "mgs-r*"))
	if len(reps) == 0 {
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Stat(dir); serr != nil {
				return "", notACluster(dir, "no such directory")
			}
			return "", notACluster(dir, "no mgs directory")
		}
		return "", err
	}
	// The replicas present now (replaced ones are moved aside).
	peers := map[uint64]string{}
	for _, d := range reps {
		rid, rerr := target.Load(d)
		if rerr != nil {
			return "", rerr
		}
		peers[rid.ReplicaID] = rid.Listen
	}
	return server.MGSAddrs(target.Identity{Peers: peers}), nil
}

// notACluster is the error for a directory that holds no local cluster.
func notACluster(dir, why string) error {
	return fmt.Errorf("%s is not a local Nacre cluster (%s): give --dir the directory `nacre up --dir` was given (default ./%s)", dir, why, DefaultDir)
}

// format creates the directories of a new cluster, or the MDTs and OSTs
// an existing one lacks.
func format(o Options) error {
	fresh := isNew(o.Dir)
	if fresh {
		if err := checkNewClusterDir(o.Dir); err != nil {
			return err
		}
		if err := formatNew(o); err != nil {
			return err
		}
		fmt.Fprintf(o.Out, "formatted new file system %q in %s\n", o.Fsname, o.Dir)
	}
	mgsAddr, err := MGSAddr(o.Dir)
	if err != nil {
		return err
	}
	fsname := o.Fsname
	if dirs, err := Dirs(o.Dir); err == nil {
		if id, err := target.Load(dirs[0]); err == nil {
			fsname = id.Fsname
		}
	}
	if !fresh {
		// In a cluster that exists, a bare target directory is more
		// likely the mount point of a device that is not mounted (after
		// a reboot) than a place for a new target: formatting it would
		// put a new target on the wrong file system, and leaving it out
		// would start the cluster without it. A device that is mounted
		// there (ext4's has its lost+found, XFS's is empty) is a place
		// for a new target.
		entries, _ := os.ReadDir(o.Dir)
		for _, e := range entries {
			d := filepath.Join(o.Dir, e.Name())
			if sub, err := os.ReadDir(d); err == nil && len(sub) == 0 && e.IsDir() && targetDirName.MatchString(e.Name()) && !isMountPoint(d) {
				return emptyTargetDir(o, d, e.Name(), fsname, mgsAddr)
			}
		}
	}
	if err := formatMDTs(o, fresh, fsname, mgsAddr); err != nil {
		return err
	}
	for i := 0; i < o.OSTs; i++ {
		d := filepath.Join(o.Dir, fmt.Sprintf("ost%d", i))
		if _, err := target.Load(d); err == nil {
			continue
		}

		if err := formatTarget(o.Dir, d, target.Identity{Fsname: fsname, Kind: target.OST, Index: uint32(i), MGSNode: mgsAddr, Listen: "127.0.0.1:0", DataListen: "127.0.0.1:0"}); err != nil {
			return err
		}
	}
	return nil
}

// formatMDTs formats the MDTs that o.MDTs asks for and the cluster lacks:
// every one of a new cluster (MDT0 with the root directory, the others
// empty), and for an existing one those above the highest index it has
// had, with as many replicas as its MDT0. An MDT whose directory is
// missing is not formatted again: an empty MDT in its place would lose
// the files it held, and the MGS refuses it (checkRegistered names it).
// The number of MDTs formatted is kept in D/.nacre-mdts (mdtCountFile),
// so that this holds for the highest one too.
func formatMDTs(o Options, fresh bool, fsname, mgsAddr string) error {
	dirs, err := Dirs(o.Dir)
	if err != nil {
		return err
	}
	replicas, next := max(o.Replicas, 1), 0
	if !fresh {
		var reps int
		if reps, next = mdtsPresent(dirs); next == 0 {
			return nil // no MDT0: the start says it is missing
		}
		next = max(next, readMDTCount(o.Dir))
		replicas = groupSize(reps)
	}
	if o.MDTs <= next {
		return nil
	}
	var taken []string
	for _, d := range dirs {
		if id, err := target.Load(d); err == nil {
			taken = append(taken, id.Listen, id.DataListen, id.MetricsListen)
		}
	}
	pick := ports.NewPicker(taken...)
	for i := next; i < o.MDTs; i++ {
		if err := formatMDT(o.Dir, uint32(i), replicas, fsname, mgsAddr, pick); err != nil {
			return err
		}
		if err := writeMDTCount(o.Dir, i+1); err != nil {
			return err
		}
	}
	return nil
}

// groupSize is the number of replicas of a new MDT whose MDT0 has reps
// replica directories: as many, but odd (CheckReplicas), so that it
// survives as many failures. MDT0 has an even number while a replica is
// being replaced (added, the old one not yet removed: 4 of a group of 3)
// or after one was removed (2 of a group of 3).
func groupSize(reps int) int {
	switch {
	case reps <= 1:
		return 1
	case reps%2 == 1:
		return reps
	case reps == 2:
		return 3
	}
	return reps - 1
}

// mdtCountFile, in a cluster directory, holds the number of MDTs the
// cluster was formatted with ("2\n"). Absent (a cluster made before it
// was written), the MDT directories present tell.
const mdtCountFile = ".nacre-mdts"

// readMDTCount reads mdtCountFile (0: absent or unreadable).
func readMDTCount(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, mdtCountFile))
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// writeMDTCount records that the cluster in dir has n MDTs.
func writeMDTCount(dir string, n int) error {
	if err := os.WriteFile(filepath.Join(dir, mdtCountFile), []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
		return fmt.Errorf("record the number of MDTs of %s: %w", dir, err)
	}
	return nil
}

// mdtsPresent reads, from the target directories of a cluster, how many
// replica directories its MDT0 has (1 when it is not replicated) and the
// index after its highest MDT (0: it has none).
func mdtsPresent(dirs []string) (mdt0Replicas, next int) {
	for _, d := range dirs {
		m := mdtDirName.FindStringSubmatch(filepath.Base(d))
		if m == nil {
			continue
		}
		i, _ := strconv.Atoi(m[1])
		next = max(next, i+1)
		if i == 0 {
			mdt0Replicas++
		}
	}
	return mdt0Replicas, next
}

// formatMDT formats MDT index of a cluster: the single target D/mdtI, or
// replicas R-replica group D/mdtI-r1..rR, whose Raft addresses are picked
// now so that every replica's identity can name the others.
func formatMDT(dir string, index uint32, replicas int, fsname, mgsAddr string, pick *ports.Picker) error {
	base := filepath.Join(dir, fmt.Sprintf("mdt%d", index))
	if replicas <= 1 {
		return formatTarget(dir, base, target.Identity{Fsname: fsname, Kind: target.MDT, Index: index, MGSNode: mgsAddr, Listen: "127.0.0.1:0", DataListen: "127.0.0.1:0"})
	}
	peers, err := pickGroup(pick, replicas)
	if err != nil {
		return err
	}
	// One creation time for all replicas: the root directory's times
	// come from it, and replicas must start identical.
	created := time.Now().UTC()
	for r := 1; r <= replicas; r++ {
		id := target.Identity{Fsname: fsname, Kind: target.MDT, Index: index, MGSNode: mgsAddr, Listen: peers[uint64(r)],
			DataListen: "127.0.0.1:0", ReplicaID: uint64(r), Peers: peers, Created: created}
		if err := formatTarget(dir, fmt.Sprintf("%s-r%d", base, r), id); err != nil {
			return err
		}
	}
	return nil
}

// pickGroup picks the Raft addresses of an n-replica group, by replica id.
func pickGroup(pick *ports.Picker, n int) (map[uint64]string, error) {
	peers := map[uint64]string{}
	for r := 1; r <= n; r++ {
		a, err := pick.Pick("127.0.0.1")
		if err != nil {
			return nil, err
		}
		peers[uint64(r)] = a
	}
	return peers, nil
}

// emptyTargetDir is the refusal of an empty target directory that no
// device is mounted on, with the commands that work either way.
func emptyTargetDir(o Options, d, name, fsname, mgsAddr string) error {
	how := fmt.Sprintf("mount the device first, then run `nacre up --dir %s` again", o.Dir)
	if m := ostDirName.FindStringSubmatch(name); m != nil {
		how += fmt.Sprintf("; to make a new OST in this directory of the root file system, run `nacre format --type ost --index %s --fsname %s --mgsnode %s --dir %s`, then `nacre up --dir %s --osts %d`",
			m[1], fsname, mgsAddr, d, o.Dir, o.OSTs)
	}
	if m := mdtDirName.FindStringSubmatch(name); m != nil && m[2] == "" && m[1] != "0" {
		i, _ := strconv.Atoi(m[1])
		how += fmt.Sprintf("; to make a new, empty MDT in this directory of the root file system, run `nacre format --type mdt --index %d --fsname %s --mgsnode %s --dir %s`, then `nacre up --dir %s --mdts %d`",
			i, fsname, mgsAddr, d, o.Dir, max(o.MDTs, i+1))
	}
	return fmt.Errorf("%s is empty and no device is mounted on it: if it is the mount point of a target's device, %s", d, how)
}

// ostDirName is an OST's directory in a cluster directory, with its index.
var ostDirName = regexp.MustCompile(`^ost(\d+)$`)

// mdtDirName is an MDT's directory in a cluster directory (mdt1, or a
// replica's, mdt1-r3), with its index and replica id.
var mdtDirName = regexp.MustCompile(`^mdt(\d+)(?:-r(\d+))?$`)

// isMountPoint says whether dir is where a file system is mounted (its
// device differs from its parent's).
func isMountPoint(dir string) bool {
	var st, parent syscall.Stat_t
	if syscall.Stat(dir, &st) != nil || syscall.Stat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// isNew says whether dir holds no cluster yet: no MGS directory holds
// anything (an empty one may be the mount point of the MGS's device).
// MaxLocalOSTs bounds `nacre up --osts`: a typo must not start thousands
// of processes.
const MaxLocalOSTs = 256

// MaxLocalMDTs bounds `nacre up --mdts`: each MDT is a metadata server (R
// of them with --replicas R) with its own store and precreate pools on
// every OST, so more than a few on one machine only share its cores.
const MaxLocalMDTs = 8

// upLockFile is the lock `nacre up` holds on a cluster directory while it
// formats and starts targets there, and, without --detach, for as long as
// it supervises the cluster. It is an flock(2), which the kernel drops
// when its holder dies (even of SIGKILL), so a cluster whose up is gone
// can be started again; the file holds the holder's pid, then
// "supervising" once it supervises the cluster and "stopping" once it
// stops it.
const upLockFile = ".nacre-up.lock"

// lockRetry is how long lockUp tries again before it refuses: `nacre down`
// takes the lock for a moment to see whether an up holds it (LockHolder),
// and an up at that moment must not be refused for it.
const lockRetry = 300 * time.Millisecond

// upLock is a cluster directory's lock, held (lockUp).
type upLock struct {
	f       *os.File
	path    string
	created bool
}

// lockUp takes the cluster directory's lock, refusing when another
// `nacre up` holds it: two at once would format the same targets and
// stop each other's processes, and a second up on a cluster the first
// supervises took it over, so that its Ctrl-C stopped the cluster (and
// removed the mount) the first one's terminal was using.
func lockUp(dir string) (*upLock, error) {
	p := filepath.Join(dir, upLockFile)
	created := true
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		created = false
		f, err = os.OpenFile(p, os.O_RDWR, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("lock cluster directory %s: %w", dir, err)
	}
	deadline := time.Now().Add(lockRetry)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, heldError(dir, readHolder(p))
		}
		if created {
			os.Remove(p)
		}
		return nil, fmt.Errorf("lock cluster directory %s: %w", dir, err)
	}
	l := &upLock{f: f, path: p, created: created}
	l.write("")
	return l, nil
}

// write records this process, and what it does (state), in the lock file.
func (l *upLock) write(state string) {
	b := []byte(strings.TrimSpace(strconv.Itoa(os.Getpid())+" "+state) + "\n")
	// Written before the truncation, so a reader never finds it empty.
	l.f.WriteAt(b, 0)
	l.f.Truncate(int64(len(b)))
}

// What the lock file says after the pid: the holder supervises the
// cluster, or stops it (nothing: it starts it). A refused up says which.
const (
	supervisingState = "supervising"
	stoppingState    = "stopping"
)

// release releases the lock, and with remove also deletes the lock file
// if lockUp created it: an up that is refused must not leave its lock in
// a directory that is no cluster.
func (l *upLock) release(remove bool) {
	if remove && l.created {
		// Removed while held: a second up that opened it meanwhile
		// fails its flock and says another up runs.
		os.Remove(l.path)
	}
	l.f.Close()
}

// Holder is the `nacre up` that holds a cluster directory's lock.
type Holder struct {
	Pid int
	// State is what it does: "" (starting the cluster), supervisingState
	// (it has started it and stops it on Ctrl-C) or stoppingState.
	State string
}

// readHolder reads the holder a lock file names (Pid 0: none named).
func readHolder(p string) Holder {
	b, err := os.ReadFile(p)
	if err != nil {
		return Holder{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	var h Holder
	if len(fields) > 0 {
		h.Pid, _ = strconv.Atoi(fields[0])
	}
	if len(fields) > 1 {
		h.State = fields[1]
	}
	return h
}

// heldError refuses an up on dir, whose lock h holds.
func heldError(dir string, h Holder) error {
	who := "another `nacre up`"
	if h.Pid > 0 {
		who = fmt.Sprintf("another `nacre up` (pid %d)", h.Pid)
	}
	switch h.State {
	case supervisingState:
		return fmt.Errorf("%s supervises the cluster in %s: it runs already (nacre status --dir %s); to stop it, press Ctrl-C where that up runs or run `nacre down --dir %s`", who, dir, dir, dir)
	case stoppingState:
		return fmt.Errorf("%s is stopping the cluster in %s; wait for it to end, then run this again", who, dir)
	}
	return fmt.Errorf("%s is starting the cluster in %s; wait for it to finish, then run this again", who, dir)
}

// LockHolder says whether a `nacre up` holds the lock of the cluster
// directory dir (starting or supervising the cluster), and which.
func LockHolder(dir string) (Holder, bool) {
	p := filepath.Join(dir, upLockFile)
	f, err := os.Open(p)
	if err != nil {
		return Holder{}, false
	}
	defer f.Close()
	// A shared lock, let go at once: an up taking the lock meanwhile
	// tries again (lockRetry).
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		return Holder{}, false
	} else if !errors.Is(err, syscall.EWOULDBLOCK) {
		return Holder{}, false
	}
	return readHolder(p), true
}

func isNew(dir string) bool {
	mgsDirs, _ := filepath.Glob(filepath.Join(dir, "mgs-r*"))
	for _, d := range append(mgsDirs, filepath.Join(dir, "mgs")) {
		if _, err := os.Stat(d); err == nil && !target.Empty(d) {
			return false
		}
	}
	return true
}

// CheckReplicas accepts a number of replicas for the MGS and the MDTs: 1,
// or an odd number from 3. A Raft group works while a majority of its
// replicas do, so 2 replicas survive no failure (no better than 1, with
// twice the processes) and an even number survives no more failures than
// one fewer.
func CheckReplicas(n int) error {
	if n == 1 || (n >= 3 && n%2 == 1) {
		return nil
	}
	why := "a group needs at least 1 replica"
	if n >= 2 {
		why = fmt.Sprintf("a Raft group works while a majority of its replicas do, so %d replicas survive no more failures than %d", n, n-1)
		if n == 2 {
			why = "a Raft group works while a majority of its replicas do, so 2 replicas survive no failure, no better than 1"
		}
	}
	return fmt.Errorf("--replicas %d: use 1, or an odd number from 3 (3 survive the loss of one replica): %s", n, why)
}

// noteIgnored tells, for an existing cluster, which of the options given
// for a new one it does not apply: the file system name and the number of
// replicas are fixed when a cluster is made, and MDTs and OSTs are only
// added.
func noteIgnored(o Options) {
	dirs, err := Dirs(o.Dir)
	if err != nil {
		return // the start says what is wrong
	}
	id, err := target.Load(dirs[0])
	if err == nil && o.Fsname != "" && o.Fsname != id.Fsname {
		fmt.Fprintf(o.Out, "note: --fsname %s is ignored: %s holds file system %q already, whose name was fixed when it was formatted\n", o.Fsname, o.Dir, id.Fsname)
	}
	mgsReps, osts := 0, 0
	mdtReps := map[int]int{} // replica directories by MDT index
	for _, d := range dirs {
		b := filepath.Base(d)
		switch m := mdtDirName.FindStringSubmatch(b); {
		case strings.HasPrefix(b, "mgs-r"):
			mgsReps++
		case m != nil:
			i, _ := strconv.Atoi(m[1])
			mdtReps[i]++
		case strings.HasPrefix(b, "ost"):
			osts++
		}
	}
	mgsReps = max(mgsReps, 1)
	same := true // every MDT has as many replica directories as the MGS
	for _, n := range mdtReps {
		same = same && n == mgsReps
	}
	if o.Replicas != 0 && (o.Replicas != mgsReps || !same) {
		has := "an MGS and MDTs that are not replicated; whether they are is decided when a cluster is made (a new cluster directory gets --replicas)"
		switch {
		case mgsReps > 1 && same:
			has = fmt.Sprintf("%d replicas each of the MGS and of every MDT; change them in the running cluster with `nacre replica add|remove --target mgs|mdtN`", mgsReps)
		case mgsReps > 1 || !same:
			has = fmt.Sprintf("%d replica directories of the MGS and %s (`nacre replica list` shows which are members); change them in the running cluster with `nacre replica add|remove --target mgs|mdtN`", mgsReps, replicaCounts(mdtReps))
		}
		fmt.Fprintf(o.Out, "note: --replicas %d is ignored: %s exists with %s\n", o.Replicas, o.Dir, has)
	}
	if o.MDTs > 0 && o.MDTs < len(mdtReps) {
		fmt.Fprintf(o.Out, "note: --mdts %d is ignored: %s has %d MDTs already, and a cluster never loses MDTs (one removed would take the metadata it holds with it; a larger --mdts adds MDTs)\n", o.MDTs, o.Dir, len(mdtReps))
	}
	if o.OSTs > 0 && o.OSTs < osts {
		fmt.Fprintf(o.Out, "note: --osts %d is ignored: %s has %d OSTs already, and a cluster never loses OSTs (a larger --osts adds OSTs)\n", o.OSTs, o.Dir, osts)
	}
}

// replicaCounts says how many replica directories each MDT has: "4 of
// the MDT" (one MDT), "3 of each MDT", or "3 of MDT0, 4 of MDT1".
func replicaCounts(byIndex map[int]int) string {
	idx := slices.Sorted(maps.Keys(byIndex))
	switch {
	case len(idx) == 0:
		return "none of an MDT"
	case len(idx) == 1:
		return fmt.Sprintf("%d of the MDT", byIndex[idx[0]])
	case !slices.ContainsFunc(idx, func(i int) bool { return byIndex[i] != byIndex[idx[0]] }):
		return fmt.Sprintf("%d of each MDT", byIndex[idx[0]])
	}
	var parts []string
	for _, i := range idx {
		parts = append(parts, fmt.Sprintf("%d of MDT%d", byIndex[i], i))
	}
	return strings.Join(parts, ", ")
}

// targetDirName matches the names of a local cluster's target
// directories.
var targetDirName = regexp.MustCompile(`^(mgs|mdt[0-9]+|ost[0-9]+|(mgs|mdt[0-9]+)-r[0-9]+)$`)

// checkNewClusterDir accepts a directory for a new cluster: empty, or
// holding only empty directories named as the targets will be (mount
// points: a device of its own for an OST, as a Lustre admin mounts one
// per target before formatting it).
func checkNewClusterDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // the format says what is wrong
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if (e.Name() == upLockFile || e.Name() == mdtCountFile) && !e.IsDir() {
			continue // ours (lockUp, formatMDTs)
		}
		if e.Name() == caDirName && e.IsDir() {
			continue // ours (initTLS, made just before the targets)
		}
		if !e.IsDir() || !targetDirName.MatchString(e.Name()) || !target.Empty(p) {
			return fmt.Errorf("%s is not empty and holds no Nacre cluster (%s is in the way); use an empty or new directory (empty directories named mgs, mdtN or ostN, such as mount points of devices for those targets, are fine)", dir, p)
		}
	}
	return nil
}

// formatNew formats the MGS of a new cluster: a single target, or
// Replicas replicas, whose Raft addresses are fixed now so that every
// replica's identity can name the others (formatMDTs formats its MDTs).
func formatNew(o Options) error {
	pick := ports.NewPicker()
	if o.Replicas <= 1 {
		addr, err := pick.Pick("127.0.0.1")
		if err != nil {
			return err
		}
		return formatTarget(o.Dir, filepath.Join(o.Dir, "mgs"), target.Identity{Fsname: o.Fsname, Kind: target.MGS, Listen: addr})
	}
	peers, err := pickGroup(pick, o.Replicas)
	if err != nil {
		return err
	}
	created := time.Now().UTC()
	for r := 1; r <= o.Replicas; r++ {
		id := target.Identity{Fsname: o.Fsname, Kind: target.MGS, Listen: peers[uint64(r)], ReplicaID: uint64(r), Peers: peers, Created: created}
		if err := formatTarget(o.Dir, filepath.Join(o.Dir, fmt.Sprintf("mgs-r%d", r)), id); err != nil {
			return err
		}
	}
	return nil
}

// Up formats (when new) and starts a cluster and waits until it is ready.
// The processes keep running after Up returns; stop them with Down. When
// Up fails it stops the processes it started, and only those: targets
// that were running before are left alone, and the error says which were
// stopped and which left running. Up refuses a cluster directory whose
// lock another `nacre up` holds (lockUp), naming its pid.
func Up(ctx context.Context, o Options) (*Cluster, error) {
	c, l, err := up(ctx, o)
	if err != nil {
		return nil, err
	}
	l.release(false)
	return c, nil
}

// up is Up, returning with the cluster directory's lock held.
func up(ctx context.Context, o Options) (_ *Cluster, _ *upLock, err error) {
	if o.OSTs < 0 {
		return nil, nil, fmt.Errorf("--osts %d: the number of OSTs must be at least 1", o.OSTs)
	}
	if o.OSTs > MaxLocalOSTs {
		return nil, nil, fmt.Errorf("--osts %d: a local cluster runs each OST as a process on this machine; at most %d (a larger file system runs its OSTs on their own servers: nacre format and nacre serve)", o.OSTs, MaxLocalOSTs)
	}
	if o.MDTs != 0 {
		if err := CheckMDTs(o.MDTs); err != nil {
			return nil, nil, err
		}
	}
	if o.Replicas != 0 {
		if err := CheckReplicas(o.Replicas); err != nil {
			return nil, nil, err
		}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 60 * time.Second
	}
	if o.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, err
		}
		o.Binary = exe
	}
	if o.Mount != "" {
		// A mount point that cannot be used is found now, before
		// anything is started only to be stopped again.
		abs, err := fusefs.MountPath(o.Mount)
		if err != nil {
			return nil, nil, err
		}
		if _, err := mountPointState(o.Dir, abs, o.MountState); err != nil {
			return nil, nil, err
		}
	}
	if !o.NodeCPU.IsZero() {
		// A machine without a usable cpu controller is found now,
		// before a new cluster is formatted only to be left unstarted.
		if _, err := cgroup.Usable(cgroup.Options{}); err != nil {
			return nil, nil, fmt.Errorf("--node-cpu %s: %w", o.NodeCPU, err)
		}
	}
	if st, err := os.Stat(o.Dir); err == nil && !st.IsDir() {
		return nil, nil, fmt.Errorf("--dir %s is a file, not a directory: give the directory that holds (or is to hold) the cluster", o.Dir)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, nil, err
	}
	l, err := lockUp(o.Dir)
	if err != nil {
		return nil, nil, err
	}
	// An up that fails before the directory holds a cluster (one refused
	// as not empty) leaves the directory as it found it.
	defer func() {
		if err != nil {
			l.release(isNew(o.Dir))
		}
	}()
	if isNew(o.Dir) {
		if o.Fsname == "" {
			o.Fsname = "nacre"
		}
		if o.OSTs == 0 {
			o.OSTs = 2
		}
		if o.MDTs == 0 {
			o.MDTs = 1
		}
		if o.TLS {
			if err := checkNewClusterDir(o.Dir); err != nil {
				return nil, nil, err
			}
			if err := initTLS(o.Dir, o.Fsname); err != nil {
				return nil, nil, err
			}
		}
	} else {
		noteIgnored(o)
		if o.TLS && !HasTLS(o.Dir) {
			return nil, nil, fmt.Errorf("--tls: the cluster in %s was made without TLS, and its targets have no certificates; a local cluster gets TLS when it is made (`nacre up --tls --dir NEW_DIR`)", o.Dir)
		}
	}
	if err := format(o); err != nil {
		return nil, nil, err
	}
	dirs, err := Dirs(o.Dir)
	if err != nil {
		return nil, nil, err
	}
	mgsAddr, err := MGSAddr(o.Dir)
	if err != nil {
		return nil, nil, err
	}
	if err := checkBelongs(o.Dir, dirs, mgsAddr); err != nil {
		return nil, nil, err
	}
	c := &Cluster{Dir: o.Dir, MGS: mgsAddr}
	if c.TLS, err = adminCreds(o.Dir); err != nil {
		return nil, nil, err
	}
	if c.TLS != nil {
		if c.TLSDir, err = filepath.Abs(AdminTLSDir(o.Dir)); err != nil {
			return nil, nil, err
		}
	}
	if err := c.start(ctx, o, dirs); err != nil {
		return nil, nil, c.stopStarted(err)
	}
	return c, l, nil
}

// checkBelongs refuses, before anything starts, a target directory of the
// cluster in dir whose identity names another file system or another MGS
// than the cluster's (mgs): one copied from another cluster. Started, it
// would look for an MGS that is not there, and up would wait for it in
// vain (or, worse, it would register with that other cluster's MGS).
func checkBelongs(dir string, dirs []string, mgs string) error {
	var fsname string
	for _, d := range dirs {
		if isMGSDir(d) {
			if id, err := target.Load(d); err == nil {
				fsname = id.Fsname
			}
		}
	}
	for _, d := range dirs {
		if isMGSDir(d) {
			continue
		}
		id, err := target.Load(d)
		if err != nil {
			return err
		}
		var why string
		switch {
		case fsname != "" && id.Fsname != fsname:
			why = fmt.Sprintf("belongs to file system %q, and this cluster is %q", id.Fsname, fsname)
		case !sharesAddr(id.MGSNode, mgs):
			why = fmt.Sprintf("looks for its MGS at %s, and this cluster's MGS is at %s", id.MGSNode, mgs)
		}
		if why != "" {
			return fmt.Errorf("%s (%s) %s: it comes from another cluster. Move it out of %s (if this cluster's own %s is elsewhere, put that one back)",
				d, id.Label(), why, dir, filepath.Base(d))
		}
	}
	return nil
}

// start starts the targets in dirs that are not running, waits until the
// cluster is ready and mounts it if asked.
func (c *Cluster) start(ctx context.Context, o Options, dirs []string) error {
	ids := map[string]target.Identity{}
	serving := map[string]int{} // the pid of each target already running
	var toStart, running []string
	for _, d := range dirs {
		id, err := target.Load(d)
		if err != nil {
			return err
		}
		ids[d] = id
		if pid, ok := proc.Serving(d); ok {
			serving[d] = pid
			running = append(running, filepath.Base(d))
		} else {
			toStart = append(toStart, d)
		}
	}
	// Every cgroup is made before any process starts: one that cannot be
	// made starts nothing.
	b, err := planBudgets(o.Dir, o.NodeCPU, toStart, ids)
	if err != nil {
		return err
	}
	c.budgets = b
	if !o.NodeCPU.IsZero() && len(running) > 0 {
		fmt.Fprintf(o.Out, "note: --node-cpu gives budgets to the targets this up starts; %s ran already and keep what they have (`nacre down` and up again to change it)\n", strings.Join(running, ", "))
	}
	for _, d := range dirs {
		id := ids[d]
		name := id.Label()
		if id.ReplicaID != 0 {
			name += fmt.Sprintf("-r%d", id.ReplicaID)
		}
		if pid, ok := serving[d]; ok {
			c.Targets = append(c.Targets, Proc{Name: name, Dir: d, Pid: pid})
			continue
		}
		var logFrom int64
		if fi, err := os.Stat(filepath.Join(d, proc.LogFile)); err == nil {
			logFrom = fi.Size()
		}
		pid, err := start(o.Binary, d, o.ExitWithParent, b.group(d))
		if err != nil {
			return fmt.Errorf("start %s: %w", name, err)
		}
		c.Targets = append(c.Targets, Proc{Name: name, Dir: d, Pid: pid, Started: true, logFrom: logFrom})
	}
	want := 0
	for _, d := range dirs {
		if !isMGSDir(d) {
			want++
		}
	}
	warned := false
	check := func(ts []*pb.TargetInfo) error {
		return checkRegistered(o, ts, &warned)
	}
	// An OST that fails to start (a damaged store) is, with
	// --allow-missing, left out as a missing one is: the rest of the file
	// system serves the files without stripes on it.
	tolerate := func(p Proc, err error) bool {
		if !o.AllowMissing || !strings.HasPrefix(p.Name, "OST") {
			return false
		}
		fmt.Fprintf(o.Out, "warning: %v\nstarting without %s (--allow-missing): files with stripes on it fail until it is back, and new files get fewer stripes\n", err, p.Name)
		return true
	}
	if err := waitReady(ctx, c, want, o.ReadyTimeout, check, tolerate); err != nil {
		return err
	}
	waitPools(ctx, c, poolWait)
	if msg := c.restarted(); msg != "" {
		fmt.Fprintln(o.Out, msg)
	}
	c.readBudgets()
	if msg := c.BudgetSummary(); msg != "" {
		fmt.Fprintln(o.Out, msg)
	}
	for _, w := range shortOfReserve(c.Targets, nil) {
		fmt.Fprintf(o.Out, "warning: %s\n", w)
	}
	if o.Mount != "" {
		if err := mountLocal(o.Binary, o.Dir, c.MGS, o.Mount, o.MountState, o.Out); err != nil {
			return err
		}
	}
	return nil
}

// restarted says what an up of a partly running cluster (after a crash,
// or one target that died) started and what it found running; "" when it
// started everything.
func (c *Cluster) restarted() string {
	var started, running []string
	for _, p := range c.Targets {
		if p.Started {
			started = append(started, p.Name)
		} else {
			running = append(running, fmt.Sprintf("%s (pid %d)", p.Name, p.Pid))
		}
	}
	switch {
	case len(running) == 0:
		return ""
	case len(started) == 0:
		return "every target was running already: " + strings.Join(running, ", ")
	}
	return fmt.Sprintf("started %s, which did not run; already running: %s", strings.Join(started, ", "), strings.Join(running, ", "))
}

// shortOfReserve names the targets whose device has less free than the
// target keeps for its store (statfs nil: the real one): a cluster made on
// a device too small for its targets starts, and then refuses every write.
func shortOfReserve(ts []Proc, statfs func(string) (reserve.Usage, error)) []string {
	var out []string
	for _, p := range ts {
		id, err := target.Load(p.Dir)
		if err != nil || id.Kind == target.MGS {
			continue
		}
		var total uint64
		if statfs == nil {
			statfs = reserve.Statfs
		}
		if u, err := statfs(p.Dir); err == nil {
			total = u.Total
		}
		if msg := reserve.ShortOfReserve(p.Dir, p.Name, server.StoreOptions(id.Kind, total).MemTable(), statfs); msg != "" {
			out = append(out, msg)
		}
	}
	return out
}

// stopStarted stops the processes this Up started, after err made it
// fail, and adds to err what was stopped and what was left running. The
// targets that ran before are not touched: `nacre up` on a running
// cluster (to mount it, or to start one target that died) must not stop
// the rest because its own part failed.
func (c *Cluster) stopStarted(err error) error {
	var started, before []Proc
	for _, p := range c.Targets {
		if p.Started {
			started = append(started, p)
		} else {
			before = append(before, p)
		}
	}
	labels := func(ps []Proc) string {
		var l []string
		for _, p := range ps {
			l = append(l, p.Name)
		}
		return strings.Join(l, ", ")
	}
	var alive []Proc
	for _, p := range started {
		if pid, ok := proc.Serving(p.Dir); ok && pid == p.Pid {
			alive = append(alive, p)
		}
	}
	if len(before) > 0 && len(alive) > 0 {
		// A restart of what was down in a running cluster: the targets
		// started may be what keeps its replicated groups in quorum
		// (stopping two MGS replicas restarted beside a third left the
		// cluster without an MGS). They stay, and so does the failure.
		return fmt.Errorf("%w\nleft running the %d target processes this run started (%s) and the %d that were running before (%s); `nacre down --dir %s` stops them all",
			err, len(alive), labels(alive), len(before), labels(before), c.Dir)
	}
	// The MGS was started first: stop in the reverse order, so that it
	// goes last.
	var names []string
	var pids []int
	for i := len(started) - 1; i >= 0; i-- {
		p := started[i]
		if pid, ok := proc.Serving(p.Dir); ok && pid == p.Pid {
			names = append(names, p.Name)
			pids = append(pids, p.Pid)
		}
	}
	stopPids(names, pids, io.Discard)
	c.budgets.remove()
	var what []string
	if len(pids) > 0 {
		what = append(what, fmt.Sprintf("stopped the target processes this run started (%s)", strings.Join(names, ", ")))
	}
	if len(before) > 0 {
		what = append(what, fmt.Sprintf("left running the %d that were running before (%s)", len(before), labels(before)))
	}
	if len(what) == 0 {
		return err
	}
	return fmt.Errorf("%w\n%s", err, strings.Join(what, "; "))
}

// checkRegistered compares the targets the MGS has registered with the
// target directories of the cluster: an OST or MDT registered from a
// directory of this cluster that is gone (moved away, its device not
// mounted) would otherwise leave the cluster running without it, with
// fewer stripes for new files and nothing said. It is refused, or with
// o.AllowMissing reported once (warned) and accepted; an MDT that is not
// replicated is refused in any case: its files, and below MDT0 the whole
// namespace, are out of reach without it.
func checkRegistered(o Options, ts []*pb.TargetInfo, warned *bool) error {
	host, _ := os.Hostname()
	var refuse []string
	for _, t := range ts {
		if t.Kind != pb.TargetKind_TARGET_OST && t.Kind != pb.TargetKind_TARGET_MDT {
			continue
		}
		if t.Dir == "" || (t.Host != "" && t.Host != host) || !inCluster(o.Dir, t.Dir) {
			continue // not a target of this cluster directory
		}
		local := filepath.Join(o.Dir, filepath.Base(t.Dir))
		if _, err := os.Lstat(local); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		missing := fmt.Sprintf("%s is registered with the MGS but its directory %s is missing (moved away, or its device not mounted)", label(t), local)
		restore := fmt.Sprintf("restore or mount %s and run `nacre up --dir %s` again", local, o.Dir)
		effect := "its group runs on its other replicas"
		if t.Kind == pb.TargetKind_TARGET_OST {
			effect = "files with stripes on it fail until it is back, and new files get fewer stripes"
		}
		switch {
		case t.Kind == pb.TargetKind_TARGET_MDT && t.ReplicaId == 0:
			return fmt.Errorf("%s: %s; the file system cannot run without its MDTs", missing, restore)
		case o.AllowMissing:
			if !*warned {
				fmt.Fprintf(o.Out, "warning: %s; starting without it (--allow-missing): %s\n", missing, effect)
			}
		default:
			refuse = append(refuse, fmt.Sprintf("%s: %s; to start without it, add --allow-missing (%s)", missing, restore, effect))
		}
	}
	*warned = true
	if len(refuse) > 0 {
		return errors.New(strings.Join(refuse, "\n"))
	}
	return nil
}

// label names a registered target as Up names its process: OST0001,
// MDT0000-r2.
func label(t *pb.TargetInfo) string {
	kind := "OST"
	if t.Kind == pb.TargetKind_TARGET_MDT {
		kind = "MDT"
	}
	s := fmt.Sprintf("%s%04x", kind, t.Index)
	if t.ReplicaId != 0 {
		s += fmt.Sprintf("-r%d", t.ReplicaId)
	}
	return s
}

// inCluster says whether the registered target directory d was a
// directory of the cluster in dir: its parent is dir (by name, or the
// same directory reached by another path).
func inCluster(dir, d string) bool {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	parent := filepath.Dir(d)
	if parent == abs {
		return true
	}
	a, errA := os.Stat(abs)
	b, errB := os.Stat(parent)
	return errA == nil && errB == nil && os.SameFile(a, b)
}

// Start runs `nacre serve --dir d` in its own session, logging to
// d/serve.log, and returns its pid (tests). A target of a cluster whose
// targets have CPU budgets gets its own (planBudgets).
func Start(bin, d string) (int, error) { return startKept(bin, d) }

// startKept starts the target in d with the budget the cgroups of its
// cluster keep for it.
func startKept(bin, d string) (int, error) {
	id, err := target.Load(d)
	if err != nil {
		return 0, err
	}
	b, err := planBudgets(filepath.Dir(d), NodeCPU{}, []string{d}, map[string]target.Identity{d: id})
	if err != nil {
		return 0, err
	}
	return start(bin, d, false, b.group(d))
}

// start runs `nacre serve --dir d` in its own session, logging to
// d/serve.log; with exitWithParent the kernel kills it when this process
// dies. With a cgroup g it runs in g from its first instruction
// (cgroup.Group.Command): a process that cannot join g exits at once,
// saying why in its log, and never runs without its budget.
func start(bin, d string, exitWithParent bool, g *cgroup.Group) (int, error) {
	logf, err := os.OpenFile(filepath.Join(d, proc.LogFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "serve", "--dir", d)
	if g != nil {
		cmd = g.Command(bin, "serve", "--dir", d)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if exitWithParent {
		// The signal follows the thread that forks, not the process: the
		// goroutine keeps its thread for the fork, and Go ends a thread
		// only when a goroutine locked to it exits.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	pid := cmd.Process.Pid
	// Record the pid now rather than when the server gets to it, so that
	// a Down right after this start cannot miss the process.
	proc.WritePid(d, pid)
	// Reap the child if it exits while we run; its pid file tells Down.
	go cmd.Wait()
	return pid, nil
}

// poolWait bounds how long Up waits for the MDTs' pools of precreated
// objects: an OST whose disk is full never gets one, and must not keep
// the cluster from starting.
const poolWait = 10 * time.Second

// waitPools waits, at most d, until every leading MDT has precreated
// objects on every OST that is up: until then a create takes only the
// OSTs it has objects on, so a new user's first `setstripe -c -1` would
// get fewer stripes than there are OSTs.
func waitPools(ctx context.Context, c *Cluster, d time.Duration) {
	deadline := time.Now().Add(d)
	cc, err := grpcx.Dial(c.MGS, grpcx.WithTLS(c.TLS))
	if err != nil {
		return
	}
	defer cc.Close()
	m := nacregrpc.NewMGSClient(cc)
	for time.Now().Before(deadline) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		cfg, err := m.GetConfig(cctx, &pb.GetConfigRequest{})
		cancel()
		if err == nil && poolsFull(ctx, cfg.Targets) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// poolsFull reports whether every leading MDT's metrics show objects
// precreated on every OST that is up.
func poolsFull(ctx context.Context, ts []*pb.TargetInfo) bool {
	osts := 0
	for _, t := range ts {
		if t.Kind == pb.TargetKind_TARGET_OST && t.State == "up" {
			osts++
		}
	}
	for _, t := range ts {
		if t.Kind != pb.TargetKind_TARGET_MDT || !t.Leader || t.State != "up" {
			continue
		}
		if t.MetricsAddr == "" {
			continue // nothing to ask: do not wait for it
		}
		sc, err := obs.Fetch(ctx, "http://"+t.MetricsAddr+"/metrics")
		if err != nil {
			return false
		}
		ready := 0
		for _, ost := range sc.LabelValues("nacre_mds_precreate_pool_objects", "ost") {
			if sc.Sum("nacre_mds_precreate_pool_objects", map[string]string{"ost": ost}) > 0 {
				ready++
			}
		}
		if ready < osts {
			return false
		}
	}
	return true
}

// waitReady waits until every target is up in the MGS and every MDT has a
// leader;
// check sees every answer of the MGS first, and its error ends the wait.
func waitReady(ctx context.Context, c *Cluster, want int, timeout time.Duration, check func([]*pb.TargetInfo) error, tolerate func(Proc, error) bool) error {
	deadline := time.Now().Add(timeout)
	cc, err := grpcx.Dial(c.MGS, grpcx.WithTLS(c.TLS))
	if err != nil {
		return err
	}
	defer cc.Close()
	m := nacregrpc.NewMGSClient(cc)
	procs := map[int]Proc{}
	for _, p := range c.Targets {
		procs[p.Pid] = p
	}
	// startedNow says whether the MGS's record of t was made by a process
	// this start runs, for that very target: after a reboot the pid a
	// target last registered with may now be another target's.
	startedNow := func(t *pb.TargetInfo) bool {
		p, ok := procs[int(t.Pid)]
		if !ok {
			return false
		}
		if t.Dir == "" {
			return true
		}
		a, errA := os.Stat(p.Dir)
		b, errB := os.Stat(t.Dir)
		return errA == nil && errB == nil && os.SameFile(a, b)
	}
	var last string
	for time.Now().Before(deadline) {
		for i := 0; i < len(c.Targets); i++ {
			p := c.Targets[i]
			if proc.Running(p.Pid) {
				continue
			}
			err := exitedWhileStarting(p)
			if !tolerate(p, err) {
				return err
			}
			c.Targets = append(c.Targets[:i], c.Targets[i+1:]...)
			want--
			i--
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		cfg, err := m.GetConfig(cctx, &pb.GetConfigRequest{})
		cancel()
		if err == nil {
			if err := check(cfg.Targets); err != nil {
				return err
			}
			up := 0
			mdts, led := map[uint32]bool{}, map[uint32]bool{}
			for _, t := range cfg.Targets {
				if t.Kind == pb.TargetKind_TARGET_MDT {
					mdts[t.Index] = true
				}
				// Up means registered by the process running now: a new
				// MGS leader shows every target it knows as up for a
				// while before hearing from it, with the pid it had.
				if t.Kind != pb.TargetKind_TARGET_MGS && t.State == "up" && startedNow(t) {
					up++
					if t.Kind == pb.TargetKind_TARGET_MDT && t.Leader {
						led[t.Index] = true
					}
				}
			}
			leader := len(mdts) > 0 && len(led) == len(mdts)
			if up >= want && leader {
				return nil
			}
			last = fmt.Sprintf("%d of %d targets up, %d of %d MDTs with a leader", up, want, len(led), len(mdts))
		} else {
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("cluster in %s not ready after %s (%s); see the serve.log files", c.Dir, timeout, last)
}

// ProcessReport says, for a cluster whose MGS does not answer, which of
// its target processes run on this machine and how to start the others
// (bin names the nacre binary in the hint).
func ProcessReport(dir, bin string) string {
	dirs, err := Dirs(dir)
	if err != nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "target processes of %s on this machine:", dir)
	stopped := 0
	for _, d := range dirs {
		switch pid, ok := proc.Serving(d); {
		case ok:
			fmt.Fprintf(&b, "\n  %-10s running (pid %d)", filepath.Base(d), pid)
		default:
			stopped++
			fmt.Fprintf(&b, "\n  %-10s not running", filepath.Base(d))
		}
	}
	if stopped > 0 {
		fmt.Fprintf(&b, "\nstart them with: %s up --dir %s", bin, dir)
	}
	return b.String()
}

// ProcessState is one target process of a local cluster as `nacre status
// --dir D --json` reports it when the MGS does not answer.
type ProcessState struct {
	Target  string `json:"target"` // the directory's name: mgs, mdt0, ost1, mdt0-r2
	Dir     string `json:"dir"`
	Running bool   `json:"running"`
	Pid     int    `json:"pid,omitempty"`
}

// Processes lists the target processes of the cluster in dir.
func Processes(dir string) ([]ProcessState, error) {
	dirs, err := Dirs(dir)
	if err != nil {
		return nil, err
	}
	out := make([]ProcessState, 0, len(dirs))
	for _, d := range dirs {
		ps := ProcessState{Target: filepath.Base(d), Dir: d}
		ps.Pid, ps.Running = proc.Serving(d)
		if !ps.Running {
			ps.Pid = 0
		}
		out = append(out, ps)
	}
	return out, nil
}

// Running counts the target processes of the cluster in dir that are
// alive, by their pid files (so replicas added since Up count too).
func Running(dir string) int {
	dirs, err := Dirs(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, d := range dirs {
		if _, ok := proc.Serving(d); ok {
			n++
		}
	}
	return n
}

// exitedWhileStarting describes a target that exited before it was
// ready by what its log got since it was started. A target that wrote
// nothing there may have had no room to: the free space of its device is
// then named too.
func exitedWhileStarting(p Proc) error {
	logPath := filepath.Join(p.Dir, proc.LogFile)
	// Give its last words a moment to reach the file.
	time.Sleep(50 * time.Millisecond)
	b, err := os.ReadFile(logPath)
	if err == nil && int64(len(b)) > p.logFrom {
		lines := strings.Split(strings.TrimRight(string(b[p.logFrom:]), "\n"), "\n")
		if len(lines) > 5 {
			lines = lines[len(lines)-5:]
		}
		return fmt.Errorf("%s (pid %d) exited while starting; its log %s says:\n  %s", p.Name, p.Pid, logPath, strings.Join(lines, "\n  "))
	}
	why := ""
	if u, err := reserve.Statfs(p.Dir); err == nil && u.Avail < 1<<20 {
		why = fmt.Sprintf(": the device of %s has %sB free, so it could not write one; free space there and start it again", p.Dir, layout.FormatSize(u.Avail))
	}
	return fmt.Errorf("%s (pid %d) exited while starting and wrote nothing to its log %s%s", p.Name, p.Pid, logPath, why)
}

// Down stops every target process of a cluster directory: OSTs and MDTs
// first, the MGS last; SIGTERM, then SIGKILL after 10 s. The mount of
// `nacre up --mount` is unmounted first (its daemon's record is looked
// for in fusefs.StateDir("")).
func Down(dir string, out io.Writer) error { return down(dir, "", out) }

// down is Down with the mount daemons' records in stateDir.
func down(dir, stateDir string, out io.Writer) error {
	dirs, err := Dirs(dir)
	if err != nil {
		return err
	}
	unmountLocal(dir, stateDir, out)
	// Everything else first, the MGS (or its replicas) last.
	var order, mgsDirs []string
	for _, d := range dirs {
		if isMGSDir(d) {
			mgsDirs = append(mgsDirs, d)
		} else {
			order = append(order, d)
		}
	}
	order = append(order, mgsDirs...)
	var pids []int
	var names []string
	for _, d := range order {
		pid, ok := proc.Serving(d)
		if !ok {
			continue
		}
		pids = append(pids, pid)
		names = append(names, filepath.Base(d))
	}
	stopPids(names, pids, out)
	if len(pids) == 0 {
		fmt.Fprintf(out, "no target of %s was running\n", dir)
	} else {
		fmt.Fprintf(out, "stopped %d target processes of %s\n", len(pids), dir)
	}
	removeCgroups(dir, out)
	return nil
}

// stopPids sends SIGTERM to every process in pids (named by names), all
// at once, and SIGKILL to those still running 10 s later.
func stopPids(names []string, pids []int, out io.Writer) {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, pid := range pids {
		for !exited(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if proc.Running(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
			fmt.Fprintf(out, "%s (pid %d) did not stop in time; killed\n", names[i], pid)
		}
	}
}

// exited says whether pid has exited with all its threads. The main
// thread of a Go process is a zombie (not proc.Running) while its other
// threads still exit, and until the last one has, the process's sockets
// are open: a target started again at once would find its port in use.
func exited(pid int) bool {
	if proc.Running(pid) {
		return false
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	return err != nil || len(tasks) <= 1
}

// Version is reported by `nacre up` for logs.
func Version() string { return version.Software }

// Replicas is the number of replicas of MDT0 in a running cluster (each
// MDT of a new cluster has as many).
func Replicas(c *Cluster) int {
	n := 0
	for _, t := range c.Targets {
		if strings.HasPrefix(t.Name, "MDT0000") {
			n++
		}
	}
	return n
}

// MDTs is the number of MDTs of a running cluster (not of replicas).
func (c *Cluster) MDTs() int {
	seen := map[string]bool{}
	for _, t := range c.Targets {
		if strings.HasPrefix(t.Name, "MDT") {
			name, _, _ := strings.Cut(t.Name, "-r")
			seen[name] = true
		}
	}
	return len(seen)
}

// NewReplica formats and starts one more replica of a group of a local
// cluster ("mdtN" or "mgs") with replica id rid, in D/GROUP-rRID: it joins
// the group, whose current members and addresses are peers, once the
// leader adds it (`nacre replica add`). It returns the directory, the new
// replica's Raft address and its pid.
func NewReplica(dir, group string, rid uint64, peers map[uint64]string, bin string) (string, string, int, error) {
	existing, _ := filepath.Glob(filepath.Join(dir, group+"-r*"))
	if len(existing) == 0 {
		return "", "", 0, fmt.Errorf("%s has no replicas of %s (replicated groups live in %s-rN directories)", dir, group, group)
	}
	sort.Strings(existing)
	tmpl, err := target.Load(existing[0])
	if err != nil {
		return "", "", 0, err
	}
	d := filepath.Join(dir, fmt.Sprintf("%s-r%d", group, rid))
	if _, err := os.Stat(d); err == nil {
		return "", "", 0, fmt.Errorf("%s exists already: replica ids are never reused; pick another id", d)
	}
	if slices.Contains(RemovedReplicaIDs(dir, group), rid) {
		return "", "", 0, fmt.Errorf("replica %d of %s was removed before (its directory is %s): replica ids are never reused; pick another id", rid, group, filepath.Join(dir, fmt.Sprintf("removed-%s-r%d-*", group, rid)))
	}
	var taken []string
	for _, a := range peers {
		taken = append(taken, a)
	}
	addr, err := ports.NewPicker(taken...).Pick("127.0.0.1")
	if err != nil {
		return "", "", 0, err
	}
	ps := map[uint64]string{}
	for id, a := range peers {
		if id != rid {
			ps[id] = a
		}
	}
	id := target.Identity{Fsname: tmpl.Fsname, Kind: tmpl.Kind, Index: tmpl.Index, MGSNode: tmpl.MGSNode, Listen: addr,
		ReplicaID: rid, Peers: ps, Created: tmpl.Created}
	if tmpl.Kind == target.MDT {
		id.DataListen = "127.0.0.1:0"
	}
	if err := formatTarget(dir, d, id); err != nil {
		return "", "", 0, err
	}
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return "", "", 0, err
		}
	}
	pid, err := startKept(bin, d)
	if err != nil {
		return "", "", 0, err
	}
	return d, addr, pid, nil
}

// SyncMGSNodes writes the MGS replicas present in the cluster in dir
// into the mgs_node of every other target there, after `nacre replica
// add|remove --dir --target mgs` changed them, and returns how many it
// changed. Otherwise, once the last replica the targets knew was gone,
// `nacre up` started targets that could reach no MGS.
func SyncMGSNodes(dir string) (int, error) {
	addr, err := MGSAddr(dir)
	if err != nil {
		return 0, err
	}
	dirs, err := Dirs(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range dirs {
		id, err := target.Load(d)
		if err != nil || id.Kind == target.MGS || id.MGSNode == addr {
			continue
		}
		id.MGSNode = addr
		if err := target.Save(d, id); err != nil {
			return n, fmt.Errorf("record the MGS replicas in %s: %w", d, err)
		}
		n++
	}
	return n, nil
}

// RemovedReplicaIDs lists the ids of the replicas of group that were
// removed from the cluster in dir (RetireReplica kept their directories as
// D/removed-NAME-rID-TIME).
func RemovedReplicaIDs(dir, group string) []uint64 {
	ms, _ := filepath.Glob(filepath.Join(dir, "removed-"+group+"-r*-*"))
	var ids []uint64
	for _, m := range ms {
		rest := strings.TrimPrefix(filepath.Base(m), "removed-"+group+"-r")
		if i := strings.IndexByte(rest, '-'); i > 0 {
			if id, err := strconv.ParseUint(rest[:i], 10, 64); err == nil {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

// RetireReplica stops the process of a replica that left its group and
// renames its directory to D/removed-NAME-TIME, so that `nacre up` does
// not start it again; its data stays for inspection. The cgroup of its
// CPU budget, if it had one, is removed.
func RetireReplica(dir, group string, rid uint64) (string, error) {
	d := filepath.Join(dir, fmt.Sprintf("%s-r%d", group, rid))
	if _, err := os.Stat(d); err != nil {
		return "", err
	}
	if pid, ok := proc.Serving(d); ok {
		syscall.Kill(pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for proc.Running(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if proc.Running(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	removeTargetCgroup(dir, filepath.Base(d))
	to := filepath.Join(dir, fmt.Sprintf("removed-%s-r%d-%s", group, rid, time.Now().UTC().Format("20060102T150405")))
	return to, os.Rename(d, to)
}
