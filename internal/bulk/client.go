package bulk

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/pki"
	"nacre/internal/version"
)

// ErrClosed is returned by calls on a closed Client.
var ErrClosed = errors.New("bulk: client closed")

// ClientOptions configure Dial.
type ClientOptions struct {
	// Fsname is the file system the client expects; a server of another
	// one refuses the handshake. Empty accepts any.
	Fsname string
	// Target names the server in error messages, e.g. "OST0001". Empty:
	// learned from the handshake.
	Target string
	// Conns is the most connections kept to the server (0: 4). Each
	// request takes an idle one, so this bounds the requests in flight.
	Conns int
	// DialTimeout bounds connecting (0: 5 s).
	DialTimeout time.Duration
	// Timeout bounds one request when the context has no earlier deadline
	// (0: 60 s), so that a hung server cannot hold a caller forever.
	Timeout time.Duration
	// TLS, if set, makes every connection TLS (internal/pki's
	// ClientConfig), handshaken within DialTimeout.
	TLS *tls.Config

	// protocol overrides version.Protocol (tests of version refusal).
	protocol uint16
}

// Client is a connection pool to one server. It is safe for concurrent use.
type Client struct {
	addr    string
	opts    ClientOptions
	version uint16
	target  atomic.Pointer[string]
	reqID   atomic.Uint64

	tokens chan struct{} // one per connection allowed
	idle   chan *conn
	done   chan struct{}

	mu     sync.Mutex
	conns  map[*conn]struct{} // every open connection, idle or busy
	closed bool

	dials atomic.Uint64
	// corruptCRC makes the next n request payloads carry a wrong CRC (tests).
	corruptCRC atomic.Int32
}

type conn struct {
	nc   net.Conn
	br   *bufio.Reader
	wbuf [HeaderSize + MaxExt]byte
	rbuf [HeaderSize + MaxExt]byte
}

// ServerInfo is what a server says about itself in the handshake.
type ServerInfo struct {
	Fsname string
	Index  uint32
	// Epoch is the server's epoch as a reply to a change of data gave it
	// (WRITE, PUNCH, TRUNCATE, SYNC, SETATTR; 0 from a server that does
	// not say).
	Epoch uint64
}

// Dial returns a client for the server at addr. It does not connect:
// connections are made (and handshaken) when requests need them, and
// remade after failures.
func Dial(addr string, opts ClientOptions) (*Client, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("bulk dial %q: %w", addr, err)
	}
	if opts.Conns <= 0 {
		opts.Conns = 4
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 5 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	c := &Client{
		addr:    addr,
		opts:    opts,
		version: opts.protocol,
		tokens:  make(chan struct{}, opts.Conns),
		idle:    make(chan *conn, opts.Conns),
		done:    make(chan struct{}),
		conns:   make(map[*conn]struct{}),
	}
	if c.version == 0 {
		c.version = version.Protocol
	}
	for range opts.Conns {
		c.tokens <- struct{}{}
	}
	name := opts.Target
	if name == "" {
		name = "OST at " + addr
	}
	c.target.Store(&name)
	return c, nil
}

// Addr is the server's address.
func (c *Client) Addr() string { return c.addr }

// Close closes every connection; calls in flight fail, later calls get
// ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	conns := c.conns
	c.conns = nil
	c.mu.Unlock()
	close(c.done)
	for cn := range conns {
		cn.nc.Close()
	}
	return nil
}

// Hello checks that the server answers, handshaking a connection if none
// is open, and returns what the server said about itself.
func (c *Client) Hello(ctx context.Context) (ServerInfo, error) {
	cl := call{op: OpHello}
	err := c.do(ctx, &cl)
	return cl.info, err
}

// Read reads into p from offset off of obj. It returns fewer than len(p)
// bytes, without error, only at the object's end; holes read as zeros.
// Reads over MaxPayload are split into several requests.
func (c *Client) Read(ctx context.Context, obj fid.ObjID, off uint64, p []byte) (int, error) {
	total := 0
	for total < len(p) {
		chunk := p[total:min(len(p), total+MaxPayload)]
		cl := call{op: OpRead, obj: obj, off: off + uint64(total), length: uint64(len(chunk)), into: chunk}
		if err := c.checkRange(&cl); err != nil {
			return total, err
		}
		if err := c.do(ctx, &cl); err != nil {
			return total, err
		}
		total += cl.n
		if cl.n < len(chunk) {
			break
		}
	}
	return total, nil
}

// Write writes data at offset off of obj. meta, if not nil, tells the OST
// the object's parent file, layout slot and owner; it records them on the
// first write. Writes over MaxPayload are split into several requests.
func (c *Client) Write(ctx context.Context, obj fid.ObjID, off uint64, data []byte, meta *ObjMeta) error {
	_, err := c.WriteEpoch(ctx, obj, off, data, meta)
	return err
}

// WriteEpoch is Write, returning the server's epoch as its first reply
// gave it (ServerInfo.Epoch): a later Sync that answers with another one
// comes from a server that may have lost the write.
func (c *Client) WriteEpoch(ctx context.Context, obj fid.ObjID, off uint64, data []byte, meta *ObjMeta) (uint64, error) {
	var epoch uint64
	for {
		chunk := data[:min(len(data), MaxPayload)]
		cl := call{op: OpWrite, obj: obj, off: off, length: uint64(len(chunk)), payload: chunk, meta: meta}
		if err := c.checkRange(&cl); err != nil {
			return epoch, err
		}
		if err := c.do(ctx, &cl); err != nil {
			return epoch, err
		}
		if epoch == 0 {
			epoch = cl.info.Epoch
		}
		data = data[len(chunk):]
		off += uint64(len(chunk))
		if len(data) == 0 {
			return epoch, nil
		}
	}
}

// Punch deallocates [off, off+length) of obj; the object's size stays. It
// returns the server's epoch, as WriteEpoch.
func (c *Client) Punch(ctx context.Context, obj fid.ObjID, off, length uint64) (uint64, error) {
	cl := call{op: OpPunch, obj: obj, off: off, length: length}
	err := c.do(ctx, &cl)
	return cl.info.Epoch, err
}

// Truncate sets obj's size; meta as for Write. It returns the server's
// epoch, as WriteEpoch.
func (c *Client) Truncate(ctx context.Context, obj fid.ObjID, size uint64, meta *ObjMeta) (uint64, error) {
	cl := call{op: OpTruncate, obj: obj, off: size, meta: meta}
	err := c.do(ctx, &cl)
	return cl.info.Epoch, err
}

// GetAttr returns obj's size, blocks and mtime; a missing object gives
// Exists == false and no error.
func (c *Client) GetAttr(ctx context.Context, obj fid.ObjID) (ObjAttr, error) {
	cl := call{op: OpGetAttr, obj: obj}
	err := c.do(ctx, &cl)
	return cl.attr, err
}

// Sync makes obj's data and attribute record durable on the server.
func (c *Client) Sync(ctx context.Context, obj fid.ObjID) error {
	_, err := c.SyncEpoch(ctx, obj)
	return err
}

// SyncEpoch is Sync, returning the epoch of the server that synced.
func (c *Client) SyncEpoch(ctx context.Context, obj fid.ObjID) (uint64, error) {
	cl := call{op: OpSync, obj: obj}
	err := c.do(ctx, &cl)
	return cl.info.Epoch, err
}

// SetAttr changes the groups of obj's attribute record that meta.Valid
// names (e.g. MetaOwner for chown).
func (c *Client) SetAttr(ctx context.Context, obj fid.ObjID, meta *ObjMeta) error {
	if meta == nil {
		return &errno.Errno{Op: c.opName(&call{op: OpSetAttr, obj: obj}), Errno: syscall.EINVAL, Msg: "setattr without attributes"}
	}
	return c.do(ctx, &call{op: OpSetAttr, obj: obj, meta: meta})
}

// call is one operation: its request and, once done, its results.
type call struct {
	op      Op
	obj     fid.ObjID
	off     uint64
	length  uint64
	meta    *ObjMeta
	payload []byte // WRITE data
	into    []byte // READ destination

	n    int
	attr ObjAttr
	info ServerInfo
}

func (c *Client) checkRange(cl *call) error {
	if cl.off > math.MaxInt64 || cl.length > math.MaxInt64-cl.off {
		return &errno.Errno{Op: c.opName(cl), Errno: syscall.EFBIG, Msg: "offset beyond the largest object size"}
	}
	return nil
}

// opName is the operation as error messages name it.
func (c *Client) opName(cl *call) string {
	t := *c.target.Load()
	switch cl.op {
	case OpRead, OpWrite:
		return fmt.Sprintf("%s %s object %s at %d", cl.op, t, cl.obj, cl.off)
	case OpPunch:
		return fmt.Sprintf("punch %s object %s at %d length %d", t, cl.obj, cl.off, cl.length)
	case OpTruncate:
		return fmt.Sprintf("truncate %s object %s to %d", t, cl.obj, cl.off)
	case OpHello:
		return fmt.Sprintf("hello %s", t)
	}
	return fmt.Sprintf("%s %s object %s", cl.op, t, cl.obj)
}

// serverError is an errno reply, or a refused handshake.
type serverError struct {
	errno syscall.Errno
	msg   string
}

func (e *serverError) Error() string {
	if e.msg == "" {
		return e.errno.Error()
	}
	return e.errno.Error() + " (" + e.msg + ")"
}

// errReplyCRC: a reply payload failed its CRC; the frame was read in full.
var errReplyCRC = errors.New("reply payload CRC32C mismatch")

// do runs a call: on a connection that broke (or could not be made) it
// retries once on a fresh one, and a READ whose reply is corrupt is read
// once more. Every op is idempotent, so a resend is harmless.
func (c *Client) do(ctx context.Context, cl *call) error {
	connRetried, crcRetried := false, false
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", c.opName(cl), err)
		}
		cn, err := c.get(ctx, connRetried)
		if err == nil {
			var ok bool
			ok, err = c.roundTrip(ctx, cn, cl)
			c.put(cn, ok)
		}
		var se *serverError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &se):
			msg := se.Error()
			if se.errno == syscall.ENOSPC && se.msg != "" {
				msg = se.msg // "OST0001 is full: ...", which says it all
			}
			return &errno.Errno{Op: c.opName(cl), Errno: se.errno, Msg: msg}
		case errors.Is(err, errReplyCRC):
			if !crcRetried {
				crcRetried = true
				continue
			}
			se = &serverError{errno: syscall.EIO, msg: fmt.Sprintf("the reply from %s failed its CRC32C twice", c.addr)}
			return &errno.Errno{Op: c.opName(cl), Errno: se.errno, Msg: se.Error()}
		case errors.Is(err, ErrClosed), ctx.Err() != nil:
			return fmt.Errorf("%s: %w", c.opName(cl), err)
		case errors.Is(err, os.ErrDeadlineExceeded):
			// Our own Timeout, not the caller's: a hung server. Resending
			// would only double the wait.
			return fmt.Errorf("%s: no reply from %s within %v: %w", c.opName(cl), c.addr, c.opts.Timeout, err)
		case !connRetried:
			connRetried = true
			continue
		}
		return fmt.Errorf("%s: connection to %s: %w", c.opName(cl), c.addr, err)
	}
}

// get takes a connection: an idle one unless fresh, else a new one.
func (c *Client) get(ctx context.Context, fresh bool) (*conn, error) {
	select {
	case <-c.tokens:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.done:
		return nil, ErrClosed
	}
	if c.isClosed() {
		c.tokens <- struct{}{}
		return nil, ErrClosed
	}
	if !fresh {
		select {
		case cn := <-c.idle:
			return cn, nil
		default:
		}
	}
	cn, err := c.dial(ctx)
	if err != nil {
		c.tokens <- struct{}{}
		return nil, err
	}
	return cn, nil
}

// put returns a connection taken by get; one that is not ok is closed.
func (c *Client) put(cn *conn, ok bool) {
	if ok && !c.isClosed() {
		select {
		case c.idle <- cn:
		default:
			c.discard(cn)
		}
	} else {
		c.discard(cn)
	}
	c.tokens <- struct{}{}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

func (c *Client) discard(cn *conn) {
	c.mu.Lock()
	delete(c.conns, cn)
	c.mu.Unlock()
	cn.nc.Close()
}

// dial opens and handshakes a new connection.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	d := net.Dialer{Timeout: c.opts.DialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, err
	}
	c.dials.Add(1)
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if c.opts.TLS != nil {
		tc, err := pki.Connect(ctx, nc, c.opts.TLS, c.opts.DialTimeout)
		if err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", c.addr, err)
		}
		nc = tc
	}
	cn := &conn{nc: nc, br: bufio.NewReaderSize(nc, 32<<10)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		nc.Close()
		return nil, ErrClosed
	}
	c.conns[cn] = struct{}{}
	c.mu.Unlock()
	hello := call{op: OpHello}
	if _, err := c.roundTrip(ctx, cn, &hello); err != nil {
		c.discard(cn)
		return nil, err
	}
	return cn, nil
}

// aLongTimeAgo is a deadline in the past: setting it wakes up blocked I/O.
var aLongTimeAgo = time.Unix(1, 0)

// roundTrip sends cl's request on cn and reads the reply. ok reports
// whether cn is still usable: false after any I/O or framing error, and
// after a cancellation, which may have cut a frame in half.
func (c *Client) roundTrip(ctx context.Context, cn *conn, cl *call) (ok bool, err error) {
	dl := time.Now().Add(c.opts.Timeout)
	if d, has := ctx.Deadline(); has && d.Before(dl) {
		dl = d
	}
	cn.nc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { cn.nc.SetDeadline(aLongTimeAgo) })
	ok, err = c.exchange(cn, cl)
	if !stop() {
		// The cancellation fired: the deadline was moved into the past,
		// possibly in the middle of a frame.
		if cerr := ctx.Err(); cerr != nil && err != nil {
			err = cerr
		}
		return false, err
	}
	if err != nil && !ok {
		if cerr := ctx.Err(); cerr != nil {
			err = cerr
		} else if d, has := ctx.Deadline(); has && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(d) {
			err = context.DeadlineExceeded
		}
	}
	return ok, err
}

// exchange writes one request and reads its reply.
func (c *Client) exchange(cn *conn, cl *call) (bool, error) {
	h := header{
		version:    c.version,
		op:         cl.op,
		reqID:      c.reqID.Add(1),
		obj:        cl.obj,
		off:        cl.off,
		length:     cl.length,
		payloadLen: uint32(len(cl.payload)),
		payloadCRC: payloadCRC(cl.payload),
	}
	payload := cl.payload
	if cl.op == OpHello {
		payload = []byte(c.opts.Fsname)
		h.payloadLen, h.payloadCRC = uint32(len(payload)), payloadCRC(payload)
	}
	if len(payload) > 0 && takeOne(&c.corruptCRC) {
		h.payloadCRC ^= 1
	}
	extLen := 0
	if cl.meta != nil {
		cl.meta.put(cn.wbuf[HeaderSize:])
		extLen = metaSize
	}
	frame := cn.wbuf[:HeaderSize+extLen]
	h.put(frame)
	var err error
	if len(payload) == 0 {
		_, err = cn.nc.Write(frame)
	} else {
		bufs := net.Buffers{frame, payload}
		_, err = bufs.WriteTo(cn.nc)
	}
	if err != nil {
		return false, err
	}

	rh, ext, err := readHeader(cn.br, cn.rbuf[:])
	if err != nil {
		return false, noEOF(err)
	}
	if rh.flags&flagReply == 0 || rh.op != h.op || rh.reqID != h.reqID {
		return false, fmt.Errorf("%w: reply (%s, request %d) does not answer request %d (%s)", ErrBadFrame, rh.op, rh.reqID, h.reqID, h.op)
	}
	if rh.status != 0 {
		msg, err := c.readSmall(cn, &rh, maxMsg)
		if err != nil {
			return false, err
		}
		return true, &serverError{errno: syscall.Errno(rh.status), msg: string(msg)}
	}
	if rh.version != c.version {
		// A server that speaks another version refuses us; one that does
		// not is refused here, with the same message.
		return false, &serverError{errno: syscall.EPROTO,
			msg: errno.VersionMismatch(strconv.Itoa(int(rh.version)), int(c.version), "server", "client").Msg}
	}
	switch cl.op {
	case OpHello:
		name, err := c.readSmall(cn, &rh, maxFsname)
		if err != nil {
			return false, err
		}
		cl.info = ServerInfo{Fsname: string(name), Index: uint32(rh.off)}
		if c.opts.Target == "" {
			t := fmt.Sprintf("OST%04x", cl.info.Index)
			c.target.Store(&t)
		}
		return true, nil
	case OpRead:
		if uint64(rh.payloadLen) > cl.length {
			return false, fmt.Errorf("%w: READ of %d bytes answered with %d", ErrBadFrame, cl.length, rh.payloadLen)
		}
		p := cl.into[:rh.payloadLen]
		crc, err := readPayload(cn.br, p)
		if err != nil {
			return false, err
		}
		if crc != rh.payloadCRC {
			return true, errReplyCRC
		}
		cl.n = len(p)
		return true, nil
	case OpGetAttr:
		a, err := decodeAttr(ext)
		if err != nil {
			return false, err
		}
		cl.attr = a
	case OpWrite, OpPunch, OpTruncate, OpSync, OpSetAttr:
		cl.info.Epoch = rh.length
	}
	if rh.payloadLen != 0 {
		return false, fmt.Errorf("%w: %s reply with an unexpected payload of %d bytes", ErrBadFrame, cl.op, rh.payloadLen)
	}
	return true, nil
}

// readSmall reads a short reply payload (a message or a name); a corrupt
// one is dropped, since it only explains an errno.
func (c *Client) readSmall(cn *conn, rh *header, limit int) ([]byte, error) {
	if int(rh.payloadLen) > limit {
		return nil, fmt.Errorf("%w: %s reply payload of %d bytes, limit %d", ErrBadFrame, rh.op, rh.payloadLen, limit)
	}
	if rh.payloadLen == 0 {
		return nil, nil
	}
	b := make([]byte, rh.payloadLen)
	if _, err := io.ReadFull(cn.br, b); err != nil {
		return nil, noEOF(err)
	}
	if payloadCRC(b) != rh.payloadCRC {
		return nil, nil
	}
	return b, nil
}
