package admin

import (
	"context"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/lfsck"
	"nacre/internal/pki"
)

// Conn drives the checkers of a cluster from a program (benchmarks).
type Conn struct{ k *conn }

// Dial connects to the cluster of mgs, over TLS with creds if not nil.
func Dial(ctx context.Context, mgs string, creds *pki.Creds) (*Conn, error) {
	k, err := connect(ctx, cli.Env{MGS: mgs, TLS: creds})
	if err != nil {
		return nil, err
	}
	return &Conn{k: k}, nil
}

// Close drops the connections.
func (c *Conn) Close() { c.k.close() }

// Start starts the checker of MDT mdtIdx.
func (c *Conn) Start(ctx context.Context, mdtIdx uint32, req *pb.LfsckStartRequest) error {
	return c.k.call(ctx, mdtIdx, func(lc nacregrpc.LfsckClient) error {
		_, err := lc.Start(ctx, req)
		return err
	})
}

// Stop stops the checker of MDT mdtIdx.
func (c *Conn) Stop(ctx context.Context, mdtIdx uint32) error {
	return c.k.call(ctx, mdtIdx, func(lc nacregrpc.LfsckClient) error {
		_, err := lc.Stop(ctx, &pb.LfsckStopRequest{})
		return err
	})
}

// Report returns the report of MDT mdtIdx.
func (c *Conn) Report(ctx context.Context, mdtIdx uint32) (*lfsck.Report, error) {
	reps, err := c.k.query(ctx, []uint32{mdtIdx})
	if err != nil {
		return nil, err
	}
	return reps[0], nil
}

// Run starts a check on MDT mdtIdx and waits until it ends.
func (c *Conn) Run(ctx context.Context, mdtIdx uint32, req *pb.LfsckStartRequest) (*lfsck.Report, error) {
	if err := c.Start(ctx, mdtIdx, req); err != nil {
		return nil, err
	}
	poll := 10 * time.Millisecond
	for {
		r, err := c.Report(ctx, mdtIdx)
		if err != nil {
			return nil, err
		}
		if !r.Running {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
		poll = min(poll*3/2, 200*time.Millisecond)
	}
}
