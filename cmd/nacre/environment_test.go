package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"nacre/internal/lfsck"
	"nacre/internal/mds"
	"nacre/internal/server"
)

func envOf(m map[string]string) environ { return func(k string) string { return m[k] } }

// TestServerOptionsComeFromTheEnvironment: each server knob a variable
// sets reaches its option, and with none set every option is its default
// (the integration tests set these variables on the servers they start).
func TestServerOptionsComeFromTheEnvironment(t *testing.T) {
	set := map[string]string{
		"GOGC":                        "100",
		"NACRE_RAFT_VOTE_WHILE_EMPTY": "1",
		"NACRE_RAFT_KEEP_ENTRIES":     "300",
		"NACRE_RAFT_NO_LEASE":         "1",
		"NACRE_ORPHAN_GRACE":          "1s",
		"NACRE_OPEN_GRACE":            "0s",
		"NACRE_READ_BARRIER_TIMEOUT":  "250ms",
		"NACRE_TEST_SEQ_GRANT":        "1/100000",
		"NACRE_LFSCK_NO_AUTO":         "1",
		"NACRE_LFSCK_NICE":            "19",
		"NACRE_LFSCK_BUSY_DUTY":       "0.2",
		"NACRE_LFSCK_SUMMARIES":       "0",
		"NACRE_FAULTS":                "lfsck.scan.object=delay:100ms",
		"NACRE_MAX_CONNS_PER_PEER":    "-1",
		"NACRE_COMMIT_WINDOW":         "0",
		"NACRE_RECOVERY_WINDOW":       "3s",
		"NACRE_BOOT_ID":               "boot-2",
	}
	want := server.Options{
		Raft: server.RaftOptions{VoteWhileEmpty: true, KeepEntries: 300, NoLease: true, CommitWindow: -1},
		MDS: mds.Options{OrphanGrace: time.Second, OpenGrace: -1, ReadBarrierTimeout: 250 * time.Millisecond,
			RecoveryWindow: 3 * time.Second, BootID: "boot-2",
			SeqGrant: "1/100000", NoCheckerResume: true, Faults: "lfsck.scan.object=delay:100ms",
			Checker: lfsck.Tuning{Nice: 19, BusyDuty: 0.2, NoSummaries: true}},
		MaxConnsPerPeer: -1,
	}
	if got := envOf(set).serverOptions(nil); !sameOptions(got, want) {
		t.Errorf("with every variable set:\n got %+v\nwant %+v", got, want)
	}
	if got := envOf(nil).serverOptions(nil); !sameOptions(got, server.Options{GCPercent: 400}) {
		t.Errorf("with none set: %+v, want the defaults (and GCPercent 400)", got)
	}
	bad := map[string]string{"NACRE_ORPHAN_GRACE": "soon", "NACRE_READ_BARRIER_TIMEOUT": "-1s", "NACRE_RAFT_KEEP_ENTRIES": "many", "NACRE_LFSCK_NICE": "x", "NACRE_MAX_CONNS_PER_PEER": "lots"}
	if got := envOf(bad).serverOptions(nil); !sameOptions(got, server.Options{GCPercent: 400}) {
		t.Errorf("with values that do not parse: %+v, want the defaults", got)
	}
}

// sameOptions compares options; a want without a boot id takes the
// kernel's (NACRE_BOOT_ID unset).
func sameOptions(a, b server.Options) bool {
	a.Log, b.Log = nil, nil
	if b.MDS.BootID == "" {
		if a.MDS.BootID == "" {
			return false // the kernel always has one
		}
		b.MDS.BootID = a.MDS.BootID
	}
	return a.GCPercent == b.GCPercent && a.Raft == b.Raft && a.MDS == b.MDS && a.MaxConnsPerPeer == b.MaxConnsPerPeer
}

// TestClientKnobsComeFromTheEnvironment: follower reads, a mount's OST
// timeout and the mount records' directory follow their variables.
func TestClientKnobsComeFromTheEnvironment(t *testing.T) {
	for _, c := range []struct {
		v    string
		want bool
	}{{"", false}, {"0", false}, {"1", true}, {"yes", true}} {
		if got := envOf(map[string]string{"NACRE_FOLLOWER_READS": c.v}).followerReads(); got != c.want {
			t.Errorf("NACRE_FOLLOWER_READS=%q: follower reads %v, want %v", c.v, got, c.want)
		}
	}
	if d, err := envOf(nil).ostDownAfter(); err != nil || d != mountOSTDownAfter {
		t.Errorf("NACRE_OST_DOWN_AFTER unset: %v %v, want %v", d, err, mountOSTDownAfter)
	}
	if d, err := envOf(map[string]string{"NACRE_OST_DOWN_AFTER": "2s"}).ostDownAfter(); err != nil || d != 2*time.Second {
		t.Errorf("NACRE_OST_DOWN_AFTER=2s: %v %v", d, err)
	}
	if _, err := envOf(map[string]string{"NACRE_OST_DOWN_AFTER": "0"}).ostDownAfter(); err == nil || !strings.Contains(err.Error(), "give a duration such as 30s") {
		t.Errorf("NACRE_OST_DOWN_AFTER=0: %v, want a refusal", err)
	}
	if got := envOf(map[string]string{"NACRE_LOG_LEVEL": "DEBUG"}).logLevel(); got != slog.LevelDebug {
		t.Errorf("NACRE_LOG_LEVEL=DEBUG: %v", got)
	}
}

// TestHelpEnvironmentListsEveryVariableRead: `nacre help environment`
// names every variable of the table, and reading one the table does not
// list is refused (so the help cannot miss one the binary reads).
func TestHelpEnvironmentListsEveryVariableRead(t *testing.T) {
	root := newRootIn(envOf(nil))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"help", "environment"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, v := range envVars {
		if !strings.Contains(out.String(), "\n  "+v.name+" (") {
			t.Errorf("nacre help environment does not list %s:\n%s", v.name, out.String())
		}
	}
	defer func() {
		if recover() == nil {
			t.Errorf("reading a variable the help does not list was not refused")
		}
	}()
	envOf(nil).get("NACRE_NOT_LISTED")
}
