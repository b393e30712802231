package cli

import (
	"context"
	"fmt"
	"io"

	pb "nacre/api/nacrepb"
	"nacre/internal/layout"
)

// StripeObjectJSON is one object of `getstripe --json`.
type StripeObjectJSON struct {
	OST int    `json:"ost"`
	ID  string `json:"id"`
	Seq string `json:"seq"`
	Oid uint64 `json:"oid"`
}

// StripeJSON is the JSON form of `nacre getstripe`.
type StripeJSON struct {
	Path         string             `json:"path"`
	FID          string             `json:"fid"`
	StripeCount  int                `json:"stripe_count"`
	StripeSize   uint64             `json:"stripe_size"`
	StripeOffset int                `json:"stripe_offset"`
	Generation   uint32             `json:"layout_gen"`
	Objects      []StripeObjectJSON `json:"objects"`
	Default      bool               `json:"default,omitempty"`
}

// GetStripe prints a file's layout or a directory's default layout.
func GetStripe(ctx context.Context, e Env, arg string, asJSON bool) error {
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	ino, err := c.ResolveMeta(ctx, ps[0], true)
	if err != nil {
		return opError("getstripe", arg, err)
	}
	out := stripeOf(arg, ino)
	if asJSON {
		return JSON(e.Out, out)
	}
	return writeStripe(e.Out, out, ino)
}

// stripeOf is getstripe's account of ino's layout (a directory's default
// layout). A file's stripe_offset is the OST of its first stripe, as
// Lustre's lmm_stripe_offset, whatever the create asked (-1: any); a
// directory's is what its default asks, -1 if nothing. (JSON gave a
// file the offset asked, -1, where the text gave the OST, 1.)
func stripeOf(p string, ino *pb.Inode) StripeJSON {
	l := ino.Layout
	out := StripeJSON{Path: p, FID: fidOf(ino).String(), StripeCount: layout.DefaultStripeCount, StripeSize: layout.DefaultStripeSize, StripeOffset: -1, Objects: []StripeObjectJSON{}}
	if isDir(ino) {
		out.Default = true
	}
	if l != nil {
		out.StripeCount, out.StripeSize, out.StripeOffset, out.Generation = int(l.StripeCount), uint64(l.StripeSize), int(l.StripeOffset), l.Generation
		if !isDir(ino) {
			out.StripeOffset = firstOST(l)
		}
		for _, o := range l.Objects {
			out.Objects = append(out.Objects, StripeObjectJSON{OST: int(o.Ost), ID: fmt.Sprintf("%#x:%#x", o.Seq, o.Oid), Seq: fmt.Sprintf("%#x", o.Seq), Oid: o.Oid})
		}
	}
	return out
}

// writeStripe is getstripe's text: Lustre's lmm_* lines for a file; for
// a directory its default layout, a 0 (not set) shown as the file
// system default it stands for. The path is quoted at a terminal
// (showNames).
func writeStripe(w io.Writer, out StripeJSON, ino *pb.Inode) error {
	p, l := showNames(w)(out.Path), ino.Layout
	if isDir(ino) {
		if l == nil {
			fmt.Fprintf(w, "%s has no default layout; new files get the parent's or the file system default (%s x %d)\n", p, layout.FormatSize(layout.DefaultStripeSize), layout.DefaultStripeCount)
			return nil
		}
		count := fmt.Sprint(out.StripeCount)
		if out.StripeCount == 0 {
			count = fmt.Sprintf("0 (file system default, %d)", layout.DefaultStripeCount)
		}
		size := layout.FormatSize(out.StripeSize)
		if out.StripeSize == 0 {
			size = fmt.Sprintf("0 (file system default, %s)", layout.FormatSize(layout.DefaultStripeSize))
		}
		fmt.Fprintf(w, "%s (default layout)\nstripe_count:  %s\nstripe_size:   %s\nstripe_offset: %d\n", p, count, size, out.StripeOffset)
		return nil
	}
	if l == nil {
		return fmt.Errorf("%s has no layout (not a regular file?)", p)
	}
	fmt.Fprintf(w, "%s\nlmm_fid:           %s\nlmm_stripe_count:  %d\nlmm_stripe_size:   %d (%s)\nlmm_pattern:       raid0\nlmm_layout_gen:    %d\nlmm_stripe_offset: %d\n",
		p, out.FID, out.StripeCount, out.StripeSize, layout.FormatSize(out.StripeSize), out.Generation, out.StripeOffset)
	fmt.Fprintf(w, "\tobdidx\t\t objid\t\t objid\t\t group\n")
	for _, o := range l.Objects {
		fmt.Fprintf(w, "\t%6d\t%14d\t%#14x\t%#14x\n", o.Ost, o.Oid, o.Oid, o.Seq)
	}
	return nil
}

func firstOST(l *pb.Layout) int {
	if len(l.Objects) == 0 {
		return -1
	}
	return int(l.Objects[0].Ost)
}
