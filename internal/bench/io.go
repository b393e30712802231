package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	mrand "math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/layout"
	"nacre/internal/obs"
	"nacre/internal/pki"
)

// IOOptions configure `nacre bench io`.
type IOOptions struct {
	MGS string
	// TLS are the client's credentials (nil: no TLS).
	TLS *pki.Creds
	// FollowerReads spreads the client's reads over every replica that is up.
	FollowerReads bool
	Path          string // run on a mounted file system instead of the client library
	Workers       int
	Size          uint64 // bytes per worker
	Block         uint64 // bytes per request
	Patterns      []string
	Modes         []string // "fpp" (file per worker), "shared"
	StripeCounts  []int
	StripeSizes   []uint64
	DropCaches    bool // drop the page cache before reads (root, path runs)
	Progress      io.Writer
	Timeline      *Timeline
}

// IORow is one measured phase.
type IORow struct {
	Pattern     string             `json:"pattern"`
	Mode        string             `json:"mode"`
	StripeCount int                `json:"stripe_count"`
	StripeSize  uint64             `json:"stripe_size"`
	Op          string             `json:"op"`
	Bytes       uint64             `json:"bytes"`
	Seconds     float64            `json:"seconds"`
	MiBPerSec   float64            `json:"mib_per_sec"`
	PerOST      map[string]float64 `json:"per_ost_mib_per_sec,omitempty"`
}

// IOResult is the outcome of RunIO.
type IOResult struct {
	Benchmark string    `json:"benchmark"`
	Target    string    `json:"target"`
	Workers   int       `json:"workers"`
	Size      uint64    `json:"bytes_per_worker"`
	Block     uint64    `json:"block"`
	Start     time.Time `json:"start"`
	Rows      []IORow   `json:"rows"`
}

type ioFile interface {
	WriteAt(ctx context.Context, p []byte, off uint64) error
	ReadAt(ctx context.Context, p []byte, off uint64) error
	// Close makes written data durable (fsync) and closes.
	Close(ctx context.Context) error
}

type ioBackend interface {
	Name() string
	Create(ctx context.Context, name string, count int, size uint64) (ioFile, error)
	Open(ctx context.Context, name string) (ioFile, error)
	Remove(ctx context.Context, name string) error
	Close() error
}

// --- client library ---

type clientIO struct {
	c       *client.Client
	dir     fid.FID
	dirName string
}

type clientFile struct{ f *client.File }

func (f clientFile) WriteAt(ctx context.Context, p []byte, off uint64) error {
	_, err := f.f.WriteAt(ctx, p, off)
	return err
}

func (f clientFile) ReadAt(ctx context.Context, p []byte, off uint64) error {
	_, err := f.f.ReadAt(ctx, p, off)
	if err == io.EOF {
		err = nil
	}
	return err
}

func (f clientFile) Close(ctx context.Context) error { return f.f.Close(ctx) }

func (b *clientIO) Name() string { return "nacre client library" }

func (b *clientIO) Create(ctx context.Context, name string, count int, size uint64) (ioFile, error) {
	var l *pb.Layout
	if count != 0 || size != 0 {
		l = &pb.Layout{StripeCount: int32(count), StripeSize: uint32(size), StripeOffset: -1}
	}
	ino, _, err := b.c.Create(ctx, b.dir, name, syscall.S_IFREG|0o644, client.CreateOpts{Exclusive: true, Layout: l})
	if err != nil {
		return nil, err
	}
	return clientFile{b.c.OpenInode(ino)}, nil
}

func (b *clientIO) Open(ctx context.Context, name string) (ioFile, error) {
	ino, err := b.c.Lookup(ctx, b.dir, name)
	if err != nil {
		return nil, err
	}
	st, err := b.c.Stat(ctx, fid.FromPB(ino.Fid))
	if err != nil {
		return nil, err
	}
	return clientFile{b.c.OpenInode(st)}, nil
}

func (b *clientIO) Remove(ctx context.Context, name string) error {
	_, err := b.c.Unlink(ctx, b.dir, name)
	return err
}

// Close removes the benchmark directory, then drops the connections.
func (b *clientIO) Close() error {
	b.c.Rmdir(context.Background(), fid.Root, b.dirName)
	return b.c.Close()
}

// --- mounted path ---

type pathIO struct{ dir string }

type osFile struct{ f *os.File }

func (f osFile) WriteAt(_ context.Context, p []byte, off uint64) error {
	_, err := f.f.WriteAt(p, int64(off))
	return err
}

func (f osFile) ReadAt(_ context.Context, p []byte, off uint64) error {
	_, err := f.f.ReadAt(p, int64(off))
	if err == io.EOF {
		err = nil
	}
	return err
}

func (f osFile) Close(context.Context) error {
	if err := f.f.Sync(); err != nil {
		f.f.Close()
		return err
	}
	return f.f.Close()
}

func (b *pathIO) Name() string { return "path " + b.dir }

func (b *pathIO) Create(_ context.Context, name string, _ int, _ uint64) (ioFile, error) {
	f, err := os.OpenFile(filepath.Join(b.dir, name), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644)
	return osFile{f}, err
}

func (b *pathIO) Open(_ context.Context, name string) (ioFile, error) {
	f, err := os.OpenFile(filepath.Join(b.dir, name), os.O_RDWR, 0)
	return osFile{f}, err
}

func (b *pathIO) Remove(_ context.Context, name string) error {
	return os.Remove(filepath.Join(b.dir, name))
}
func (b *pathIO) Close() error { return os.Remove(b.dir) }

// RunIO runs the I/O matrix.
func RunIO(ctx context.Context, o IOOptions) (*IOResult, error) {
	if o.Workers <= 0 || o.Size == 0 || o.Block == 0 {
		return nil, fmt.Errorf("--workers, --size and --block must be positive")
	}
	if o.Size%o.Block != 0 {
		return nil, fmt.Errorf("--size %d is not a multiple of --block %d", o.Size, o.Block)
	}
	if len(o.Patterns) == 0 {
		o.Patterns = []string{"seq"}
	}
	if len(o.Modes) == 0 {
		o.Modes = []string{"fpp"}
	}
	if len(o.StripeCounts) == 0 {
		o.StripeCounts = []int{0}
	}
	if len(o.StripeSizes) == 0 {
		o.StripeSizes = []uint64{0}
	}
	for _, p := range o.Patterns {
		if p != "seq" && p != "random" {
			return nil, fmt.Errorf("--pattern %q: use seq, random or seq,random", p)
		}
	}
	for _, m := range o.Modes {
		if m != "fpp" && m != "shared" {
			return nil, fmt.Errorf("--mode %q: use fpp (a file per worker), shared, or fpp,shared", m)
		}
	}
	var rb [4]byte
	rand.Read(rb[:])
	dirName := "nacre-bench-io-" + hex.EncodeToString(rb[:])
	var b ioBackend
	var ostURLs map[string]string
	if o.Path != "" {
		if err := checkPath(o.Path); err != nil {
			return nil, err
		}
		d := filepath.Join(o.Path, dirName)
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
		b = &pathIO{dir: d}
	} else {
		if o.MGS == "" {
			return nil, fmt.Errorf("no target: pass --mgs HOST:PORT (or set NACRE_MGS), or --path DIR")
		}
		c, err := client.New(ctx, client.Config{MGS: o.MGS, FollowerReads: o.FollowerReads, TLS: o.TLS})
		if err != nil {
			return nil, err
		}
		d, err := c.Mkdir(ctx, fid.Root, dirName, 0o755)
		if err != nil {
			c.Close()
			return nil, err
		}
		b = &clientIO{c: c, dir: fid.FromPB(d.Fid), dirName: dirName}
	}
	defer b.Close()
	if o.MGS != "" {
		if st, err := cli.GetStatus(ctx, o.MGS, o.TLS); err == nil {
			ostURLs = map[string]string{}
			for _, t := range st.Targets {
				if t.Kind == "ost" && t.MetricsURL != "" {
					ostURLs[fmt.Sprintf("OST%04x", t.Index)] = t.MetricsURL
				}
			}
		}
	}
	res := &IOResult{Benchmark: "io", Target: b.Name(), Workers: o.Workers, Size: o.Size, Block: o.Block, Start: time.Now()}
	if o.Timeline != nil {
		o.Timeline.Start(ctx)
		defer o.Timeline.Stop()
	}
	for _, sc := range o.StripeCounts {
		for _, ss := range o.StripeSizes {
			for _, mode := range o.Modes {
				for _, pat := range o.Patterns {
					for _, op := range []string{"write", "read"} {
						row, err := ioPhase(ctx, o, b, ostURLs, sc, ss, mode, pat, op)
						if err != nil {
							return res, err
						}
						res.Rows = append(res.Rows, row)
						if o.Progress != nil {
							fmt.Fprintf(o.Progress, "%-6s %-6s %-5s stripes %2d x %-5s %9.1f MiB/s\n", pat, mode, op, sc, layout.FormatSize(ss), row.MiBPerSec)
						}
					}
					// Remove this combination's files.
					for w := 0; w < o.Workers; w++ {
						b.Remove(ctx, ioName(mode, w))
						if mode == "shared" {
							break
						}
					}
				}
			}
		}
	}
	return res, nil
}

func ioName(mode string, w int) string {
	if mode == "shared" {
		return "shared"
	}
	return fmt.Sprintf("w%d", w)
}

func ostBytes(ctx context.Context, urls map[string]string, series string) map[string]float64 {
	out := map[string]float64{}
	for name, u := range urls {
		if s, err := obs.Fetch(ctx, u); err == nil {
			out[name] = s.Sum(series, nil)
		}
	}
	return out
}

func ioPhase(ctx context.Context, o IOOptions, b ioBackend, ostURLs map[string]string, sc int, ss uint64, mode, pat, op string) (IORow, error) {
	row := IORow{Pattern: pat, Mode: mode, StripeCount: sc, StripeSize: ss, Op: op, Bytes: o.Size * uint64(o.Workers)}
	if o.Timeline != nil {
		o.Timeline.SetPhase(fmt.Sprintf("%s %s %s c%d", pat, mode, op, sc))
	}
	files := make([]ioFile, o.Workers)
	var err error
	if op == "write" {
		if mode == "shared" {
			var f ioFile
			if f, err = b.Create(ctx, "shared", sc, ss); err != nil {
				return row, err
			}
			for w := range files {
				files[w] = f
			}
		} else {
			for w := range files {
				if files[w], err = b.Create(ctx, ioName(mode, w), sc, ss); err != nil {
					return row, err
				}
			}
		}
	} else {
		if o.DropCaches {
			syscall.Sync()
			os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0o200)
		}
		if mode == "shared" {
			var f ioFile
			if f, err = b.Open(ctx, "shared"); err != nil {
				return row, err
			}
			for w := range files {
				files[w] = f
			}
		} else {
			for w := range files {
				if files[w], err = b.Open(ctx, ioName(mode, w)); err != nil {
					return row, err
				}
			}
		}
	}
	series := "nacre_ost_write_bytes_total"
	if op == "read" {
		series = "nacre_ost_read_bytes_total"
	}
	before := ostBytes(ctx, ostURLs, series)
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	var done atomic.Uint64
	start := time.Now()
	for w := 0; w < o.Workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, o.Block)
			rand.Read(buf)
			n := o.Size / o.Block
			order := make([]uint64, n)
			for i := range order {
				order[i] = uint64(i)
			}
			if pat == "random" {
				r := mrand.New(mrand.NewSource(int64(w)))
				r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			}
			base := uint64(0)
			if mode == "shared" {
				base = uint64(w) * o.Size
			}
			for _, blk := range order {
				off := base + blk*o.Block
				var err error
				if op == "write" {
					err = files[w].WriteAt(ctx, buf, off)
				} else {
					err = files[w].ReadAt(ctx, buf, off)
				}
				if err != nil {
					once.Do(func() { firstErr = fmt.Errorf("%s %s at %d: %w", op, ioName(mode, w), off, err) })
					return
				}
				done.Add(o.Block)
				if o.Timeline != nil {
					o.Timeline.Add(int64(o.Block))
				}
			}
		}(w)
	}
	wg.Wait()
	// Data is durable before the clock stops (close = fsync), as IOR -e.
	closed := map[ioFile]bool{}
	for _, f := range files {
		if f == nil || closed[f] {
			continue
		}
		closed[f] = true
		if err := f.Close(ctx); err != nil && firstErr == nil && op == "write" {
			firstErr = err
		}
	}
	row.Seconds = time.Since(start).Seconds()
	if firstErr != nil {
		return row, firstErr
	}
	row.MiBPerSec = round1(float64(row.Bytes) / (1 << 20) / row.Seconds)
	after := ostBytes(ctx, ostURLs, series)
	if len(after) > 0 {
		row.PerOST = map[string]float64{}
		for name, v := range after {
			row.PerOST[name] = round1((v - before[name]) / (1 << 20) / row.Seconds)
		}
	}
	return row, nil
}

// PrintIO writes the matrix as a table.
func PrintIO(w io.Writer, r *IOResult) {
	fmt.Fprintf(w, "io benchmark: %d workers x %s in %s blocks, target %s\n", r.Workers, layout.FormatSize(r.Size), layout.FormatSize(r.Block), r.Target)
	t := newTable(w)
	t.AppendHeader(table.Row{"PATTERN", "MODE", "STRIPES", "STRIPE SIZE", "OP", "MiB/s", "SECONDS", "PER OST MiB/s"})
	for _, row := range r.Rows {
		var per []string
		names := make([]string, 0, len(row.PerOST))
		for n := range row.PerOST {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			per = append(per, fmt.Sprintf("%s %.0f", n, row.PerOST[n]))
		}
		sc, ss := "default", "default"
		if row.StripeCount != 0 {
			sc = fmt.Sprint(row.StripeCount)
		}
		if row.StripeSize != 0 {
			ss = layout.FormatSize(row.StripeSize)
		}
		t.AppendRow(table.Row{row.Pattern, row.Mode, sc, ss, row.Op, f1(row.MiBPerSec), fmt.Sprintf("%.2f", row.Seconds), strings.Join(per, ", ")})
	}
	t.SetColumnConfigs([]table.ColumnConfig{{Number: 6, Align: text.AlignRight}, {Number: 7, Align: text.AlignRight}})
	t.Render()
}
