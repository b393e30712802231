package mds

import (
	"context"
	"crypto/x509"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/grpcx"
	"nacre/internal/nodemap"
	"nacre/internal/pki"
)

// The nodemaps (internal/nodemap, Lustre's nodemap) as the MDS applies
// them: the metadata service that clients reach (gRPC's MDS and
// OpenFiles, and the metadata RPC) is Served, which maps the credentials
// of every request by the nodemap of the certificate it came with,
// before the request reaches the handlers and their permission checks,
// and maps back the owners and groups of the inodes (and the ids of the
// ACLs) it returns. The MDS reads the nodemaps from the MGS with the rest
// of its configuration, every second (maintain.go): a change takes effect
// within about a second of the MGS applying it. With TLS, until it has
// read them once, it answers Unavailable (clients retry), so that no
// request is served unmapped after a start. Without TLS nothing is
// mapped: no peer has a certificate.

// nodemaps holds the nodemaps last read from the MGS (nil: none read).
type nodemaps struct {
	set  atomic.Pointer[nodemap.Set]
	list []*pb.Nodemap // what set was made from (under Server.mu)
}

// setNodemaps installs the nodemaps the MGS lists, logging a change
// (callers hold s.mu).
func (s *Server) setNodemaps(list []*pb.Nodemap) {
	nm := &s.nodemaps
	if nm.set.Load() != nil && slices.EqualFunc(nm.list, list, func(a, b *pb.Nodemap) bool { return proto.Equal(a, b) }) {
		return
	}
	first := nm.set.Load() == nil
	nm.list = list
	nm.set.Store(nodemap.NewSet(list))
	if first && len(list) == 0 {
		return
	}
	clients := make([]string, len(list))
	for i, e := range list {
		clients[i] = e.Client
	}
	s.log.Info("nodemaps in effect", "clients", clients)
}

// peerCert is the certificate of the peer a request came from: in the
// context by the metadata RPC (pki.PeerOf), or gRPC's.
func peerCert(ctx context.Context) *x509.Certificate {
	if c := pki.PeerOf(ctx); c != nil {
		return c
	}
	return grpcx.PeerCert(ctx)
}

// idmap is the nodemap of the peer of ctx (nil: ids used as sent).
func (s *Server) idmap(ctx context.Context) (*nodemap.Map, error) {
	if s.tls == nil {
		return nil, nil
	}
	set := s.nodemaps.set.Load()
	if set == nil {
		return nil, errno.Errorf(errno.Unavailable, "%s has not read the nodemaps from the MGS yet; retry", s.id.Label())
	}
	return set.For(peerCert(ctx)), nil
}

// Served is the metadata service as clients reach it: every request
// through the nodemap of its peer (above).
func (s *Server) Served() *Served { return &Served{s: s} }

// Served is Server's metadata service through the nodemaps. It embeds
// the Unsafe interface, not UnimplementedMDSServer, so that a method
// added to the service fails to build until it is served here.
type Served struct {
	nacregrpc.UnsafeMDSServer
	s *Server
}

// command maps a command's credentials and the ids it carries (a
// chown's owner, an ACL's entries) to the file system's; a non-nil
// reply is its refusal.
func command(m *nodemap.Map, cmd *pb.Command) *pb.Reply {
	cred, err := m.Cred(cmd.Cred)
	if err != nil {
		return &pb.Reply{Errno: errnoOf(err), Message: err.Error()}
	}
	cmd.Cred = cred
	switch o := cmd.Op.(type) {
	case *pb.Command_Setattr:
		if o.Setattr.Uid, o.Setattr.Gid, err = m.Owner(o.Setattr.Valid, o.Setattr.Uid, o.Setattr.Gid); err != nil {
			return &pb.Reply{Errno: errnoOf(err), Message: err.Error()}
		}
	case *pb.Command_Setxattr:
		if nodemap.IsACL(string(o.Setxattr.Name)) {
			if o.Setxattr.Value, err = m.ACLToFS(o.Setxattr.Value); err != nil {
				return &pb.Reply{Errno: errnoOf(err), Message: err.Error()}
			}
		}
	}
	return nil
}

// reply maps the inode of a reply back to the client's ids, in a copy
// if it changes (a reply may be the reply cache's).
func reply(m *nodemap.Map, r *pb.Reply) *pb.Reply {
	if r == nil || r.Inode == nil {
		return r
	}
	if ino := m.Inode(r.Inode); ino != r.Inode {
		r = proto.Clone(r).(*pb.Reply)
		r.Inode = ino
	}
	return r
}

func (v *Served) Hello(ctx context.Context, r *pb.HelloRequest) (*pb.HelloReply, error) {
	return v.s.Hello(ctx, r)
}

func (v *Served) Mutate(ctx context.Context, cmd *pb.Command) (*pb.Reply, error) {
	m, err := v.s.idmap(ctx)
	if err != nil {
		return nil, err
	}
	if m != nil {
		if r := command(m, cmd); r != nil {
			return r, nil
		}
		// A client under a nodemap is answered after the sync: the
		// entries a reply hands over are other clients' commands (names,
		// ids), not for a client trusted this little.
		cmd.Keeps = false
	}
	r, err := v.s.Mutate(ctx, cmd)
	return reply(m, r), err
}

func (v *Served) Lookup(ctx context.Context, r *pb.LookupRequest) (*pb.Reply, error) {
	m, err := v.s.idmap(ctx)
	if err != nil {
		return nil, err
	}
	if r.Cred, err = m.Cred(r.Cred); err != nil {
		return &pb.Reply{Errno: errnoOf(err), Message: err.Error()}, nil
	}
	out, err := v.s.Lookup(ctx, r)
	return reply(m, out), err
}

func (v *Served) Getattr(ctx context.Context, r *pb.GetattrRequest) (*pb.Reply, error) {
	m, err := v.s.idmap(ctx)
	if err != nil {
		return nil, err
	}
	out, err := v.s.Getattr(ctx, r)
	return reply(m, out), err
}

func (v *Served) Readdir(ctx context.Context, r *pb.ReaddirRequest) (*pb.ReaddirReply, error) {
	m, err := v.s.idmap(ctx)
	if err != nil {
		return nil, err
	}
	if r.Cred, err = m.Cred(r.Cred); err != nil {
		return &pb.ReaddirReply{Errno: errnoOf(err)}, nil
	}
	out, err := v.s.Readdir(ctx, r)
	if out != nil && m != nil {
		for _, e := range out.Entries { // made for this reply
			e.Inode = m.Inode(e.Inode)
		}
	}
	return out, err
}

func (v *Served) Getxattr(ctx context.Context, r *pb.XattrRequest) (*pb.XattrReply, error) {
	m, err := v.s.idmap(ctx)
	if err != nil {
		return nil, err
	}
	if r.Cred, err = m.Cred(r.Cred); err != nil {
		return &pb.XattrReply{Errno: errnoOf(err)}, nil
	}
	out, err := v.s.Getxattr(ctx, r)
	if out != nil && out.Errno == 0 && m != nil && nodemap.IsACL(string(r.Name)) {
		out.Value = m.ACLToClient(out.Value)
	}
	return out, err
}

func (v *Served) Listxattr(ctx context.Context, r *pb.XattrRequest) (*pb.XattrReply, error) {
	m, err := v.s.idmap(ctx)
	if err != nil {
		return nil, err
	}
	if r.Cred, err = m.Cred(r.Cred); err != nil {
		return &pb.XattrReply{Errno: errnoOf(err)}, nil
	}
	return v.s.Listxattr(ctx, r)
}

func (v *Served) Fid2Path(ctx context.Context, r *pb.Fid2PathRequest) (*pb.Fid2PathReply, error) {
	m, err := v.s.idmap(ctx)
	if err != nil {
		return nil, err
	}
	// No cred is root's, which a nodemap may squash.
	if r.Cred, err = m.Cred(r.Cred); err != nil {
		return &pb.Fid2PathReply{Errno: errnoOf(err)}, nil
	}
	return v.s.Fid2Path(ctx, r)
}

func (v *Served) Statfs(ctx context.Context, r *pb.StatfsRequest) (*pb.StatfsReply, error) {
	return v.s.Statfs(ctx, r)
}

func (v *Served) Sync(ctx context.Context, r *pb.SyncRequest) (*pb.SyncReply, error) {
	return v.s.Sync(ctx, r)
}

// Replay takes the log entries a client kept (durability.go). They are
// commands as the leader proposed them, credentials mapped already, and
// the MDS does not authenticate them: from a client under a nodemap it
// takes only the entries the client could have sent itself, its own with
// credentials its nodemap gives, so that a squashed root cannot make
// itself root by giving back a command it wrote. The other entries it
// holds are other clients', which give them back themselves.
func (v *Served) Replay(ctx context.Context, r *pb.ReplayRequest) (*pb.ReplayReply, error) {
	// Recovery follows a restart, maybe before the nodemaps are read: a
	// client does not give its entries twice, so this waits for them.
	m, err := v.s.idmap(ctx)
	for deadline := time.Now().Add(10 * time.Second); errno.CodeOf(err) == errno.Unavailable && time.Now().Before(deadline); {
		if sleepCtx(ctx, 50*time.Millisecond) != nil {
			break
		}
		m, err = v.s.idmap(ctx)
	}
	if err != nil {
		return nil, err
	}
	if m != nil {
		r.Commands = v.s.ownEntries(m, r)
	}
	return v.s.Replay(ctx, r)
}

// ownEntries are the entries of r that its client could have sent
// through nodemap m: its own commands, of a kind clients send, with
// credentials its nodemap gives. Those of its own that are not (forged,
// or the nodemap changed since) are logged.
func (s *Server) ownEntries(m *nodemap.Map, r *pb.ReplayRequest) []*pb.LoggedCommand {
	var out []*pb.LoggedCommand
	refused := 0
	for _, e := range r.Commands {
		cmd := &pb.Command{}
		switch {
		case proto.Unmarshal(e.Command, cmd) != nil || cmd.ClientId != r.ClientId:
		case !clientOp(cmd) || !m.Gives(cmd.Cred):
			refused++
		default:
			out = append(out, e)
		}
	}
	if refused > 0 {
		s.log.Warn("recovery: a client under a nodemap gave back changes with credentials its nodemap does not give; left out",
			"client", r.ClientId, "nodemap", m.Nodemap().Client, "left_out", refused, "taken", len(out))
	}
	return out
}

// clientOp reports whether a command is of a kind clients send (MDS and
// OpenFiles Mutate), not one the MDS proposes itself.
func clientOp(cmd *pb.Command) bool {
	switch cmd.Op.(type) {
	case *pb.Command_Create, *pb.Command_Link, *pb.Command_Unlink, *pb.Command_Rename, *pb.Command_Setattr,
		*pb.Command_Setxattr, *pb.Command_Removexattr, *pb.Command_SetLayout,
		*pb.Command_OpenUnlink, *pb.Command_OpenRename, *pb.Command_Tmpfile, *pb.Command_OrphanRelease:
		return true
	}
	return false
}

// Opens is OpenFiles.Opens, over the metadata RPC too.
func (v *Served) Opens(ctx context.Context, r *pb.OpensRequest) (*pb.OpensReply, error) {
	return opens(ctx, v.s, r, v.s.Opens)
}

func opens(ctx context.Context, s *Server, r *pb.OpensRequest, h func(context.Context, *pb.OpensRequest) (*pb.OpensReply, error)) (*pb.OpensReply, error) {
	m, err := s.idmap(ctx)
	if err != nil {
		return nil, err
	}
	out, err := h(ctx, r)
	if out != nil && m != nil {
		for i, ino := range out.Inodes { // a slice made for this reply
			out.Inodes[i] = m.Inode(ino)
		}
	}
	return out, err
}

// servedOpenFiles is the OpenFiles service through the nodemaps (Unsafe:
// as Served).
type servedOpenFiles struct {
	nacregrpc.UnsafeOpenFilesServer
	o *openFiles
}

func (v servedOpenFiles) Mutate(ctx context.Context, cmd *pb.Command) (*pb.Reply, error) {
	m, err := v.o.s.idmap(ctx)
	if err != nil {
		return nil, err
	}
	if m != nil {
		if r := command(m, cmd); r != nil {
			return r, nil
		}
	}
	r, err := v.o.Mutate(ctx, cmd)
	return reply(m, r), err
}

func (v servedOpenFiles) Opens(ctx context.Context, r *pb.OpensRequest) (*pb.OpensReply, error) {
	return opens(ctx, v.o.s, r, v.o.Opens)
}
