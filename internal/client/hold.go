package client

import (
	"context"
	"fmt"
	"os"
	"sync"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// holds are the files a library user (nacre get, cat) keeps open through
// Hold, and the session that tells the MDTs so. A mount has a session of
// its own and never uses these.
type holds struct {
	start   sync.Mutex // serialises starting the session
	mu      sync.Mutex
	session *Session
	count   map[fid.FID]int
}

// Hold keeps f while the caller reads it, as an open file of a mount is
// kept: should another client remove f's last name meanwhile, the MDT
// keeps the file (its OST objects too) until release, so a long read goes
// on to the end as on Lustre, where it failed halfway with ENOENT. The
// first Hold of a Client starts its session with the MDTs; Close ends it,
// which releases what is still held. It returns f's attributes as of the
// hold (nil from an MDS that does not know opens), or ENOENT if f was
// removed before. release may be called more than once.
func (c *Client) Hold(ctx context.Context, f fid.FID) (*pb.Inode, func(), error) {
	s, err := c.holdSession(ctx)
	if err != nil {
		return nil, nil, err
	}
	c.held.mu.Lock()
	if c.held.count == nil {
		c.held.count = map[fid.FID]int{}
	}
	c.held.count[f]++
	c.held.mu.Unlock()
	var once sync.Once
	release := func() {
		once.Do(func() {
			c.held.mu.Lock()
			c.held.count[f]--
			last := c.held.count[f] == 0
			if last {
				delete(c.held.count, f)
			}
			c.held.mu.Unlock()
			if last {
				s.Closed(context.WithoutCancel(ctx), []fid.FID{f})
			}
		})
	}
	ino, err := s.Opened(ctx, f)
	if err != nil {
		release()
		return nil, nil, err
	}
	return ino, release, nil
}

// holdSession is the session of Hold, started at its first use. (Not
// under held.mu: starting it asks OpenFIDs.)
func (c *Client) holdSession(ctx context.Context) (*Session, error) {
	c.held.start.Lock()
	defer c.held.start.Unlock()
	c.held.mu.Lock()
	s := c.held.session
	c.held.mu.Unlock()
	if s != nil {
		return s, nil
	}
	s, err := c.StartSession(ctx, fmt.Sprintf("nacre pid %d", os.Getpid()), SessionHandlers{
		// A new leader learns what is held when the session comes back.
		OpenFIDs: func() []fid.FID {
			c.held.mu.Lock()
			defer c.held.mu.Unlock()
			out := make([]fid.FID, 0, len(c.held.count))
			for f := range c.held.count {
				out = append(out, f)
			}
			return out
		},
	})
	if err != nil {
		return nil, err
	}
	c.held.mu.Lock()
	c.held.session = s
	c.held.mu.Unlock()
	return s, nil
}

// closeHolds ends Hold's session, if it was started.
func (c *Client) closeHolds() {
	c.held.mu.Lock()
	s := c.held.session
	c.held.session = nil
	c.held.mu.Unlock()
	if s != nil {
		s.Close()
	}
}
