package itest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/obs"
	"nacre/internal/target/proc"
	"nacre/internal/version"
	"nacre/test/testcluster"
)

// TestPortsSurviveBadInput opens 200 connections to every port of every
// target (gRPC, the MDT's metadata RPC, the OSTs' bulk data) and sends
// what a confused or hostile peer would: random bytes, a length of
// 0xffffffff, frames that stop halfway, a TLS ClientHello. The servers
// stay up, their memory stays bounded and does not grow from one round
// to the next, and a client working meanwhile sees no error.
func TestPortsSurviveBadInput(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{})
	c := cl.Client(t)
	out, err := cl.Run("status", "--json")
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	var st cli.ClusterStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, out)
	}
	var ports []port
	pids := map[string]int{}
	metrics := map[string]string{}
	for _, ts := range st.Targets {
		if ts.State != "up" || ts.Pid == 0 || ts.MetricsURL == "" {
			t.Fatalf("target %s: state %s, pid %d, metrics %q", ts.Name, ts.State, ts.Pid, ts.MetricsURL)
		}
		pids[ts.Name] = int(ts.Pid)
		metrics[ts.Name] = ts.MetricsURL
		ports = append(ports, port{ts.Name + " gRPC", ts.Addr, wireGRPC})
		switch {
		case ts.DataAddr != "" && ts.Kind == "mdt":
			ports = append(ports, port{ts.Name + " metadata RPC", ts.DataAddr, wireMDRPC})
		case ts.DataAddr != "" && ts.Kind == "ost":
			ports = append(ports, port{ts.Name + " bulk data", ts.DataAddr, wireBulk})
		}
	}
	if len(ports) != 7 {
		t.Fatalf("%d ports in status, want 7 (MGS, MDT and 2 OSTs, data ports of MDT and OSTs): %+v", len(ports), ports)
	}
	hello := clientHello(t)

	// A client creating, writing and reading files all along.
	ctx, stopWork := context.WithCancel(context.Background())
	workErr := make(chan error, 1)
	var ops int
	go func() { workErr <- work(ctx, c, &ops) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopWork()
		return <-workErr
	}
	defer stop()

	// Memory is sampled two ways: the resident set (VmRSS), which is what
	// the machine pays, and the Go heap the process allocated
	// (go_memstats_heap_alloc_bytes on its metrics page), which also
	// counts buffers reserved but not yet touched: a frame's header that
	// reserved its claim shows there before its pages are resident.
	rss := newSampler(t, pids, metrics)
	defer rss.stop()
	// The baseline is the highest memory while the client alone works:
	// a collector that lets garbage grow to 5 times the live heap (GOGC
	// 400) needs a few cycles to reach its usual peak.
	time.Sleep(4 * time.Second)
	base, baseHeap := rss.peakAndReset()

	var peaks, heaps []map[string]int64
	for round := range 2 {
		conns := attack(t, ports, 200, hello)
		time.Sleep(5 * time.Second) // the servers hold what they were sent
		for _, nc := range conns {
			nc.Close()
		}
		time.Sleep(time.Second)
		p, h := rss.peakAndReset()
		peaks, heaps = append(peaks, p), append(heaps, h)
		t.Logf("round %d: %d connections; peak RSS by target (MiB): %s (baseline %s); peak Go heap: %s (baseline %s)",
			round+1, len(conns), mib(p), mib(base), mib(h), mib(baseHeap))
	}
	if err := stop(); err != nil {
		t.Fatalf("the client working during the attack: %v", err)
	}
	if ops == 0 {
		t.Fatal("the client did no work during the attack")
	}
	const bound = 100 << 20
	for name, pid := range pids {
		if !proc.Running(pid) {
			t.Fatalf("%s (pid %d) is gone", name, pid)
		}
		for r, p := range peaks {
			if p[name] > base[name]+bound {
				t.Errorf("%s: peak RSS %d MiB in round %d, baseline %d MiB: over the %d MiB allowed", name, p[name]>>20, r+1, base[name]>>20, bound>>20)
			}
			if h := heaps[r][name]; h > baseHeap[name]+bound {
				t.Errorf("%s: peak Go heap %d MiB in round %d, baseline %d MiB: over the %d MiB allowed", name, h>>20, r+1, baseHeap[name]>>20, bound>>20)
			}
		}
		if grew := peaks[1][name] - peaks[0][name]; grew > 48<<20 {
			t.Errorf("%s: peak RSS grew by %d MiB from the first round to the second: memory is not given back", name, grew>>20)
		}
	}
	// Everything still answers.
	if out, err := cl.Run("status", "--json"); err != nil {
		t.Fatalf("status after the attack: %v\n%s", err, out)
	} else {
		var after cli.ClusterStatus
		json.Unmarshal([]byte(out), &after)
		for _, ts := range after.Targets {
			if ts.State != "up" || int(ts.Pid) != pids[ts.Name] {
				t.Errorf("after the attack %s is %s with pid %d (was %d)", ts.Name, ts.State, ts.Pid, pids[ts.Name])
			}
		}
	}
	t.Logf("client operations during the attack: %d", ops)
	checkPrivate(t, cl)
}

type wireProto int

const (
	wireGRPC wireProto = iota
	wireMDRPC
	wireBulk
)

type port struct {
	name string
	addr string
	wire wireProto
}

// attack opens n connections to each port and sends each one kind of bad
// input, cycling through the kinds; it returns them open.
func attack(t *testing.T, ports []port, n int, hello []byte) []net.Conn {
	t.Helper()
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for _, p := range ports {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(len(p.addr)), 7))
			for i := range n {
				nc, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
				if err != nil {
					t.Errorf("%s: connection %d: %v", p.name, i, err)
					return
				}
				mu.Lock()
				conns = append(conns, nc)
				mu.Unlock()
				nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
				// Errors are expected: the server may close first.
				nc.Write(badInput(p.wire, i%4, r, hello))
			}
		})
	}
	wg.Wait()
	return conns
}

// badInput is one kind of bad input for a port of protocol p.
func badInput(p wireProto, kind int, r *rand.Rand, hello []byte) []byte {
	switch kind {
	case 0: // random bytes
		b := make([]byte, 4096)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return b
	case 1: // a length prefix of 0xffffffff
		switch p {
		case wireMDRPC:
			return mdrpcHeader(0xffffffff)
		case wireBulk:
			return bulkHeader(0xffffffff)
		}
		return append([]byte{0xff, 0xff, 0xff, 0xff}, bytes.Repeat([]byte{0}, 60)...)
	case 2: // a frame that stops halfway: its header claims the most it may
		switch p {
		case wireMDRPC:
			return append(mdrpcHeader(16<<20), make([]byte, 1000)...)
		case wireBulk:
			return append(bulkHeader(4<<20), make([]byte, 1000)...)
		}
		// HTTP/2: the preface, then a SETTINGS frame of 16 KiB that
		// never comes.
		return append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0x00, 0x40, 0x00, 0x04, 0x00, 0, 0, 0, 0, 0, 0x03)
	}
	return hello // TLS where plain TCP is spoken
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// mdrpcHeader is a metadata RPC hello header (internal/mdrpc, doc.go)
// that claims n payload bytes.
func mdrpcHeader(n uint32) []byte {
	b := make([]byte, 24)
	copy(b, "NCRM")
	binary.LittleEndian.PutUint16(b[4:], uint16(version.Protocol))
	binary.LittleEndian.PutUint64(b[8:], 1)
	binary.LittleEndian.PutUint32(b[16:], n)
	return b
}

// bulkHeader is a valid bulk WRITE header (internal/bulk, doc.go) that
// claims n payload bytes.
func bulkHeader(n uint32) []byte {
	b := make([]byte, 64)
	copy(b, "NCRW")
	binary.LittleEndian.PutUint16(b[4:], uint16(version.Protocol))
	b[6] = 3 // WRITE
	binary.LittleEndian.PutUint64(b[8:], 1)
	binary.LittleEndian.PutUint64(b[40:], uint64(n))
	binary.LittleEndian.PutUint32(b[52:], n)
	binary.LittleEndian.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	return b
}

// clientHello is the first flight of a TLS client.
func clientHello(t *testing.T) []byte {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go tls.Client(a, &tls.Config{ServerName: "nacre", InsecureSkipVerify: true}).Handshake()
	b.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf)
	if err != nil || n < 5 || buf[0] != 0x16 {
		t.Fatalf("TLS ClientHello: %d bytes, %v", n, err)
	}
	return buf[:n]
}

// work creates, writes, reads back and checks files until ctx ends; the
// first error ends it.
func work(ctx context.Context, c *client.Client, ops *int) error {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; ; i++ {
		if ctx.Err() != nil {
			return nil
		}
		name := fmt.Sprintf("p%05d", i)
		ino, _, err := c.Create(ctx, fid.Root, name, 0o644, client.CreateOpts{Exclusive: true, Layout: &pb.Layout{StripeCount: -1, StripeSize: 65536}})
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		data := make([]byte, 1+r.IntN(200<<10))
		for j := range data {
			data[j] = byte(r.UintN(256))
		}
		f := c.OpenInode(ino)
		if _, err := f.WriteAt(ctx, data, 0); err != nil && ctx.Err() == nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		if err := f.Close(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("close %s: %w", name, err)
		}
		if ctx.Err() != nil {
			return nil
		}
		g, err := c.Open(ctx, fid.FromPB(ino.Fid), os.O_RDONLY)
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("open %s: %w", name, err)
		}
		if ctx.Err() != nil {
			return nil
		}
		got := make([]byte, len(data))
		n, err := g.ReadAt(ctx, got, 0)
		g.Close(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if (err != nil && err != io.EOF) || n != len(data) || !bytes.Equal(got, data) {
			return fmt.Errorf("read %s back: %d of %d bytes, equal %v, %v", name, n, len(data), bytes.Equal(got[:n], data[:n]), err)
		}
		*ops++
	}
}

// sampler records the highest VmRSS of each process every 200 ms, and
// the highest Go heap its metrics page shows.
type sampler struct {
	mu   sync.Mutex
	peak map[string]int64
	heap map[string]int64
	done chan struct{}
	wg   sync.WaitGroup
}

func newSampler(t *testing.T, pids map[string]int, metrics map[string]string) *sampler {
	s := &sampler{peak: map[string]int64{}, heap: map[string]int64{}, done: make(chan struct{})}
	// The maps are chosen under the lock: peakAndReset replaces them.
	record := func(heap bool, name string, v int64) {
		s.mu.Lock()
		m := s.peak
		if heap {
			m = s.heap
		}
		m[name] = max(m[name], v)
		s.mu.Unlock()
	}
	s.wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			for name, pid := range pids {
				if v, err := vmRSS(pid); err == nil {
					record(false, name, v)
				}
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	})
	for name, url := range metrics {
		s.wg.Go(func() {
			for {
				sc, err := obs.FetchMatching(context.Background(), url, func(n string) bool { return n == "go_memstats_heap_alloc_bytes" })
				if err == nil {
					record(true, name, int64(sc.Sum("go_memstats_heap_alloc_bytes", nil)))
				}
				select {
				case <-s.done:
					return
				case <-time.After(300 * time.Millisecond):
				}
			}
		})
	}
	return s
}

// peakAndReset returns the peaks of RSS and Go heap since the last call.
func (s *sampler) peakAndReset() (rss, heap map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rss, heap = s.peak, s.heap
	s.peak, s.heap = map[string]int64{}, map[string]int64{}
	return rss, heap
}

func (s *sampler) stop() {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
}

// vmRSS is a process's resident memory in bytes (/proc/PID/status).
func vmRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func mib(m map[string]int64) string {
	var parts []string
	for name, v := range m {
		parts = append(parts, fmt.Sprintf("%s %d", name, v>>20))
	}
	return strings.Join(parts, ", ")
}

// checkPrivate: the data the client wrote is its servers' user's alone:
// the data directories 0700, the object files 0600 (no other user of the
// machine reads file data under an OST's directory).
func checkPrivate(t *testing.T, cl *testcluster.Cluster) {
	t.Helper()
	files := 0
	for _, name := range []string{"ost0", "ost1"} {
		objects := filepath.Join(cl.TargetDir(name), "objects")
		filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return nil // removed meanwhile
			}
			want := os.FileMode(0o600)
			if d.IsDir() {
				want = 0o700
			}
			if fi.Mode().Perm() != want {
				t.Errorf("%s: mode %#o, want %#o", p, fi.Mode().Perm(), want)
				return filepath.SkipAll
			}
			if !d.IsDir() {
				files++
			}
			return nil
		})
		for _, d := range []string{"store", "objects"} {
			if fi, err := os.Stat(filepath.Join(cl.TargetDir(name), d)); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s/%s: %v %v, want a 0700 directory", name, d, fi.Mode(), err)
			}
		}
	}
	if files == 0 {
		t.Error("no object files under the OSTs' directories")
	}
}
