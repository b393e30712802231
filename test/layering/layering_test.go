// Package layering tests the tiers of docs/architecture.md ("Code map"):
//
//	base → storage → replication → targets → servers → client → tools → cmd
//
// A package imports packages of its own tier or of tiers below it. Some
// stand on less (narrow): the client tier on the base tier alone, so that
// a client links neither the consensus library nor the storage engine, and
// the CLI on the client library, never on a server or a target; the
// protocols that exist to avoid gRPC do not link it.
package layering

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "nacre/"

type tier int

const (
	base tier = iota
	storage
	replication
	targets
	servers
	clientTier
	tools
	cmd
	tests
)

var tierNames = [...]string{"base", "storage", "replication", "targets", "servers", "client", "tools", "cmd", "test"}

func (t tier) String() string { return tierNames[t] }

// tiers places every package of the module. A new package fails the test
// until it is placed here (and in the code map of docs/architecture.md).
var tiers = map[string]tier{
	"api/nacrepb":           base,
	"api/nacregrpc":         base,
	"internal/acl":          base,
	"internal/bulk":         base,
	"internal/errno":        base,
	"internal/fault":        base,
	"internal/fid":          base,
	"internal/grpcx":        base,
	"internal/layout":       base,
	"internal/mdrpc":        base,
	"internal/objrec":       base,
	"internal/netguard":     base,
	"internal/nodemap":      base,
	"internal/obs":          base,
	"internal/pki":          base,
	"internal/ports":        base,
	"internal/version":      base,
	"internal/webui":        base,
	"internal/deploy":       base,
	"internal/kv":           storage,
	"internal/diskio":       storage,
	"internal/raftlog":      storage,
	"internal/reserve":      storage,
	"internal/target":       storage,
	"internal/target/proc":  base,
	"internal/cgroup":       base,
	"internal/mountinfo":    base,
	"internal/raftgroup":    replication,
	"internal/ldlm":         servers,
	"internal/lfsck":        targets,
	"internal/mdt":          targets,
	"internal/ost":          targets,
	"internal/mds":          servers,
	"internal/mgs":          servers,
	"internal/oss":          servers,
	"internal/server":       servers,
	"internal/client":       clientTier,
	"internal/fusefs":       clientTier,
	"internal/bench":        tools,
	"internal/cli":          tools,
	"internal/lfsck/admin":  tools,
	"internal/localcluster": tools,
	"cmd/nacre":             cmd,
}

// noGRPC are the packages that must not link gRPC, even indirectly.
var noGRPC = []string{"api/nacrepb", "internal/errno", "internal/mdrpc", "internal/bulk", "internal/fid", "internal/layout", "internal/objrec", "internal/pki", "internal/nodemap"}

// engines are the consensus library and the storage engine.
var engines = []string{"go.etcd.io/raft", "github.com/cockroachdb/pebble"}

// narrowRule says which tiers a package may import and which modules it
// must not link.
type narrowRule struct {
	tiers   []tier
	modules []string
	why     string
}

var clientRule = narrowRule{[]tier{base, clientTier}, engines, "the client tier stands on the base tier alone"}

// narrow holds the packages that stand on less than their tier allows.
// apart are pairs of packages that never import one another: the
// checker and the MDS share the OST's record through internal/objrec, not
// through the OST's store, and the two targets know nothing of each other.
var apart = [][2]string{
	{"internal/lfsck", "internal/ost"},
	{"internal/mds", "internal/ost"},
	{"internal/mdt", "internal/ost"},
	{"internal/oss", "internal/mdt"},
}

var narrow = map[string]narrowRule{
	"internal/client": clientRule,
	"internal/fusefs": clientRule,
	"internal/cli":    {[]tier{base, storage, clientTier, tools}, engines, "the CLI reaches servers through the client library"},
}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "nacre/...")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("go list: %v\n%s", err, errb.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(&out)
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages; is the test run inside the module?", len(pkgs))
	}
	return pkgs
}

// tierOf places a package: test/... is the test tier.
func tierOf(rel string) (tier, bool) {
	if strings.HasPrefix(rel, "test/") {
		return tests, true
	}
	t, ok := tiers[rel]
	return t, ok
}

// violations lists the imports of pkgs that go against the tiers.
func violations(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module)
		from, ok := tierOf(rel)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is in no tier: place it in test/layering's tiers and in docs/architecture.md's code map", rel))
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			irel := strings.TrimPrefix(imp, module)
			to, ok := tierOf(irel)
			if !ok {
				continue // reported as its own package
			}
			for _, pair := range apart {
				if (rel == pair[0] && irel == pair[1]) || (rel == pair[1] && irel == pair[0]) {
					bad = append(bad, fmt.Sprintf("%s imports %s: the two are kept apart", rel, irel))
				}
			}
			n, isNarrow := narrow[rel]
			switch {
			case to > from:
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s (%s): an import goes up the tiers", rel, from, irel, to))
			case isNarrow && !slices.Contains(n.tiers, to):
				bad = append(bad, fmt.Sprintf("%s (%s) imports %s (%s): %s", rel, from, irel, to, n.why))
			}
		}
		if n, ok := narrow[rel]; ok {
			for _, f := range n.modules {
				for _, d := range p.Deps {
					if strings.HasPrefix(d, f) {
						bad = append(bad, fmt.Sprintf("%s (%s) links %s: %s", rel, from, d, n.why))
						break
					}
				}
			}
		}
		for _, n := range noGRPC {
			if rel != n {
				continue
			}
			for _, d := range p.Deps {
				if strings.HasPrefix(d, "google.golang.org/grpc") {
					bad = append(bad, fmt.Sprintf("%s links %s: it must not link gRPC", rel, d))
					break
				}
			}
		}
	}
	sort.Strings(bad)
	return bad
}

func TestImportsFollowTheTiers(t *testing.T) {
	for _, v := range violations(listPackages(t)) {
		t.Error(v)
	}
}

// TestViolationsAreFound: the rules catch what they are for (a client
// that imports the consensus package, a CLI that imports a server, the
// checker that imports the OST, an import up the tiers, a package left
// out, a protocol that links gRPC).
func TestViolationsAreFound(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: "nacre/internal/client", Imports: []string{"nacre/internal/raftgroup"}, Deps: []string{"go.etcd.io/raft/v3"}},
		{ImportPath: "nacre/internal/kv", Imports: []string{"nacre/internal/mds"}},
		{ImportPath: "nacre/internal/newthing"},
		{ImportPath: "nacre/internal/mdrpc", Deps: []string{"google.golang.org/grpc"}},
		{ImportPath: "nacre/internal/cli", Imports: []string{"nacre/internal/client", "nacre/internal/errno", "nacre/internal/server"}},
		{ImportPath: "nacre/internal/lfsck", Imports: []string{"nacre/internal/mdt", "nacre/internal/ost"}},
	}
	got := violations(pkgs)
	want := []string{
		"internal/cli (tools) imports internal/server (servers): the CLI reaches servers",
		"internal/client (client) imports internal/raftgroup",
		"internal/client (client) links go.etcd.io/raft/v3",
		"internal/kv (storage) imports internal/mds (servers): an import goes up the tiers",
		"internal/lfsck imports internal/ost: the two are kept apart",
		"internal/mdrpc links google.golang.org/grpc",
		"internal/newthing is in no tier",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d: got %q, want it to start %q", i, got[i], want[i])
		}
	}
}
