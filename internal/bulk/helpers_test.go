package bulk

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"nacre/internal/fid"
	"nacre/internal/version"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memHandler is an in-memory object target: the twin of internal/ost for
// protocol tests and benchmarks.
type memHandler struct {
	mu     sync.Mutex
	objs   map[fid.ObjID]*memObj
	writes int // WRITE requests that reached the handler
	syncs  int
	// writeErr, if set, fails every write.
	writeErr error
	// maxSize, if set, bounds objects (EFBIG beyond), so that fuzzed
	// offsets cannot make the test allocate terabytes.
	maxSize uint64
}

type memObj struct {
	data    []byte
	meta    ObjMeta
	hasMeta bool
	mtime   int64
}

func newMem(objs ...fid.ObjID) *memHandler {
	h := &memHandler{objs: make(map[fid.ObjID]*memObj)}
	for _, o := range objs {
		h.objs[o] = &memObj{}
	}
	return h
}

func (h *memHandler) obj(o fid.ObjID) (*memObj, error) {
	m := h.objs[o]
	if m == nil {
		return nil, fmt.Errorf("object %s: %w", o, syscall.ENOENT)
	}
	return m, nil
}

func (h *memHandler) Read(o fid.ObjID, off uint64, p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, err := h.obj(o)
	if err != nil {
		return 0, err
	}
	if off >= uint64(len(m.data)) {
		return 0, nil
	}
	return copy(p, m.data[off:]), nil
}

func (h *memHandler) Write(o fid.ObjID, off uint64, data []byte, meta *ObjMeta) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writes++
	if h.writeErr != nil {
		return h.writeErr
	}
	m, err := h.obj(o)
	if err != nil {
		return err
	}
	if h.maxSize > 0 && (off > h.maxSize || uint64(len(data)) > h.maxSize-off) {
		return syscall.EFBIG
	}
	if end := off + uint64(len(data)); end > uint64(len(m.data)) {
		m.data = append(m.data, make([]byte, end-uint64(len(m.data)))...)
	}
	copy(m.data[off:], data)
	m.recordFirst(meta)
	m.mtime = time.Now().UnixNano()
	return nil
}

func (m *memObj) recordFirst(meta *ObjMeta) {
	if meta != nil && !m.hasMeta {
		m.meta, m.hasMeta = *meta, true
	}
}

func (h *memHandler) Punch(o fid.ObjID, off, length uint64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, err := h.obj(o)
	if err != nil {
		return err
	}
	for i := off; i < off+length && i < uint64(len(m.data)); i++ {
		m.data[i] = 0
	}
	return nil
}

func (h *memHandler) Truncate(o fid.ObjID, size uint64, meta *ObjMeta) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, err := h.obj(o)
	if err != nil {
		return err
	}
	if h.maxSize > 0 && size > h.maxSize {
		return syscall.EFBIG
	}
	if size <= uint64(len(m.data)) {
		m.data = m.data[:size]
	} else {
		m.data = append(m.data, make([]byte, size-uint64(len(m.data)))...)
	}
	m.recordFirst(meta)
	return nil
}

func (h *memHandler) GetAttr(o fid.ObjID) (ObjAttr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.objs[o]
	if m == nil {
		return ObjAttr{}, nil
	}
	return ObjAttr{Size: uint64(len(m.data)), Blocks: uint64(len(m.data)+511) / 512, MtimeNs: m.mtime, Exists: true}, nil
}

func (h *memHandler) Sync(o fid.ObjID) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, err := h.obj(o); err != nil {
		return err
	}
	h.syncs++
	return nil
}

func (h *memHandler) SetAttr(o fid.ObjID, meta *ObjMeta) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	m, err := h.obj(o)
	if err != nil {
		return err
	}
	if meta.Has(MetaPFID) {
		m.meta.Parent, m.meta.StripeIndex, m.meta.StripeSize = meta.Parent, meta.StripeIndex, meta.StripeSize
		m.meta.StripeCount, m.meta.LayoutGen = meta.StripeCount, meta.LayoutGen
	}
	if meta.Has(MetaOwner) {
		m.meta.UID, m.meta.GID = meta.UID, meta.GID
	}
	if meta.Has(MetaProjID) {
		m.meta.ProjID = meta.ProjID
	}
	m.hasMeta = true
	return nil
}

// gate wraps a handler so that reads block until released, counting the
// reads inside; tests use it to hold requests in flight.
type gate struct {
	Handler
	inside   atomic.Int32
	maxIn    atomic.Int32
	release  chan struct{}
	relOnce  sync.Once
	readsEnd sync.WaitGroup
}

func newGate(h Handler) *gate { return &gate{Handler: h, release: make(chan struct{})} }

func (g *gate) Read(o fid.ObjID, off uint64, p []byte) (int, error) {
	g.readsEnd.Add(1)
	defer g.readsEnd.Done()
	n := g.inside.Add(1)
	for {
		m := g.maxIn.Load()
		if n <= m || g.maxIn.CompareAndSwap(m, n) {
			break
		}
	}
	defer g.inside.Add(-1)
	<-g.release
	return g.Handler.Read(o, off, p)
}

func (g *gate) open() { g.relOnce.Do(func() { close(g.release) }) }

// listen returns a loopback listener closed at the end of the test.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// serve starts a server over h and a client to it, both stopped by the
// test's cleanup.
func serve(t testing.TB, h Handler, so ServerOptions, co ClientOptions) (*Server, *Client) {
	t.Helper()
	if so.Fsname == "" {
		so.Fsname = "testfs"
	}
	s := Serve(listen(t), h, so)
	c, err := Dial(s.Addr().String(), co)
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if err := s.Close(); err != nil {
			t.Errorf("server close: %v", err)
		}
	})
	return s, c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// rawConn speaks frames directly, for tests that must send what the
// client never would.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	rb [HeaderSize + MaxExt]byte
	wb [HeaderSize + MaxExt]byte
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc}
}

// frame encodes h with ext and payload, computing the CRCs.
func frame(h header, ext, payload []byte) []byte {
	b := make([]byte, HeaderSize+len(ext), HeaderSize+len(ext)+len(payload))
	copy(b[HeaderSize:], ext)
	h.payloadLen = uint32(len(payload))
	h.payloadCRC = payloadCRC(payload)
	h.put(b)
	return append(b, payload...)
}

func (r *rawConn) send(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// recv reads one reply frame.
func (r *rawConn) recv() (header, []byte, error) {
	h, _, err := readHeader(r.nc, r.rb[:])
	if err != nil {
		return h, nil, err
	}
	p := make([]byte, h.payloadLen)
	_, err = io.ReadFull(r.nc, p)
	return h, p, err
}

// hello performs the handshake on a raw connection.
func (r *rawConn) hello(fsname string) {
	r.t.Helper()
	r.send(frame(header{version: version.Protocol, op: OpHello, reqID: 1}, nil, []byte(fsname)))
	h, p, err := r.recv()
	if err != nil || h.status != 0 {
		r.t.Fatalf("raw hello: status %d %q %v", h.status, p, err)
	}
}

// counts returns the writes and syncs the handler has seen.
func (h *memHandler) counts() (writes, syncs int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writes, h.syncs
}

// metaOf returns the attributes recorded for o.
func (h *memHandler) metaOf(o fid.ObjID) ObjMeta {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.objs[o].meta
}

func (h *memHandler) setWriteErr(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.writeErr = err
}
