package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/nodemap"
)

// `nacre nodemap`: the nodemaps of the MGS's configuration
// (internal/nodemap, internal/mgs), which the MDSs apply to the requests
// of each client certificate.

// NodemapRow is one nodemap in `nacre nodemap --json`.
type NodemapRow struct {
	// Client is the certificate's common name; "*" is every certificate
	// of the client role without a nodemap of its own.
	Client string `json:"client"`
	// SquashRoot: uid 0 and gid 0 become the squash ids (Lustre's
	// admin=0).
	SquashRoot bool   `json:"squash_root"`
	SquashUID  uint32 `json:"squash_uid"`
	SquashGID  uint32 `json:"squash_gid"`
	// Trusted: ids other than 0 are used as sent; else mapped by UIDMap
	// and GIDMap, unmapped ones squashed (or refused: DenyUnknown).
	Trusted     bool     `json:"trusted"`
	UIDMap      []IDPair `json:"uid_map"`
	GIDMap      []IDPair `json:"gid_map"`
	DenyUnknown bool     `json:"deny_unknown"`
}

// IDPair maps a client's id to the file system's.
type IDPair struct {
	Client uint32 `json:"client"`
	FS     uint32 `json:"fs"`
}

func nodemapRow(e *pb.Nodemap) NodemapRow {
	r := NodemapRow{Client: e.Client, SquashRoot: e.SquashRoot, SquashUID: e.SquashUid, SquashGID: e.SquashGid,
		Trusted: e.Trusted, DenyUnknown: e.DenyUnknown, UIDMap: []IDPair{}, GIDMap: []IDPair{}}
	for _, p := range e.UidMap {
		r.UIDMap = append(r.UIDMap, IDPair{p.Client, p.Fs})
	}
	for _, p := range e.GidMap {
		r.GIDMap = append(r.GIDMap, IDPair{p.Client, p.Fs})
	}
	return r
}

// nodemapMGS calls the MGS's nodemap service.
func nodemapMGS(ctx context.Context, e Env, call func(ctx context.Context, c nacregrpc.MGSClient) (*pb.NodemapReply, error)) (*pb.NodemapReply, error) {
	if e.MGS == "" {
		return nil, fmt.Errorf("no MGS address: pass --mgs HOST:PORT, --dir CLUSTER_DIR, or set NACRE_MGS")
	}
	if err := client.CheckMGSAddr(e.MGS); err != nil {
		return nil, err
	}
	cc, err := Dial(e.MGS, e.TLS)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := call(ctx, nacregrpc.NewMGSClient(cc))
	switch errno.CodeOf(err) {
	case errno.OK, errno.FailedPrecondition, errno.PermissionDenied, errno.InvalidArgument, errno.NotFound:
		return r, err // the MGS's own words
	case errno.Unimplemented:
		return nil, client.NotAnMGS(e.MGS, err)
	}
	return nil, client.Unreachable("MGS at "+e.MGS+" does not answer", err, "is the cluster up?")
}

// NodemapList prints every nodemap.
func NodemapList(ctx context.Context, e Env, asJSON bool) error {
	r, err := nodemapMGS(ctx, e, func(ctx context.Context, c nacregrpc.MGSClient) (*pb.NodemapReply, error) {
		return c.NodemapList(ctx, &pb.NodemapListRequest{})
	})
	if err != nil {
		return err
	}
	return printNodemaps(e, r.Nodemaps, asJSON)
}

func printNodemaps(e Env, es []*pb.Nodemap, asJSON bool) error {
	if asJSON {
		rows := make([]NodemapRow, 0, len(es))
		for _, n := range es {
			rows = append(rows, nodemapRow(n))
		}
		return JSON(e.Out, rows)
	}
	if len(es) == 0 {
		fmt.Fprintln(e.Out, "no nodemaps: every client's ids are used as sent (nacre nodemap set --client NAME adds one)")
		return nil
	}
	t := newTable(e.Out)
	t.AppendHeader([]any{"CLIENT", "ROOT", "OTHER IDS", "UNMAPPED IDS"})
	for _, n := range es {
		client := n.Client
		if client == nodemap.Default {
			client = "* (every other client certificate)"
		}
		squash := fmt.Sprintf("%d:%d", n.SquashUid, n.SquashGid)
		root := "root"
		if n.SquashRoot {
			root = "squashed to " + squash
		}
		ids, unmapped := "as sent (trusted)", "-"
		if !n.Trusted {
			var m []string
			if len(n.UidMap) > 0 {
				m = append(m, "uid "+nodemap.FormatIDMap(n.UidMap))
			}
			if len(n.GidMap) > 0 {
				m = append(m, "gid "+nodemap.FormatIDMap(n.GidMap))
			}
			ids = "mapped: " + strings.Join(m, "; ")
			if len(m) == 0 {
				ids = "none mapped"
			}
			unmapped = "squashed to " + squash
			if n.DenyUnknown {
				unmapped = "refused"
			}
		}
		t.AppendRow([]any{client, root, ids, unmapped})
	}
	t.Render()
	return nil
}

// NodemapSetOptions are the flags of `nacre nodemap set`.
type NodemapSetOptions struct {
	Client     string
	SquashRoot bool
	// SquashUID and SquashGID: nil for the default (nodemap.SquashID).
	SquashUID, SquashGID *uint32
	Trusted              bool
	UIDMap, GIDMap       string // CLIENT:FS,...; "" for none
	DenyUnknown          bool
	JSON                 bool
}

// Nodemap is the nodemap the options describe, checked.
func (o NodemapSetOptions) Nodemap() (*pb.Nodemap, error) {
	n := &pb.Nodemap{Client: o.Client, SquashRoot: o.SquashRoot, Trusted: o.Trusted, DenyUnknown: o.DenyUnknown}
	for _, id := range []struct {
		flag string
		v    *uint32
		to   *uint32
	}{{"--squash-uid", o.SquashUID, &n.SquashUid}, {"--squash-gid", o.SquashGID, &n.SquashGid}} {
		if id.v == nil {
			continue
		}
		if *id.v == 0 {
			return nil, fmt.Errorf("%s 0 would squash to root: give an unprivileged id (the default is %d)", id.flag, nodemap.SquashID)
		}
		*id.to = *id.v
	}
	var err error
	if o.UIDMap != "" {
		if n.UidMap, err = nodemap.ParseIDMap("uid", o.UIDMap); err != nil {
			return nil, fmt.Errorf("--uid-map: %w", err)
		}
	}
	if o.GIDMap != "" {
		if n.GidMap, err = nodemap.ParseIDMap("gid", o.GIDMap); err != nil {
			return nil, fmt.Errorf("--gid-map: %w", err)
		}
	}
	if o.Trusted && (n.UidMap != nil || n.GidMap != nil) {
		return nil, fmt.Errorf("--trusted uses ids as sent and --uid-map/--gid-map map them: give one or the other")
	}
	if o.Trusted && o.DenyUnknown {
		return nil, fmt.Errorf("--deny-unknown refuses the ids no map names, and --trusted uses every id as sent: give one or the other")
	}
	nodemap.Normalize(n)
	if err := nodemap.Check(n); err != nil {
		return nil, err
	}
	return n, nil
}

// NodemapSet adds or replaces the nodemap of a client certificate.
func NodemapSet(ctx context.Context, e Env, o NodemapSetOptions) error {
	n, err := o.Nodemap()
	if err != nil {
		return err
	}
	r, err := nodemapMGS(ctx, e, func(ctx context.Context, c nacregrpc.MGSClient) (*pb.NodemapReply, error) {
		return c.NodemapSet(ctx, n)
	})
	if err != nil {
		return err
	}
	if !n.Trusted && len(n.UidMap) == 0 && len(n.GidMap) == 0 {
		fmt.Fprintf(e.Stderr(), "nacre: note: the ids of %s are neither trusted (--trusted) nor mapped (--uid-map, --gid-map): every uid and gid but root's is %d:%d to the MDSs\n",
			n.Client, n.SquashUid, n.SquashGid)
	}
	if !o.JSON {
		fmt.Fprintf(e.Out, "nodemap of %s set; the MDSs apply it within a few seconds\n", n.Client)
	}
	return printNodemaps(e, r.Nodemaps, o.JSON)
}

// NodemapRemove removes the nodemap of a client certificate.
func NodemapRemove(ctx context.Context, e Env, name string, asJSON bool) error {
	if err := nodemap.CheckName(name); err != nil {
		return fmt.Errorf("--client: %w", err)
	}
	r, err := nodemapMGS(ctx, e, func(ctx context.Context, c nacregrpc.MGSClient) (*pb.NodemapReply, error) {
		return c.NodemapRemove(ctx, &pb.NodemapRemoveRequest{Client: name})
	})
	if err != nil {
		return err
	}
	if !asJSON {
		fmt.Fprintf(e.Out, "nodemap of %s removed; the MDSs apply the change within a few seconds\n", name)
	}
	return printNodemaps(e, r.Nodemaps, asJSON)
}
