package server

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"nacre/internal/target"
)

func TestBindingNeedsTLSOffLoopback(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	local := target.Identity{Fsname: "fs", Kind: target.OST, Listen: "127.0.0.1:7001", DataListen: "127.0.0.1:7002"}
	if err := checkBinding(local, false, false, log); err != nil {
		t.Fatalf("loopback without TLS: %v", err)
	}
	open := local
	open.DataListen = "192.0.2.10:7002"
	err := checkBinding(open, false, false, log)
	if err == nil || !strings.Contains(err.Error(), "192.0.2.10:7002") || !strings.Contains(err.Error(), "--tls-dir") || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("a non-loopback address without TLS: %v, want a refusal naming the address and both ways out", err)
	}
	if err := checkBinding(open, true, false, log); err != nil {
		t.Fatalf("with TLS: %v", err)
	}
	if logs.Len() != 0 {
		t.Fatalf("logged without cause: %s", logs.String())
	}
	if err := checkBinding(open, false, true, log); err != nil || !strings.Contains(logs.String(), "--insecure") {
		t.Fatalf("--insecure: %v, log %q", err, logs.String())
	}
	for a, want := range map[string]bool{"127.0.0.1:1": true, "127.0.0.9:1": true, "[::1]:1": true, "localhost:1": true, "10.0.0.1:1": false, "example.com:1": false} {
		if loopback(a) != want {
			t.Errorf("loopback(%q) = %v", a, !want)
		}
	}
}
