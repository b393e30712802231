package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"

	"nacre/internal/client"
	"nacre/internal/grpcx"
	"nacre/internal/pki"
)

// Env is what every command needs: which file system (the MGS), where to
// write, and how to connect. cmd/nacre makes one per command from its
// flags and environment; the checker's commands (internal/lfsck/admin)
// take the same.
type Env struct {
	// MGS is --mgs, or NACRE_MGS (a command given paths may take the MGS
	// of the mount they are on instead: ResolvePaths).
	MGS   string
	Out   io.Writer
	Err   io.Writer
	Stdin io.Reader // nil: os.Stdin (put -)
	// Paths resolves path arguments (see paths.go); nil: this process's
	// current directory and mounts.
	Paths *PathEnv
	// MountState is where mount daemons record themselves, with their MGS
	// (fusefs.StateDir; "": fusefs.StateDir("")).
	MountState string
	// FollowerReads spreads the reads of the command's client over the
	// replicas of each MDT (client.Config.FollowerReads).
	FollowerReads bool
	// TLS are the command's credentials (NACRE_TLS_DIR, --tls-dir): every
	// connection it makes is TLS with them; nil: none.
	TLS *pki.Creds
}

// OSTDownAfter is how long a command's I/O waits for an OST that cannot
// be reached before it fails naming the OST (client.Config.OSTDownAfter):
// long enough for an OST that restarts to come back, short enough that a
// user is told at once that one is down.
const OSTDownAfter = 5 * time.Second

// commandTimeout bounds the retries of one operation of a command's client.
const commandTimeout = 30 * time.Second

// errNoMGS is the error of a command run without an MGS address.
var errNoMGS = fmt.Errorf("no MGS address: pass --mgs HOST:PORT or set NACRE_MGS (`nacre up` prints it)")

// Connect opens a client of the file system for a client command: it
// fails at once, saying how to fix it, when the MGS is missing or cannot
// be reached, and I/O fails naming an OST that stays down (OSTDownAfter).
func (e Env) Connect(ctx context.Context) (*client.Client, error) {
	if e.MGS == "" {
		return nil, errNoMGS
	}
	return client.New(ctx, client.Config{MGS: e.MGS, Timeout: commandTimeout, OSTDownAfter: OSTDownAfter, FailFast: true, FollowerReads: e.FollowerReads, OnWait: e.waitNotices(), TLS: e.TLS})
}

// ConnectAdmin opens a client for the administration commands
// (internal/lfsck/admin), which follow MGS and MDT failovers: it waits
// for an MGS that does not answer yet, as a mount does, and retries I/O
// until its timeout.
func (e Env) ConnectAdmin(ctx context.Context) (*client.Client, error) {
	if e.MGS == "" {
		return nil, errNoMGS
	}
	return client.New(ctx, client.Config{MGS: e.MGS, Timeout: commandTimeout, FollowerReads: e.FollowerReads, OnWait: e.waitNotices(), TLS: e.TLS})
}

// waitNotices prints, at a terminal, what a command's client waits for
// (client.Wait) on standard error, so that a command that waits for a
// server says so instead of seeming to hang; its final error names the
// same server. Scripts (no terminal) see only that error.
func (e Env) waitNotices() func(client.Wait) {
	if e.Err == nil || !IsTerminal(e.Err) {
		return nil
	}
	var mu sync.Mutex
	return func(w client.Wait) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(e.Err, "nacre: %s\n", w)
	}
}

// Dial connects to the gRPC services of a server (the MGS, a target, a
// replica) for a command: every command dials here.
func Dial(addr string, creds *pki.Creds) (*grpc.ClientConn, error) {
	return grpcx.Dial(addr, grpcx.WithTLS(creds))
}

// open resolves path arguments (PathEnv.Resolve) and connects to the file
// system they are on.
func (e Env) open(ctx context.Context, args ...string) (*client.Client, []string, error) {
	mgs, paths, err := e.ResolvePaths(args...)
	if err != nil {
		return nil, nil, err
	}
	e.MGS = mgs
	c, err := e.Connect(ctx)
	if err != nil {
		return nil, nil, err
	}
	return c, paths, nil
}

// Stderr is where a command writes its messages: e.Err, or the process's
// standard error.
func (e Env) Stderr() io.Writer {
	if e.Err != nil {
		return e.Err
	}
	return os.Stderr
}

// WriteJSONError writes {"error": MESSAGE}: what a command run with
// --json that failed before it printed its document prints on standard
// output, so that a script always gets a document there (the message
// also goes to standard error).
func WriteJSONError(w io.Writer, err error) {
	b, _ := json.Marshal(map[string]string{"error": err.Error()})
	fmt.Fprintln(w, string(b))
}
