package cli

import (
	"os/exec"
	"strings"
	"testing"
)

// TestCLIDoesNotLinkTheServers: the commands reach the cluster through
// the client library and RPCs only: cli links no server, no target
// store and no local-cluster process management (those commands take a
// ReplicaHost, or live in localcluster and internal/lfsck/admin).
func TestCLIDoesNotLinkTheServers(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "nacre/internal/cli").Output()
	if err != nil {
		t.Skipf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	for _, bad := range []string{"nacre/internal/server", "nacre/internal/localcluster", "nacre/internal/lfsck/admin",
		"nacre/internal/target", "nacre/internal/mdt", "nacre/internal/mds", "nacre/internal/mgs", "nacre/internal/oss", "nacre/internal/ost"} {
		for _, d := range deps {
			if d == bad {
				t.Errorf("internal/cli links %s", bad)
			}
		}
	}
}
