package cli

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/layout"
	"nacre/internal/reserve"
)

// The layout put and setstripe ask for (-c, -S, -i), and whether the file
// made got it (stripesShort: an OST down or full gives fewer stripes).

// StripeOpts are the -c/-S/-i options of put and setstripe.
type StripeOpts struct {
	Count  int    // 0 = default, -1 = all OSTs
	Size   uint64 // 0 = default
	Offset int    // -1 = any
	// Given: one of them was given, if only as a default (`-c 0`): the
	// layout asked for is the file system's defaults, not none.
	Given bool
}

func (s StripeOpts) layout() (*pb.Layout, error) {
	if s.Size != 0 {
		if err := layout.CheckStripeSize(s.Size); err != nil {
			return nil, err
		}
	}
	if s.Count < -1 || s.Count > layout.MaxStripeCount {
		return nil, fmt.Errorf("stripe count %d is invalid: use -1 (all OSTs) or 1..%d", s.Count, layout.MaxStripeCount)
	}
	if s.Count == 0 && s.Size == 0 && s.Offset < 0 && !s.Given {
		return nil, nil
	}
	return &pb.Layout{Pattern: 1, StripeCount: int32(s.Count), StripeSize: uint32(s.Size), StripeOffset: int32(s.Offset)}, nil
}

// checkOSTs refuses a first OST (-i) that the file system does not have.
func (s StripeOpts) checkOSTs(ctx context.Context, c *client.Client) error {
	if s.Offset < 0 {
		return nil
	}
	cfg, err := c.Config(ctx)
	if err != nil {
		return err
	}
	return checkOSTIndex(s.Offset, cfg.Targets)
}

func checkOSTIndex(index int, targets []*pb.TargetInfo) error {
	seen := map[uint32]bool{}
	for _, t := range targets {
		if t.Kind == pb.TargetKind_TARGET_OST {
			seen[t.Index] = true // once per OST, however many replicas
		}
	}
	if index >= 0 && index <= math.MaxUint32 && seen[uint32(index)] {
		return nil
	}
	idx := make([]int, 0, len(seen))
	for i := range seen {
		idx = append(idx, int(i))
	}
	sort.Ints(idx)
	valid := make([]string, len(idx))
	for k, i := range idx {
		valid[k] = strconv.Itoa(i)
	}
	if len(valid) == 0 {
		return fmt.Errorf("OST index %d: the file system has no OSTs", index)
	}
	return fmt.Errorf("OST index %d is not in the file system: valid indexes are %s", index, strings.Join(valid, ", "))
}

// checkStripes refuses a new file (ino) that got fewer stripes than its
// layout l asks (asked says where the count comes from), which the MDS
// does when OSTs are down or full: as Lustre fails a create whose stripe
// count was given rather than defaulted, a put neither halves a file's
// bandwidth nor moves all of it onto fewer OSTs without being told to. A
// count of -1 (every OST) and a directory's default are what the OSTs up
// can give.
func checkStripes(ctx context.Context, c *client.Client, l *pb.Layout, ino *pb.Inode, asked string) error {
	got, want, why, short := stripesShort(ctx, c, l, ino)
	if !short {
		return nil
	}
	if tooFewOSTs(why) {
		return fmt.Errorf("not written: it would have %s, not the %d %s, as %s; give -c %d, or -c -1 for every OST",
			plural(got, "stripe"), want, asked, why, got)
	}
	return fmt.Errorf("not written: it would have %s, not the %d %s, as %s; %sgive -c %d to accept %s",
		plural(got, "stripe"), want, asked, why, retryHint(why), got, plural(got, "stripe"))
}

const (
	onlyOSTs = "the file system has only "
	fullOSTs = " is full (check `nacre df`)"
)

// retryHint is what to do about stripesShort's reason, followed by ", or ".
func retryHint(why string) string {
	switch {
	case tooFewOSTs(why):
		return ""
	case strings.Contains(why, " full (check"):
		return "remove files to make room, or "
	}
	return "try again once the OSTs are up, or "
}

// tooFewOSTs says whether stripesShort's reason is that the file system
// has fewer OSTs than asked (waiting for OSTs to come up does not help).
func tooFewOSTs(why string) bool { return strings.HasPrefix(why, onlyOSTs) }

// stripesShort reports whether ino got fewer stripes than l asks, how
// many of how many, and why (the OSTs that are down, if any).
func stripesShort(ctx context.Context, c *client.Client, l *pb.Layout, ino *pb.Inode) (got, want int, why string, short bool) {
	if l == nil || l.StripeCount <= 0 || ino.Layout == nil {
		return 0, 0, "", false
	}
	want, got = int(l.StripeCount), len(ino.Layout.Objects)
	if got >= want {
		return got, want, "", false
	}
	why = "no more OSTs could take an object (check `nacre status` and `nacre df`)"
	if cfg, err := c.Config(ctx); err == nil {
		seen := map[uint32]bool{}
		osts := map[uint32]bool{}
		var down []string
		for _, t := range cfg.Targets {
			if t.Kind == pb.TargetKind_TARGET_OST {
				osts[t.Index] = true
			}
			if t.Kind == pb.TargetKind_TARGET_OST && t.State != "up" && !seen[t.Index] {
				seen[t.Index] = true
				down = append(down, fmt.Sprintf("OST%04x", t.Index))
			}
		}
		sort.Strings(down)
		// The MDS leaves out an OST that is full, as one that is down; the
		// MGS has its last figures.
		var full []string
		seen = map[uint32]bool{}
		for _, t := range cfg.Targets {
			st := t.Statfs
			if t.Kind == pb.TargetKind_TARGET_OST && t.State == "up" && !seen[t.Index] && st != nil && st.BytesTotal > 0 && st.BytesAvail < reserve.FullMargin(st.BytesTotal) {
				seen[t.Index] = true
				full = append(full, fmt.Sprintf("OST%04x", t.Index))
			}
		}
		sort.Strings(full)
		switch {
		case len(osts) < want:
			why = fmt.Sprintf(onlyOSTs+"%s (a file gets at most one stripe per OST)", plural(len(osts), "OST"))
		case len(down) == 0 && len(full) == 1:
			why = full[0] + fullOSTs
		case len(down) == 0 && len(full) > 1:
			why = strings.Join(full, ", ") + strings.Replace(fullOSTs, " is ", " are ", 1)
		case len(down) == 0:
		case len(down) == 1:
			why = down[0] + " is down (check `nacre status`)"
		default:
			why = strings.Join(down, ", ") + " are down (check `nacre status`)"
		}
	}
	return got, want, why, true
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
