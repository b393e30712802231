package itest

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"nacre/test/testcluster"
)

// TestSetstripeWaitsForOpensElsewhere: `nacre setstripe` of an empty file
// that a mount has open is refused (EBUSY) while it stays open there, and
// the mount's writes read back. Before, the new layout went through: the
// mount wrote into the objects the old layout gave up (destroyed), its
// close recorded the size, and the file read back as zeros. A file the
// mount has just closed (its close reaches the MDS up to 5 s later,
// batched) gets its layout once the close arrives.
func TestSetstripeWaitsForOpensElsewhere(t *testing.T) {
	// Past a new leader's grace, in which it does not know the opens yet.
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2, Env: []string{"NACRE_OPEN_GRACE=100ms"}})
	m := mountFuse(t, cl)
	data := bytes.Repeat([]byte("written through the layout read at open\n"), 100)

	f, err := os.OpenFile(m.Path("open"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	start := time.Now()
	out, err := cl.Run("setstripe", "-c", "2", "/open")
	if err == nil || !strings.Contains(out, "open on another client") {
		t.Fatalf("setstripe of a file open on a mount: %v\n%s", err, out)
	}
	if took := time.Since(start); took < 5*time.Second {
		t.Fatalf("refused after %v: a close may still be on its way", took)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(m.Path("open")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file reads %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	if out, err := cl.Run("getstripe", "/open"); err != nil || !strings.Contains(out, "lmm_stripe_count:  1") {
		t.Fatalf("getstripe: %v\n%s", err, out)
	}

	// Just closed on the mount: the layout is set.
	if err := os.WriteFile(m.Path("closed"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := cl.Run("setstripe", "-c", "2", "/closed"); err != nil {
		t.Fatalf("setstripe of a file closed on the mount: %v\n%s", err, out)
	}
	if out, err := cl.Run("getstripe", "/closed"); err != nil || !strings.Contains(out, "lmm_stripe_count:  2") {
		t.Fatalf("getstripe: %v\n%s", err, out)
	}
	if err := os.WriteFile(m.Path("closed"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(m.Path("closed")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the relaid-out file reads %d bytes (%v), want %d", len(got), err, len(data))
	}
}
