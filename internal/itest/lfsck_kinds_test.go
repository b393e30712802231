package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"nacre/internal/fault"
	"nacre/internal/testcluster"
)

func needsFlags(k fault.Kind) []string {
	var out []string
	for _, f := range strings.Fields(k.Needs) {
		out = append(out, f)
	}
	return out
}

// TestLfsckEveryFaultKind drives every kind of damage through the real
// servers and the nacre binary: `nacre fault inject` damages one object;
// a dry run reports exactly it and changes no byte of any target's store;
// a real run repairs it; a second run finds nothing; the files read back
// with their data.
func TestLfsckEveryFaultKind(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()
	if r := lfsckRun(t, cl, "-r"); func() bool { f, _ := found(r); return f != 0 }() {
		t.Fatalf("a new file system is inconsistent: %s", summary(r))
	}
	out, err := cl.Run("fault", "list", "--json")
	var kinds []struct{ Kind, Component, Target string }
	if err != nil || json.Unmarshal([]byte(out), &kinds) != nil || len(kinds) != len(fault.Kinds) || kinds[0].Kind == "" || kinds[0].Target == "" {
		t.Fatalf("fault list --json: %v\n%s", err, out)
	}
	if out, err := cl.Run("lfsck", "status", "-t", "namespace"); err != nil || !strings.Contains(out, "status: completed") {
		t.Fatalf("lfsck status: %v\n%s", err, out)
	}
	for i, k := range fault.Kinds {
		k := k
		t.Run(k.Kind, func(t *testing.T) {
			tr := buildLTree(t, ctx, c, fmt.Sprintf("k%02d", i))
			if out, err := cl.Run("fault", "inject", k.Kind, "--path", tr.target(k)); err != nil {
				t.Fatalf("inject: %v\n%s", err, out)
			}
			want := uint64(1)
			if k.Count == "stripes" {
				want = 2
			}
			flags := needsFlags(k)
			before := quiesce(t, cl)
			dry := lfsckRun(t, cl, append([]string{"-r", "-n"}, flags...)...)
			if after := storeDigests(t, cl); after != before {
				t.Fatalf("the dry run changed a store:\n%s\n%s", before, after)
			}
			if f, r := found(dry); f != want || r != 0 || dry.Components[k.Component].Counters[k.Counter].Inconsistent != want {
				t.Fatalf("dry run: want %d %s.%s, got %s", want, k.Component, k.Counter, summary(dry))
			}
			real := lfsckRun(t, cl, append([]string{"-r"}, flags...)...)
			if got := real.Components[k.Component].Counters[k.Counter]; got.Repaired != want {
				t.Fatalf("real run: want %d %s.%s repaired, got %s", want, k.Component, k.Counter, summary(real))
			}
			if f, r := found(real); f != want || r != want {
				t.Fatalf("real run: %s", summary(real))
			}
			again := lfsckRun(t, cl, append([]string{"-r"}, flags...)...)
			if f, _ := found(again); f != 0 {
				t.Fatalf("second run: %s", summary(again))
			}
			mustRead(t, ctx, c, tr.path+"/f2", tr.data2)
			switch k.Data {
			case "intact":
				if k.Target == "file" && k.Kind != "nlink_less" {
					mustRead(t, ctx, c, tr.path+"/f1", tr.data1)
				}
			case "lost+found":
				out, err := cl.Run("ls", "/.nacre/lost+found")
				if err != nil || strings.TrimSpace(out) == "" {
					t.Fatalf("lost+found: %v %q", err, out)
				}
				if k.Kind == "lost_mdt_object" || k.Kind == "orphan" {
					name := ""
					for _, n := range strings.Fields(out) {
						if strings.HasPrefix(n, tr.f1.String()) {
							name = n
						}
					}
					if name == "" {
						t.Fatalf("no %s-* in lost+found: %s", tr.f1, out)
					}
					mustRead(t, ctx, c, "/.nacre/lost+found/"+name, tr.data1)
				}
				if k.Kind == "lost_parent" {
					for _, n := range strings.Fields(out) {
						if strings.HasPrefix(n, tr.e.String()) {
							mustRead(t, ctx, c, "/.nacre/lost+found/"+n+"/only", tr.dataOnly)
						}
					}
				}
			}
		})
	}
}
