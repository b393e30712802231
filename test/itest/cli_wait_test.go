package itest

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/test/testcluster"
	"nacre/test/testpty"
)

// Every wait speaks (issue 26): a command that waits for a server says,
// at a terminal, which server at which address it waits for, since and
// until when; its final error names the same. Into a pipe only the error
// goes.

// silentServer accepts connections and never answers, as a stopped
// process or another program on the port does.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

func TestCLISaysWhatItWaitsFor(t *testing.T) {
	bin := testcluster.Binary(t)
	addr := silentServer(t)

	// Into a pipe (checked below), at the same time.
	var stderr bytes.Buffer
	piped := exec.Command(bin, "ls", "--mgs", addr, "/")
	piped.Stderr = &stderr
	if err := piped.Start(); err != nil {
		t.Fatal(err)
	}

	// At a terminal: the wait, then the error, both naming the MGS.
	p := testpty.Open(t)
	cmd := exec.Command(bin, "ls", "--mgs", addr, "/")
	cmd.Stdout, cmd.Stderr = p.Term, p.Term
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.Term.Close()
	out := string(p.ReadAll(60 * time.Second))
	if err := cmd.Wait(); err == nil {
		t.Fatalf("ls of a silent MGS succeeded:\n%s", out)
	}
	for _, want := range []string{
		"waiting for the MGS at " + addr + " (connect)",
		"giving up at ",
		"cannot reach the MGS at " + addr + ": it accepts connections but does not answer (waited ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ls of a silent MGS at a terminal: no %q in\n%s", want, out)
		}
	}

	// Into a pipe: the error only.
	if err := piped.Wait(); err == nil {
		t.Fatal("ls of a silent MGS succeeded")
	}
	if got := stderr.String(); strings.Contains(got, "waiting for") || !strings.Contains(got, "cannot reach the MGS at "+addr) {
		t.Errorf("ls of a silent MGS into a pipe: %q; want the error alone", got)
	}
}

// TestClientTellsWhichMDTItWaitsFor: a client whose MDT is down tells its
// OnWait which MDT at which address it waits for, from the first second
// on, and gives up naming it.
func TestClientTellsWhichMDTItWaitsFor(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	mdtAddr := targetOf(t, cl, "mdt").Addr
	var mu sync.Mutex
	var waits []client.Wait
	c, err := client.New(context.Background(), client.Config{MGS: cl.MGS, Timeout: 4 * time.Second, OnWait: func(w client.Wait) {
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, w)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl.Kill("mdt0", syscall.SIGKILL)
	start := time.Now()
	_, err = c.Getattr(context.Background(), fid.Root)
	var down *client.MDTDownError
	if !errors.As(err, &down) || down.MDT != 0 {
		t.Fatalf("getattr with the MDT down: %v, want an MDTDownError naming MDT0000", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) == 0 {
		t.Fatal("no wait told while the MDT was down for 4 s")
	}
	w := waits[0]
	if w.Server != "MDT0000" || !strings.Contains(mdtAddr, w.Addr) || w.Addr == "" {
		t.Fatalf("told %+v; want MDT0000 at %s", w, mdtAddr)
	}
	if w.Since.Before(start.Add(-time.Second)) || w.Until.Sub(w.Since) < 3*time.Second || !strings.Contains(w.String(), "giving up at") {
		t.Fatalf("told %+v (%s); want since the call began, until its timeout", w, w)
	}
	// The first after a second, then every 5 s: once or twice in 4 s.
	if len(waits) > 2 {
		t.Fatalf("told %d times in 4 s; want a notice a second in, then one every 5 s", len(waits))
	}
}
