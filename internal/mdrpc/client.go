package mdrpc

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/pki"
	"nacre/internal/version"
)

// ClientOptions configure a client.
type ClientOptions struct {
	Fsname string
	// MaxIdle is how many idle connections are kept (0: 64).
	MaxIdle int
	// DialTimeout bounds connecting (0: 5 s).
	DialTimeout time.Duration
	// Timeout bounds a call whose context has no deadline (0: 60 s).
	Timeout time.Duration
	// TLS, if set, makes every connection TLS (internal/pki's
	// ClientConfig), handshaken within DialTimeout.
	TLS *tls.Config
}

// Client calls one server. Every call takes an idle connection (or dials
// one), writes its request and reads the reply on the calling goroutine.
type Client struct {
	addr   string
	opts   ClientOptions
	idle   chan *conn
	id     atomic.Uint64
	mu     sync.Mutex
	closed bool
	conns  map[*conn]struct{}
}

type conn struct {
	nc  net.Conn
	br  *bufio.Reader
	buf []byte
	in  []byte
}

// Dial returns a client for addr; connections are made on first use.
func Dial(addr string, o ClientOptions) *Client {
	if o.MaxIdle == 0 {
		o.MaxIdle = 64
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.Timeout == 0 {
		o.Timeout = 60 * time.Second
	}
	return &Client{addr: addr, opts: o, idle: make(chan *conn, o.MaxIdle), conns: map[*conn]struct{}{}}
}

// Addr is the server address.
func (c *Client) Addr() string { return c.addr }

// Close closes every connection; later calls fail.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for cn := range c.conns {
		cn.nc.Close()
	}
	return nil
}

var aLongTimeAgo = time.Unix(1, 0)

// Call sends req to method and decodes the reply into resp. Errors are
// *errno.Error: the server's, or Unavailable when the connection failed
// (the request may or may not have run; callers retry idempotently).
func (c *Client) Call(ctx context.Context, method uint16, req, resp proto.Message) error {
	payload, err := proto.Marshal(req)
	if err != nil {
		return errno.Errorf(errno.InvalidArgument, "encode request: %v", err)
	}
	for attempt := 0; ; attempt++ {
		// The retry dials: the other idle connections may have been
		// closed by the server as well (ServerOptions.IdleTimeout).
		cn, fresh, err := c.get(ctx, attempt > 0)
		if err != nil {
			return err
		}
		h, body, err := c.exchange(ctx, cn, method, payload)
		if err != nil {
			c.discard(cn)
			if ctx.Err() != nil {
				return errno.From(ctx.Err())
			}
			if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
				// The socket deadline fired before the context's timer.
				return errno.From(context.DeadlineExceeded)
			}
			// A pooled connection may have been closed by the server
			// while idle: try once more on a fresh one.
			if !fresh && attempt == 0 {
				continue
			}
			return errno.Unreachable("metadata server", c.addr, err)
		}
		if h.code != 0 {
			c.put(cn)
			return replyError(h, body)
		}
		err = proto.Unmarshal(body, resp)
		c.put(cn)
		if err != nil {
			return errno.Errorf(errno.Internal, "decode reply from %s: %v", c.addr, err)
		}
		return nil
	}
}

func (c *Client) exchange(ctx context.Context, cn *conn, method uint16, payload []byte) (header, []byte, error) {
	dl := time.Now().Add(c.opts.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(dl) {
		dl = d
	}
	cn.nc.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { cn.nc.SetDeadline(aLongTimeAgo) })
	defer stop()
	id := c.id.Add(1)
	cn.buf = frame(cn.buf, header{version: version.Protocol, code: method, id: id}, payload)
	if _, err := cn.nc.Write(cn.buf); err != nil {
		return header{}, nil, err
	}
	h, body, err := readFrame(cn.br, cn.in)
	if cap(body) <= keepBuf {
		cn.in = body
	} else {
		// Pooled connections keep no large buffer: the caller decodes
		// body before the connection's next call.
		cn.in = nil
	}
	if err != nil {
		return header{}, nil, err
	}
	if h.id != id {
		return header{}, nil, fmt.Errorf("%w: reply to request %d, want %d", ErrBadFrame, h.id, id)
	}
	return h, body, nil
}

// replyError is the error an error reply carries: a pb.Failure, or text
// from a server of another version.
func replyError(h header, body []byte) error {
	if h.version == version.Protocol {
		var f pb.Failure
		if proto.Unmarshal(body, &f) == nil {
			return errno.FromFailure(&f)
		}
	}
	return errno.New(errno.Code(h.code), string(body))
}

// get takes an idle connection, unless dial, or dials a new one; it
// reports whether the connection is new.
func (c *Client) get(ctx context.Context, dial bool) (*conn, bool, error) {
	if !dial {
		select {
		case cn := <-c.idle:
			return cn, false, nil
		default:
		}
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, false, errno.New(errno.Canceled, "mdrpc: client closed")
	}
	d := net.Dialer{Timeout: c.opts.DialTimeout, KeepAlive: 30 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", c.addr)
	if err != nil {
		return nil, false, errno.Unreachable("connect to metadata server", c.addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	if c.opts.TLS != nil {
		tc, err := pki.Connect(ctx, nc, c.opts.TLS, c.opts.DialTimeout)
		if err != nil {
			nc.Close()
			return nil, false, errno.Unreachable("TLS handshake with metadata server", c.addr, err)
		}
		nc = tc
	}
	cn := &conn{nc: nc, br: bufio.NewReaderSize(nc, 64<<10)}
	c.mu.Lock()
	c.conns[cn] = struct{}{}
	c.mu.Unlock()
	h, body, err := c.exchange(ctx, cn, MethodHello, []byte(c.opts.Fsname))
	if err != nil {
		c.discard(cn)
		return nil, false, errno.Unreachable("handshake with metadata server", c.addr, err)
	}
	if h.code != 0 {
		c.discard(cn)
		return nil, false, replyError(h, body)
	}
	return cn, true, nil
}

func (c *Client) put(cn *conn) {
	select {
	case c.idle <- cn:
	default:
		c.discard(cn)
	}
}

func (c *Client) discard(cn *conn) {
	c.mu.Lock()
	delete(c.conns, cn)
	c.mu.Unlock()
	cn.nc.Close()
}
