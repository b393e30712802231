package grpcx

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/netguard"
	"nacre/internal/pki"
	"nacre/test/testlog"
	"nacre/test/testpki"
)

type faultStub struct {
	nacregrpc.UnimplementedFaultServer
}

func (faultStub) List(context.Context, *pb.FaultListRequest) (*pb.FaultListReply, error) {
	return &pb.FaultListReply{}, nil
}

func TestTLSAndRoles(t *testing.T) {
	caDir := filepath.Join(t.TempDir(), "ca")
	node := testpki.Issue(t, caDir, "MGS", pki.RoleNode)
	admin := testpki.Issue(t, caDir, "root", pki.RoleAdmin)
	alice := testpki.Issue(t, caDir, "alice", pki.RoleClient)
	var logs testlog.Buffer
	w := netguard.NewWarner(slog.New(slog.NewTextHandler(&logs, nil)), time.Nanosecond)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := NewServer(nil, WithServerTLS(node, w))
	nacregrpc.RegisterMGSServer(g, mgsStub{})
	nacregrpc.RegisterFaultServer(g, faultStub{})
	go g.Serve(ln)
	defer g.Stop()
	addr := ln.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	call := func(c *pki.Creds) (helloErr, faultErr, registerErr error) {
		cc, err := Dial(addr, WithTLS(c))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		defer ccancel()
		_, helloErr = nacregrpc.NewMGSClient(cc).Hello(cctx, &pb.HelloRequest{})
		_, faultErr = nacregrpc.NewFaultClient(cc).List(cctx, &pb.FaultListRequest{})
		_, registerErr = nacregrpc.NewMGSClient(cc).Register(cctx, &pb.TargetInfo{})
		return
	}
	if h, f, r := call(node); h != nil || f != nil || errno.CodeOf(r) != errno.Unimplemented {
		t.Fatalf("node: hello %v, fault %v, register %v (want Unimplemented from the stub)", h, f, r)
	}
	if h, f, _ := call(admin); h != nil || f != nil {
		t.Fatalf("admin: hello %v, fault %v", h, f)
	}
	if _, _, r := call(admin); errno.CodeOf(r) != errno.PermissionDenied {
		t.Fatalf("admin registering a target: %v, want PermissionDenied", r)
	}
	h, f, _ := call(alice)
	if h != nil {
		t.Fatalf("client hello: %v", h)
	}
	if errno.CodeOf(f) != errno.PermissionDenied || !strings.Contains(f.Error(), "nacre cert add --client NAME --admin") || !strings.Contains(f.Error(), `"alice"`) {
		t.Fatalf("client calling an admin service: %v", f)
	}
	// No certificate at all: refused at the handshake, and logged.
	if h, _, _ := call(nil); h == nil {
		t.Fatal("a client without TLS was served")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "TLS handshake failed") && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	out := logs.String()
	for _, want := range []string{"TLS handshake failed", "remote=127.0.0.1:", "call refused", `alice`} {
		if !strings.Contains(out, want) {
			t.Errorf("the server's log lacks %q:\n%s", want, out)
		}
	}
}

func TestMethodRoles(t *testing.T) {
	for m, want := range map[string]pki.Role{
		nacregrpc.Raft_Send_FullMethodName:            pki.RoleNode,
		nacregrpc.MGS_Register_FullMethodName:         pki.RoleNode,
		nacregrpc.OSS_Precreate_FullMethodName:        pki.RoleNode,
		nacregrpc.Lfsck_Start_FullMethodName:          pki.RoleAdmin,
		nacregrpc.Fault_Inject_FullMethodName:         pki.RoleAdmin,
		nacregrpc.RaftAdmin_AddReplica_FullMethodName: pki.RoleAdmin,
		nacregrpc.MGS_Deregister_FullMethodName:       pki.RoleAdmin,
		nacregrpc.MGS_GetConfig_FullMethodName:        pki.RoleClient,
		nacregrpc.MDS_Mutate_FullMethodName:           pki.RoleClient,
		nacregrpc.LDLM_Lock_FullMethodName:            pki.RoleClient,
		nacregrpc.OSS_GetObjects_FullMethodName:       pki.RoleClient,
		nacregrpc.RaftAdmin_Members_FullMethodName:    pki.RoleClient,
		nacregrpc.OpenFiles_Mutate_FullMethodName:     pki.RoleClient,
		nacregrpc.OSS_FaultArm_FullMethodName:         pki.RoleAdmin,
		nacregrpc.OSS_LfsckDigest_FullMethodName:      pki.RoleAdmin,
		nacregrpc.MGS_Heartbeat_FullMethodName:        pki.RoleNode,
		nacregrpc.OSS_Destroy_FullMethodName:          pki.RoleNode,
		nacregrpc.Lfsck_Query_FullMethodName:          pki.RoleAdmin,
		nacregrpc.MGS_NodemapSet_FullMethodName:       pki.RoleAdmin,
		nacregrpc.MGS_NodemapRemove_FullMethodName:    pki.RoleAdmin,
		nacregrpc.MGS_NodemapList_FullMethodName:      pki.RoleAdmin,
	} {
		if got := methodRole(m); got != want {
			t.Errorf("%s needs %s, want %s", m, got, want)
		}
	}
}
