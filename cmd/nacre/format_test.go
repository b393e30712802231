package main

import (
	"path/filepath"
	"strings"
	"testing"

	"nacre/internal/target"
)

// TestFormatAddressesFollowListen: a target formatted to be reached at a
// non-loopback address serves its data (or metadata requests) and metrics
// on that host too, unless told otherwise; a wildcard address, which
// would be advertised to clients as such, is refused.
func TestFormatAddressesFollowListen(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "ost0")
	if _, err := runNacre(t, "format", "--type", "ost", "--dir", dir, "--fsname", "x", "--listen", "127.0.0.31:7201", "--mgsnode", "127.0.0.1:7001"); err != nil {
		t.Fatal(err)
	}
	id, err := target.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if id.DataListen != "127.0.0.31:0" || id.MetricsListen != "127.0.0.31:0" {
		t.Fatalf("data %q, metrics %q: want both on 127.0.0.31", id.DataListen, id.MetricsListen)
	}
	dir = filepath.Join(tmp, "mdt0")
	if _, err := runNacre(t, "format", "--type", "mdt", "--dir", dir, "--fsname", "x", "--listen", "127.0.0.32:7101", "--data-listen", "127.0.0.32:7102", "--mgsnode", "127.0.0.1:7001"); err != nil {
		t.Fatal(err)
	}
	if id, err = target.Load(dir); err != nil || id.DataListen != "127.0.0.32:7102" {
		t.Fatalf("data %q (%v): want the one given", id.DataListen, err)
	}
	for _, flag := range []string{"--listen", "--data-listen"} {
		for _, a := range []string{"0.0.0.0:7301", "[::]:7301", ":7301"} {
			_, err := runNacre(t, "format", "--type", "ost", "--dir", filepath.Join(tmp, "w"+flag), "--fsname", "x", "--index", "1",
				"--mgsnode", "127.0.0.1:7001", flag, a)
			if err == nil || !strings.Contains(err.Error(), "cannot be advertised") {
				t.Errorf("format %s %s: %v, want a refusal naming the wildcard", flag, a, err)
			}
		}
	}
}

// TestFormatMakesAnMDTOfAnyIndex: `nacre format --type mdt --index N`
// makes MDT N (a file system's second MDT and on), single or a replica of
// its own group, and says so by its name.
func TestFormatMakesAnMDTOfAnyIndex(t *testing.T) {
	tmp := t.TempDir()
	for _, c := range []struct {
		args  []string
		index uint32
		label string
	}{
		{[]string{"--index", "1"}, 1, "MDT0001"},
		{[]string{"--index", "12"}, 12, "MDT000c"},
		{[]string{"--index", "2", "--replica-id", "1", "--listen", "127.0.0.1:7401", "--peers", "1=127.0.0.1:7401,2=127.0.0.1:7402,3=127.0.0.1:7403"}, 2, "MDT0002"},
	} {
		dir := filepath.Join(tmp, c.label)
		out, err := runNacre(t, append([]string{"format", "--type", "mdt", "--dir", dir, "--fsname", "x", "--mgsnode", "127.0.0.1:7001"}, c.args...)...)
		if err != nil {
			t.Fatalf("format %v: %v\n%s", c.args, err, out)
		}
		id, err := target.Load(dir)
		if err != nil || id.Kind != target.MDT || id.Index != c.index || id.Label() != c.label {
			t.Errorf("format %v: %+v (%v), want %s", c.args, id, err, c.label)
		}
		if !strings.Contains(out, "formatted "+c.label) {
			t.Errorf("format %v printed %q, want it to name %s", c.args, out, c.label)
		}
	}
	if _, err := runNacre(t, "format", "--type", "mdt", "--dir", filepath.Join(tmp, "big"), "--mgsnode", "127.0.0.1:7001", "--index", "65536"); err == nil || !strings.Contains(err.Error(), "from 0 to 65535") {
		t.Errorf("format --index 65536: %v, want the range", err)
	}
}
