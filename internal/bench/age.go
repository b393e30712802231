package bench

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/layout"
)

//go:embed darshan/extract.py
var darshanExtract string

// AgeOptions configure `nacre bench age` (seed 000's aging method).
type AgeOptions struct {
	MGS string
	// FollowerReads spreads the client's reads over every replica that is up.
	FollowerReads bool
	// Dest is the directory to fill: a path in the Nacre file system
	// (client library), or with Local a directory of a mounted file system.
	Dest  string
	Local bool
	// Random makes Files files in random trees (depth 1–10, 1–100 files per
	// directory, sizes log-normal around MedianSize, capped at MaxSize).
	Random     bool
	Files      int
	MedianSize uint64
	// Darshan recreates the files of these logs.
	Darshan []string
	MaxSize uint64 // cap: larger files are reduced to it, metadata kept
	// StripeCount of the files (default -1: all OSTs, as seed 000).
	StripeCount int
	StripeSize  uint64
	Seed        int64
	// Workers make files concurrently (close fsyncs each file, so one
	// stream is bound by the OSTs' sync latency).
	Workers  int
	Progress io.Writer
	Timeline *Timeline
	// Python runs the Darshan reader (default python3).
	Python string
}

// AgeFile is one file of the plan.
type AgeFile struct {
	Dir  string `json:"dir"`
	Name string `json:"name"`
	Size uint64 `json:"size"`
}

// AgeResult is the outcome of RunAge.
type AgeResult struct {
	Benchmark  string            `json:"benchmark"`
	Mode       string            `json:"mode"`
	Dest       string            `json:"dest"`
	Files      int               `json:"files"`
	Dirs       int               `json:"dirs"`
	Bytes      uint64            `json:"bytes"`
	Skipped    int               `json:"resumed_skipped"`
	Capped     int               `json:"capped"`
	Seconds    float64           `json:"seconds"`
	FilesPerS  float64           `json:"files_per_sec"`
	SizeBucket map[string]int    `json:"size_histogram"`
	Sources    map[string]string `json:"sources,omitempty"`
}

// SizeBucket names the power-of-4 bucket of a size, for histograms.
func SizeBucket(s uint64) string {
	switch {
	case s == 0:
		return "0"
	case s < 4<<10:
		return "<4K"
	case s < 64<<10:
		return "4K-64K"
	case s < 1<<20:
		return "64K-1M"
	case s < 8<<20:
		return "1M-8M"
	}
	return ">=8M"
}

// PlanRandom builds seed 000's random trees: directories of random depth
// 1–10 each holding 1–100 files, until files are planned.
func PlanRandom(n int, median, cap uint64, seed int64) []AgeFile {
	r := rand.New(rand.NewSource(seed))
	var out []AgeFile
	for d := 0; len(out) < n; d++ {
		depth := 1 + r.Intn(10)
		parts := make([]string, depth)
		for i := range parts {
			parts[i] = fmt.Sprintf("d%d", r.Intn(8))
		}
		parts[0] = fmt.Sprintf("tree%05d", d)
		dir := strings.Join(parts, "/")
		files := 1 + r.Intn(100)
		for i := 0; i < files && len(out) < n; i++ {
			// Log-normal sizes: most files small, a long tail (sigma 2).
			s := float64(median) * math.Exp(r.NormFloat64()*2)
			size := uint64(s)
			if size > cap {
				size = cap
			}
			out = append(out, AgeFile{Dir: dir, Name: fmt.Sprintf("f%03d", i), Size: size})
		}
	}
	return out
}

// DarshanRecord is one file of a Darshan log.
type DarshanRecord struct {
	Log     string `json:"log"`
	ID      uint64 `json:"id"`
	Size    uint64 `json:"size"`
	Written uint64 `json:"written"`
}

// ReadDarshan extracts the files of Darshan logs with the PyPI package.
func ReadDarshan(ctx context.Context, python string, logs []string) ([]DarshanRecord, error) {
	if python == "" {
		python = "python3"
	}
	for _, l := range logs {
		if _, err := os.Stat(l); err != nil {
			return nil, fmt.Errorf("Darshan log %s: %w", l, err)
		}
	}
	script, err := os.CreateTemp("", "nacre-darshan-*.py")
	if err != nil {
		return nil, err
	}
	defer os.Remove(script.Name())
	script.WriteString(darshanExtract)
	script.Close()
	cmd := exec.CommandContext(ctx, python, append([]string{script.Name()}, logs...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("read Darshan logs with %s: %s", python, msg)
	}
	var recs []DarshanRecord
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		var r DarshanRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("Darshan reader output: %w", err)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// PlanDarshan turns Darshan records into files: Darshan logs are
// anonymized, so paths are random trees as in seed 000; each file keeps
// its size (reduced to the cap when larger).
func PlanDarshan(recs []DarshanRecord, cap uint64, seed int64) ([]AgeFile, int) {
	r := rand.New(rand.NewSource(seed))
	var out []AgeFile
	capped := 0
	i := 0
	for d := 0; i < len(recs); d++ {
		depth := 1 + r.Intn(10)
		parts := make([]string, depth)
		parts[0] = fmt.Sprintf("tree%05d", d)
		for k := 1; k < depth; k++ {
			parts[k] = fmt.Sprintf("d%d", r.Intn(8))
		}
		dir := strings.Join(parts, "/")
		n := 1 + r.Intn(100)
		for j := 0; j < n && i < len(recs); j, i = j+1, i+1 {
			size := recs[i].Size
			if size > cap {
				size = cap
				capped++
			}
			out = append(out, AgeFile{Dir: dir, Name: fmt.Sprintf("%016x", recs[i].ID), Size: size})
		}
	}
	return out, capped
}

// ageState is the resume journal kept in the destination.
type ageState struct {
	Plan string `json:"plan"` // what was asked, so a different run does not resume
	Done int    `json:"done"`
}

const ageStateFile = ".nacre-age-state.json"

// treeWriter makes directories and files in the destination.
type treeWriter interface {
	mkdirAll(ctx context.Context, dir string) error
	create(ctx context.Context, dir, name string, size uint64, buf []byte) (existed bool, err error)
	readState(ctx context.Context) (ageState, error)
	writeState(ctx context.Context, s ageState) error
	close()
}

// RunAge fills the destination and reports what it made.
func RunAge(ctx context.Context, o AgeOptions) (*AgeResult, error) {
	if o.Dest == "" {
		return nil, errors.New("--dest is required: the directory to age")
	}
	if o.MaxSize == 0 {
		o.MaxSize = 8 << 20
	}
	if o.MedianSize == 0 {
		o.MedianSize = 32 << 10
	}
	if o.StripeCount == 0 {
		o.StripeCount = -1
	}
	res := &AgeResult{Benchmark: "age", Dest: o.Dest, SizeBucket: map[string]int{}}
	var plan []AgeFile
	switch {
	case o.Random && len(o.Darshan) > 0:
		return nil, errors.New("use --random or --darshan, not both")
	case o.Random:
		if o.Files <= 0 {
			return nil, errors.New("--random needs --files N")
		}
		res.Mode = "random"
		plan = PlanRandom(o.Files, o.MedianSize, o.MaxSize, o.Seed)
	case len(o.Darshan) > 0:
		res.Mode = "darshan"
		recs, err := ReadDarshan(ctx, o.Python, o.Darshan)
		if err != nil {
			return nil, err
		}
		if len(recs) == 0 {
			return nil, fmt.Errorf("the Darshan logs %v record no files", o.Darshan)
		}
		plan, res.Capped = PlanDarshan(recs, o.MaxSize, o.Seed)
	default:
		return nil, errors.New("choose what to make: --random --files N, or --darshan LOG...")
	}
	planID := fmt.Sprintf("%s files=%d seed=%d median=%d cap=%d stripes=%d logs=%v", res.Mode, len(plan), o.Seed, o.MedianSize, o.MaxSize, o.StripeCount, o.Darshan)
	var w treeWriter
	var err error
	if o.Local {
		w, err = newLocalTree(o.Dest)
	} else {
		w, err = newClientTree(ctx, o)
	}
	if err != nil {
		return nil, err
	}
	defer w.close()
	st, _ := w.readState(ctx)
	start := 0
	if st.Plan == planID {
		start = st.Done
		res.Skipped = start
	}
	buf := make([]byte, o.MaxSize)
	for i := range buf {
		buf[i] = byte(i*131 + 7)
	}
	dirs := map[string]bool{}
	for _, f := range plan {
		dirs[f.Dir] = true
		res.SizeBucket[SizeBucket(f.Size)]++
		res.Bytes += f.Size
	}
	res.Files, res.Dirs = len(plan), len(dirs)
	if o.Workers <= 0 {
		o.Workers = 8
	}
	t0 := time.Now()
	if o.Timeline != nil {
		o.Timeline.SetPhase("age " + res.Mode)
		o.Timeline.Start(ctx)
		defer o.Timeline.Stop()
	}
	// Directories first (in plan order, parents before children), then
	// files by many workers. The journal records a low watermark: every
	// file below it is done, so a rerun redoes at most what was in flight.
	made := map[string]bool{}
	for _, f := range plan[start:] {
		if !made[f.Dir] {
			if err := w.mkdirAll(ctx, f.Dir); err != nil {
				return res, err
			}
			made[f.Dir] = true
		}
	}
	var next atomic.Int64
	next.Store(int64(start))
	doneFlags := make([]atomic.Bool, len(plan))
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	for k := 0; k < o.Workers; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(plan) {
					return
				}
				f := plan[i]
				if _, err := w.create(ctx, f.Dir, f.Name, f.Size, buf); err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("file %d of %d (%s/%s): %w", i+1, len(plan), f.Dir, f.Name, err) })
					return
				}
				doneFlags[i].Store(true)
				if o.Timeline != nil {
					o.Timeline.Add(1)
				}
			}
		}()
	}
	watermark := func() int {
		i := start
		for i < len(plan) && doneFlags[i].Load() {
			i++
		}
		return i
	}
	stop := make(chan struct{})
	var pw sync.WaitGroup
	pw.Add(1)
	go func() {
		defer pw.Done()
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
				wm := watermark()
				w.writeState(ctx, ageState{Plan: planID, Done: wm})
				if o.Progress != nil {
					progressLine(o.Progress, wm, len(plan), t0)
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	pw.Wait()
	if firstErr != nil || ctx.Err() != nil {
		wm := watermark()
		w.writeState(context.Background(), ageState{Plan: planID, Done: wm})
		if firstErr == nil {
			firstErr = fmt.Errorf("interrupted after %d of %d files; run the same command again to continue", wm, len(plan))
		}
		return res, firstErr
	}
	w.writeState(ctx, ageState{Plan: planID, Done: len(plan)})
	res.Seconds = time.Since(t0).Seconds()
	res.FilesPerS = round1(float64(len(plan)-start) / res.Seconds)
	if o.Progress != nil {
		progressLine(o.Progress, len(plan), len(plan), t0)
		if cli.IsTerminal(o.Progress) {
			fmt.Fprintln(o.Progress)
		}
	}
	return res, nil
}

// progressLine draws a one-line progress bar (redrawn in place).
func progressLine(w io.Writer, done, total int, start time.Time) {
	const width = 30
	frac := float64(done) / float64(max(total, 1))
	bar := strings.Repeat("█", int(frac*width)) + strings.Repeat("░", width-int(frac*width))
	rate := float64(done) / time.Since(start).Seconds()
	eta := "-"
	if rate > 0 {
		eta = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
	}
	if cli.IsTerminal(w) {
		fmt.Fprintf(w, "\r%s %5.1f%%  %d/%d files  %.0f files/s  eta %s   ", bar, frac*100, done, total, rate, eta)
		return
	}
	// Logs and CI: one plain line per update, no redrawing.
	fmt.Fprintf(w, "%5.1f%%  %d/%d files  %.0f files/s  eta %s\n", frac*100, done, total, rate, eta)
}

// --- destination in Nacre through the client library ---

type clientTree struct {
	c      *client.Client
	root   fid.FID
	dirs   map[string]fid.FID
	layout *pb.Layout
}

func newClientTree(ctx context.Context, o AgeOptions) (*clientTree, error) {
	if o.MGS == "" {
		return nil, errors.New("no cluster: pass --mgs HOST:PORT (or set NACRE_MGS), or --local to age a mounted directory")
	}
	c, err := client.New(ctx, client.Config{MGS: o.MGS, FollowerReads: o.FollowerReads})
	if err != nil {
		return nil, err
	}
	t := &clientTree{c: c, dirs: map[string]fid.FID{}, layout: &pb.Layout{StripeCount: int32(o.StripeCount), StripeSize: uint32(o.StripeSize), StripeOffset: -1}}
	root, err := t.mkdirPath(ctx, fid.Root, o.Dest)
	if err != nil {
		c.Close()
		return nil, err
	}
	t.root = root
	return t, nil
}

func (t *clientTree) mkdirPath(ctx context.Context, at fid.FID, p string) (fid.FID, error) {
	cur := at
	for _, part := range strings.Split(strings.Trim(p, "/"), "/") {
		if part == "" {
			continue
		}
		ino, err := t.c.Lookup(ctx, cur, part)
		if errors.Is(err, syscall.ENOENT) {
			ino, err = t.c.Mkdir(ctx, cur, part, 0o755)
			if errors.Is(err, syscall.EEXIST) {
				ino, err = t.c.Lookup(ctx, cur, part)
			}
		}
		if err != nil {
			return fid.FID{}, err
		}
		cur = fid.FromPB(ino.Fid)
	}
	return cur, nil
}

func (t *clientTree) mkdirAll(ctx context.Context, dir string) error {
	if _, ok := t.dirs[dir]; ok {
		return nil
	}
	parent, at := path.Dir(dir), t.root
	if parent != "." {
		if err := t.mkdirAll(ctx, parent); err != nil {
			return err
		}
		at = t.dirs[parent]
	}
	f, err := t.mkdirPath(ctx, at, path.Base(dir))
	if err != nil {
		return err
	}
	t.dirs[dir] = f
	return nil
}

func (t *clientTree) create(ctx context.Context, dir, name string, size uint64, buf []byte) (bool, error) {
	ino, existed, err := t.c.Create(ctx, t.dirs[dir], name, syscall.S_IFREG|0o644, client.CreateOpts{Layout: t.layout})
	if err != nil {
		return false, err
	}
	if existed && ino.Size == size {
		return true, nil
	}
	if size == 0 {
		return existed, nil
	}
	f := t.c.OpenInode(ino)
	if _, err := f.WriteAt(ctx, buf[:size], 0); err != nil {
		return existed, err
	}
	return existed, f.Close(ctx)
}

func (t *clientTree) readState(ctx context.Context) (ageState, error) {
	var s ageState
	ino, err := t.c.Lookup(ctx, t.root, ageStateFile)
	if err != nil {
		return s, err
	}
	buf := make([]byte, 4096)
	n, _ := t.c.OpenInode(ino).ReadAt(ctx, buf, 0)
	return s, json.Unmarshal(buf[:n], &s)
}

func (t *clientTree) writeState(ctx context.Context, s ageState) error {
	data, _ := json.Marshal(s)
	ino, _, err := t.c.Create(ctx, t.root, ageStateFile, syscall.S_IFREG|0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: 1, StripeOffset: -1}})
	if err != nil {
		return err
	}
	f := t.c.OpenInode(ino)
	if err := f.Truncate(ctx, 0); err != nil {
		return err
	}
	if _, err := f.WriteAt(ctx, data, 0); err != nil {
		return err
	}
	return f.Close(ctx)
}

func (t *clientTree) close() { t.c.Close() }

// --- destination on a mounted file system ---

type localTree struct{ root string }

func newLocalTree(dest string) (*localTree, error) {
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return nil, err
	}
	return &localTree{root: dest}, nil
}

func (t *localTree) mkdirAll(_ context.Context, dir string) error {
	return os.MkdirAll(filepath.Join(t.root, dir), 0o755)
}

func (t *localTree) create(_ context.Context, dir, name string, size uint64, buf []byte) (bool, error) {
	p := filepath.Join(t.root, dir, name)
	if st, err := os.Stat(p); err == nil && uint64(st.Size()) == size {
		return true, nil
	}
	return false, os.WriteFile(p, buf[:size], 0o644)
}

func (t *localTree) readState(context.Context) (ageState, error) {
	var s ageState
	b, err := os.ReadFile(filepath.Join(t.root, ageStateFile))
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

func (t *localTree) writeState(_ context.Context, s ageState) error {
	b, _ := json.Marshal(s)
	tmp := filepath.Join(t.root, ageStateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(t.root, ageStateFile))
}

func (t *localTree) close() {}

// PrintAge writes the result for people.
func PrintAge(w io.Writer, r *AgeResult) {
	fmt.Fprintf(w, "aged %s (%s): %d files in %d directories, %s, %.1f s, %.0f files/s", r.Dest, r.Mode, r.Files, r.Dirs, layout.FormatSize(r.Bytes), r.Seconds, r.FilesPerS)
	if r.Skipped > 0 {
		fmt.Fprintf(w, " (resumed: %d were already made)", r.Skipped)
	}
	if r.Capped > 0 {
		fmt.Fprintf(w, "; %d files larger than the cap were reduced", r.Capped)
	}
	fmt.Fprintln(w)
	keys := make([]string, 0, len(r.SizeBucket))
	for k := range r.SizeBucket {
		keys = append(keys, k)
	}
	order := []string{"0", "<4K", "4K-64K", "64K-1M", "1M-8M", ">=8M"}
	sort.Slice(keys, func(i, j int) bool { return indexOf(order, keys[i]) < indexOf(order, keys[j]) })
	for _, k := range keys {
		fmt.Fprintf(w, "  %-8s %8d files\n", k, r.SizeBucket[k])
	}
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return len(list)
}
