package cli

import (
	"context"
	"fmt"
	"syscall"

	"nacre/internal/errno"
)

// DirStripeJSON is `nacre getdirstripe --json`: where a directory's
// entries live. A directory that is not striped has stripe_count 0 (as
// Lustre's lmv_stripe_count) and stripe_index the MDT that holds it.
type DirStripeJSON struct {
	Path        string         `json:"path"`
	FID         string         `json:"fid"`
	StripeCount int            `json:"stripe_count"`
	StripeIndex int            `json:"stripe_index"`
	Hash        string         `json:"hash"`
	Stripes     []DirStripeMDT `json:"stripes"`
}

// DirStripeMDT is one shard of a striped directory.
type DirStripeMDT struct {
	MDT int    `json:"mdt"`
	FID string `json:"fid"`
}

// GetDirStripe prints where a directory's entries live (Lustre's lfs
// getdirstripe).
func GetDirStripe(ctx context.Context, e Env, arg string, asJSON bool) error {
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	ino, err := c.ResolveMeta(ctx, ps[0], true)
	if err != nil {
		return opError("getdirstripe", arg, err)
	}
	if !isDir(ino) {
		return opError("getdirstripe", arg, &errno.Errno{Op: "getdirstripe", Errno: syscall.ENOTDIR})
	}
	idx, err := c.MDTOf(fidOf(ino))
	if err != nil {
		return opError("getdirstripe", arg, err)
	}
	out := DirStripeJSON{Path: arg, FID: fidOf(ino).String(), StripeIndex: int(idx), Hash: "none", Stripes: []DirStripeMDT{}}
	if asJSON {
		return JSON(e.Out, out)
	}
	_, err = fmt.Fprintf(e.Out, "lmv_stripe_count: %d lmv_stripe_offset: %d lmv_hash_type: %s\n", out.StripeCount, out.StripeIndex, out.Hash)
	return err
}
