package bulk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/version"
	"nacre/test/wait"
)

var (
	objA = fid.ObjID{Seq: 0x100000000, Oid: 0x2a}
	objB = fid.ObjID{Seq: 0x100000000, Oid: 0x2b}
	pfid = fid.FID{Seq: 0x200000400, Oid: 7, Ver: 0}
)

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func TestEveryOpRoundTrips(t *testing.T) {
	h := newMem(objA)
	_, c := serve(t, h, ServerOptions{Index: 1}, ClientOptions{})
	ctx := ctxT(t)

	info, err := c.Hello(ctx)
	if err != nil || info.Fsname != "testfs" || info.Index != 1 {
		t.Fatalf("hello: %+v %v", info, err)
	}
	meta := &ObjMeta{Parent: pfid, StripeIndex: 2, StripeSize: 1 << 20, StripeCount: 4, LayoutGen: 3, UID: 500, GID: 501, ProjID: 9}
	data := pattern(10000, 1)
	if err := c.Write(ctx, objA, 4096, data, meta); err != nil {
		t.Fatal(err)
	}
	if got := h.metaOf(objA); got != *meta {
		t.Fatalf("meta recorded %+v, want %+v", got, *meta)
	}

	// A read across the hole at the start and past the end: zeros, the
	// data, then a short count at the object's end.
	p := make([]byte, 20000)
	n, err := c.Read(ctx, objA, 0, p)
	if err != nil || n != 4096+len(data) {
		t.Fatalf("read: n=%d err=%v, want %d", n, err, 4096+len(data))
	}
	if !bytes.Equal(p[:4096], make([]byte, 4096)) || !bytes.Equal(p[4096:n], data) {
		t.Fatal("read returned wrong bytes")
	}
	if n, err := c.Read(ctx, objA, 1<<30, p); n != 0 || err != nil {
		t.Fatalf("read past the end: %d %v", n, err)
	}

	if _, err := c.Punch(ctx, objA, 5000, 100); err != nil {
		t.Fatal(err)
	}
	c.Read(ctx, objA, 5000, p[:100])
	if !bytes.Equal(p[:100], make([]byte, 100)) {
		t.Fatal("punched range is not zero")
	}

	for _, size := range []uint64{6000, 50000} {
		if _, err := c.Truncate(ctx, objA, size, nil); err != nil {
			t.Fatal(err)
		}
		a, err := c.GetAttr(ctx, objA)
		if err != nil || !a.Exists || a.Size != size || a.MtimeNs == 0 {
			t.Fatalf("getattr after truncate to %d: %+v %v", size, a, err)
		}
	}
	if a, err := c.GetAttr(ctx, objB); err != nil || a.Exists {
		t.Fatalf("getattr of a missing object: %+v %v", a, err)
	}

	if err := c.Sync(ctx, objA); err != nil {
		t.Fatal(err)
	}
	if _, syncs := h.counts(); syncs != 1 {
		t.Fatalf("handler saw %d syncs, want 1", syncs)
	}
	if err := c.SetAttr(ctx, objA, &ObjMeta{UID: 42, GID: 43, Valid: MetaOwner}); err != nil {
		t.Fatal(err)
	}
	if m := h.metaOf(objA); m.UID != 42 || m.GID != 43 || m.Parent != pfid {
		t.Fatalf("setattr owner: %+v", m)
	}
}

func TestLargeRequestsAreSplitIntoFrames(t *testing.T) {
	h := newMem(objA)
	_, c := serve(t, h, ServerOptions{}, ClientOptions{})
	ctx := ctxT(t)
	data := pattern(2*MaxPayload+12345, 3)
	if err := c.Write(ctx, objA, 100, data, nil); err != nil {
		t.Fatal(err)
	}
	if w, _ := h.counts(); w != 3 {
		t.Fatalf("%d write frames for %d bytes, want 3", w, len(data))
	}
	p := make([]byte, len(data)+MaxPayload)
	n, err := c.Read(ctx, objA, 100, p)
	if err != nil || n != len(data) || !bytes.Equal(p[:n], data) {
		t.Fatalf("read back: n=%d err=%v", n, err)
	}
}

func TestServerErrnoNamesOpTargetAndObject(t *testing.T) {
	h := newMem(objA)
	h.writeErr = fmt.Errorf("write /srv/ost1/objects/...: %w", syscall.ENOSPC)
	_, c := serve(t, h, ServerOptions{Index: 1}, ClientOptions{})
	ctx := ctxT(t)
	err := c.Write(ctx, objA, 1048576, []byte("x"), nil)
	var e *errno.Errno
	if !errors.As(err, &e) || e.Errno != syscall.ENOSPC || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("want *errno.Errno ENOSPC, got %T %v", err, err)
	}
	if want := "write OST0001 object 0x100000000:0x2a at 1048576: no space left on device"; err.Error() != want {
		t.Fatalf("message\n got %q\nwant %q", err, want)
	}
	// A missing object is ENOENT, and the connection stays usable.
	h.setWriteErr(nil)
	if err := c.Write(ctx, objB, 0, []byte("x"), nil); !errors.Is(err, syscall.ENOENT) {
		t.Fatalf("write to a missing object: %v", err)
	}
	if err := c.Write(ctx, objA, 0, []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptRequestPayloadIsRefusedWithEIO(t *testing.T) {
	h := newMem(objA)
	s, c := serve(t, h, ServerOptions{}, ClientOptions{})
	ctx := ctxT(t)
	c.corruptCRC.Store(1)
	err := c.Write(ctx, objA, 0, pattern(4096, 5), nil)
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "CRC32C") {
		t.Fatalf("want EIO naming the CRC, got %v", err)
	}
	if st := s.Stats(); st.CRCErrors != 1 {
		t.Fatalf("server counted %d CRC errors, want 1", st.CRCErrors)
	}
	if w, _ := h.counts(); w != 0 {
		t.Fatal("corrupt payload reached the handler")
	}
	// The stream stayed in sync: the same connection carries on.
	if err := c.Write(ctx, objA, 0, pattern(4096, 5), nil); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Accepted != 1 {
		t.Fatalf("%d connections, want 1", st.Accepted)
	}
}

func TestCorruptReadReplyIsRetriedOnceThenFails(t *testing.T) {
	h := newMem(objA)
	s, c := serve(t, h, ServerOptions{Index: 1}, ClientOptions{})
	ctx := ctxT(t)
	data := pattern(8192, 9)
	if err := c.Write(ctx, objA, 0, data, nil); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4096)

	s.corruptCRC.Store(1)
	n, err := c.Read(ctx, objA, 4096, p)
	if err != nil || n != 4096 || !bytes.Equal(p, data[4096:]) {
		t.Fatalf("one corrupt reply should be retried: n=%d err=%v", n, err)
	}

	s.corruptCRC.Store(2)
	_, err = c.Read(ctx, objA, 4096, p)
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "read OST0001 object 0x100000000:0x2a at 4096") {
		t.Fatalf("two corrupt replies: want EIO naming object and offset, got %v", err)
	}
	if s.corruptCRC.Load() != 0 {
		t.Fatal("client did not read twice")
	}
}

func TestCorruptHeaderDropsTheConnection(t *testing.T) {
	s, _ := serve(t, newMem(objA), ServerOptions{}, ClientOptions{})
	r := dialRaw(t, s.Addr().String())
	r.hello("")
	f := frame(header{version: version.Protocol, op: OpGetAttr, reqID: 2, obj: objA}, nil, nil)
	f[33] ^= 0x40 // a bit of the offset: the header CRC no longer matches
	r.send(f)
	if _, _, err := r.recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("want the server to close the connection, got %v", err)
	}
	wait.For(t, 10*time.Second, "protocol error count", func() bool { return s.Stats().ProtocolErrors == 1 })
}

func TestOversizedFrameIsRefusedWithALimit(t *testing.T) {
	s, _ := serve(t, newMem(objA), ServerOptions{}, ClientOptions{})
	r := dialRaw(t, s.Addr().String())
	r.hello("")
	b := make([]byte, HeaderSize)
	h := header{version: version.Protocol, op: OpWrite, reqID: 3, obj: objA, length: MaxPayload + 1, payloadLen: MaxPayload + 1}
	h.put(b)
	r.send(b)
	rh, msg, err := r.recv()
	if err != nil || rh.status != uint16(syscall.EMSGSIZE) || !strings.Contains(string(msg), "limit") || rh.reqID != 3 {
		t.Fatalf("want EMSGSIZE naming the limit, got status %d %q %v", rh.status, msg, err)
	}
	if _, _, err := r.recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("connection should be closed after an oversized frame: %v", err)
	}
}

func TestFirstFrameMustBeHello(t *testing.T) {
	s, _ := serve(t, newMem(objA), ServerOptions{}, ClientOptions{})
	r := dialRaw(t, s.Addr().String())
	r.send(frame(header{version: version.Protocol, op: OpGetAttr, reqID: 1, obj: objA}, nil, nil))
	rh, msg, err := r.recv()
	if err != nil || rh.status != uint16(syscall.EPROTO) || !strings.Contains(string(msg), "HELLO") {
		t.Fatalf("want EPROTO asking for HELLO, got %d %q %v", rh.status, msg, err)
	}
}

func TestVersionMismatchIsRefusedNamingBothVersions(t *testing.T) {
	ctx := ctxT(t)
	t.Run("client newer", func(t *testing.T) {
		s, c := serve(t, newMem(), ServerOptions{}, ClientOptions{protocol: 7})
		_, err := c.Hello(ctx)
		if !errors.Is(err, syscall.EPROTO) || !strings.Contains(err.Error(), "client speaks Nacre protocol 7") ||
			!strings.Contains(err.Error(), fmt.Sprintf("server speaks protocol %d", version.Protocol)) {
			t.Fatalf("want EPROTO naming both versions, got %v", err)
		}
		if s.Stats().ProtocolErrors != 1 {
			t.Fatal("server did not count the refusal")
		}
	})
	t.Run("server newer", func(t *testing.T) {
		_, c := serve(t, newMem(objA), ServerOptions{protocol: 9}, ClientOptions{})
		_, err := c.GetAttr(ctx, objA)
		if !errors.Is(err, syscall.EPROTO) || !strings.Contains(err.Error(), "protocol 9") ||
			!strings.Contains(err.Error(), fmt.Sprintf("protocol %d", version.Protocol)) {
			t.Fatalf("want EPROTO naming both versions, got %v", err)
		}
	})
	t.Run("server answers with another version", func(t *testing.T) {
		// A server that does not check versions: the client must refuse it.
		ln := listen(t)
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
			var buf [HeaderSize + MaxExt]byte
			h, _, err := readHeader(nc, buf[:])
			if err != nil {
				return
			}
			io.CopyN(io.Discard, nc, int64(h.payloadLen))
			nc.Write(frame(header{version: 5, op: OpHello, flags: flagReply, reqID: h.reqID}, nil, []byte("testfs")))
			io.Copy(io.Discard, nc)
		}()
		c, _ := Dial(ln.Addr().String(), ClientOptions{})
		_, err := c.Hello(ctx)
		c.Close()
		ln.Close()
		wg.Wait()
		if !errors.Is(err, syscall.EPROTO) || !strings.Contains(err.Error(), "server speaks Nacre protocol 5") {
			t.Fatalf("want the client to refuse naming both versions, got %v", err)
		}
	})
}

func TestHelloRefusesAnotherFileSystem(t *testing.T) {
	_, c := serve(t, newMem(), ServerOptions{Fsname: "alpha"}, ClientOptions{Fsname: "beta"})
	_, err := c.Hello(ctxT(t))
	if !errors.Is(err, syscall.EPROTO) || !strings.Contains(err.Error(), `"alpha"`) || !strings.Contains(err.Error(), `"beta"`) {
		t.Fatalf("want a refusal naming both file systems, got %v", err)
	}
}

func TestConcurrentRequestsUseSeveralConnections(t *testing.T) {
	g := newGate(newMem(objA))
	s, c := serve(t, g, ServerOptions{}, ClientOptions{Conns: 3})
	ctx := ctxT(t)
	const calls = 8
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := c.Read(ctx, objA, 0, make([]byte, 10))
			errs <- err
		}()
	}
	// The pool runs as many requests at once as it has connections: three
	// reads must be inside the handler together, and no more.
	wait.For(t, 10*time.Second, "three reads in flight", func() bool { return g.inside.Load() == 3 })
	g.open()
	for range calls {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if m := g.maxIn.Load(); m != 3 {
		t.Fatalf("at most %d reads were in flight, want 3", m)
	}
	if st := s.Stats(); st.Accepted != 3 {
		t.Fatalf("%d connections, want 3", st.Accepted)
	}
}

func TestCancelledCallClosesItsConnection(t *testing.T) {
	g := newGate(newMem(objA))
	s, c := serve(t, g, ServerOptions{}, ClientOptions{})
	defer g.open()
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(ctx, objA, 0, make([]byte, 10))
		done <- err
	}()
	wait.For(t, 10*time.Second, "read in flight", func() bool { return g.inside.Load() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "read OST0000 object 0x100000000:0x2a at 0") {
		t.Fatalf("want context.Canceled naming the op, got %v", err)
	}
	c.mu.Lock()
	open := len(c.conns)
	c.mu.Unlock()
	if open != 0 {
		t.Fatalf("%d client connections open after a cancelled call, want 0", open)
	}
	g.open()
	wait.For(t, 10*time.Second, "server to see the connection close", func() bool { return s.Stats().Open == 0 })
	// The next call works, on a new connection.
	if _, err := c.GetAttr(ctxT(t), objA); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Accepted != 2 {
		t.Fatalf("%d connections, want 2", st.Accepted)
	}
}

func TestDeadlineIsHonoured(t *testing.T) {
	g := newGate(newMem(objA))
	_, c := serve(t, g, ServerOptions{}, ClientOptions{})
	defer g.open()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Read(ctx, objA, 0, make([]byte, 10))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want DeadlineExceeded, got %v", err)
	}
}

func TestBrokenConnectionIsRetriedOnAFreshOne(t *testing.T) {
	s, c := serve(t, newMem(objA), ServerOptions{}, ClientOptions{Conns: 1})
	ctx := ctxT(t)
	if _, err := c.GetAttr(ctx, objA); err != nil {
		t.Fatal(err)
	}
	// Break the pooled connection behind the client's back.
	s.mu.Lock()
	for sc := range s.conns {
		sc.nc.Close()
	}
	s.mu.Unlock()
	wait.For(t, 10*time.Second, "server connections closed", func() bool { return s.Stats().Open == 0 })
	if err := c.Write(ctx, objA, 0, []byte("after"), nil); err != nil {
		t.Fatalf("write after a broken connection: %v", err)
	}
	if st := s.Stats(); st.Accepted != 2 {
		t.Fatalf("%d connections, want 2", st.Accepted)
	}
}

func TestConnectionFailureNamesTheAddress(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	c, err := Dial(addr, ClientOptions{Target: "OST0003"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Sync(ctxT(t), objA)
	var ne *net.OpError
	if !errors.As(err, &ne) || !strings.Contains(err.Error(), addr) || !strings.HasPrefix(err.Error(), "sync OST0003 object") {
		t.Fatalf("want a net error naming %s, got %v", addr, err)
	}
	if c.dials.Load() != 0 {
		t.Fatal("dial counted although it failed")
	}
}

func TestCloseWaitsForRequestsInFlight(t *testing.T) {
	g := newGate(newMem(objA))
	s := Serve(listen(t), g, ServerOptions{Fsname: "testfs"})
	c, _ := Dial(s.Addr().String(), ClientOptions{})
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(ctxT(t), objA, 0, make([]byte, 10))
		done <- err
	}()
	wait.For(t, 10*time.Second, "read in flight", func() bool { return g.inside.Load() == 1 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Close stops accepting at once...
	wait.For(t, 10*time.Second, "listener closed", func() bool {
		nc, err := net.Dial("tcp", s.Addr().String())
		if err == nil {
			nc.Close()
		}
		return err != nil
	})
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a request was in flight", err)
	default:
	}
	// ...and the request in flight completes.
	g.open()
	if err := <-done; err != nil {
		t.Fatalf("request in flight during Close: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Open != 0 {
		t.Fatalf("%d connections open after Close", st.Open)
	}
}

func TestCloseGivesUpAfterItsTimeout(t *testing.T) {
	g := newGate(newMem(objA))
	s := Serve(listen(t), g, ServerOptions{Fsname: "testfs", CloseTimeout: 50 * time.Millisecond})
	c, _ := Dial(s.Addr().String(), ClientOptions{})
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		_, err := c.Read(ctxT(t), objA, 0, make([]byte, 10))
		done <- err
	}()
	wait.For(t, 10*time.Second, "read in flight", func() bool { return g.inside.Load() == 1 })
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "1 requests still in flight") {
		t.Fatalf("want a timeout error, got %v", err)
	}
	if err := <-done; err == nil {
		t.Fatal("request whose connection was force-closed succeeded")
	}
	g.open()
	g.readsEnd.Wait()
}

func TestClosedClientRefusesCalls(t *testing.T) {
	_, c := serve(t, newMem(objA), ServerOptions{}, ClientOptions{})
	c.Close()
	if _, err := c.GetAttr(ctxT(t), objA); !errors.Is(err, ErrClosed) {
		t.Fatalf("want ErrClosed, got %v", err)
	}
}

func TestHungServerHitsTheClientTimeout(t *testing.T) {
	g := newGate(newMem(objA))
	s, c := serve(t, g, ServerOptions{}, ClientOptions{Timeout: 50 * time.Millisecond})
	defer g.open()
	_, err := c.Read(ctxT(t), objA, 0, make([]byte, 10))
	if !errors.Is(err, os.ErrDeadlineExceeded) || !strings.Contains(err.Error(), s.Addr().String()) {
		t.Fatalf("want a timeout naming the server, got %v", err)
	}
	if st := s.Stats(); st.Accepted != 1 {
		t.Fatalf("a timed-out request was resent: %d connections", st.Accepted)
	}
}
