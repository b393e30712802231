package bulk

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"nacre/internal/netguard"
	"nacre/internal/version"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the fuzz seed corpus in testdata/fuzz")

// seedFrames are well-formed and malformed byte streams that start the
// fuzzers off in interesting places: every op, a session, and the classic
// framing mistakes.
func seedFrames() map[string][]byte {
	v := uint16(version.Protocol)
	meta := make([]byte, metaSize)
	(&ObjMeta{Parent: pfid, StripeIndex: 1, StripeSize: 1 << 20, StripeCount: 2, UID: 1, GID: 2}).put(meta)
	attr := make([]byte, attrSize)
	(&ObjAttr{Size: 10, Blocks: 8, MtimeNs: 1, Exists: true}).put(attr)
	hello := frame(header{version: v, op: OpHello, reqID: 1}, nil, []byte("testfs"))
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	seeds := map[string][]byte{
		"hello":    hello,
		"read":     cat(hello, frame(header{version: v, op: OpRead, reqID: 2, obj: objA, length: 100}, nil, nil)),
		"write":    cat(hello, frame(header{version: v, op: OpWrite, reqID: 2, obj: objA, off: 4096, length: 5}, meta, []byte("hello"))),
		"punch":    cat(hello, frame(header{version: v, op: OpPunch, reqID: 2, obj: objA, off: 1, length: 2}, nil, nil)),
		"truncate": cat(hello, frame(header{version: v, op: OpTruncate, reqID: 2, obj: objA, off: 77}, meta, nil)),
		"getattr":  cat(hello, frame(header{version: v, op: OpGetAttr, reqID: 2, obj: objA}, nil, nil)),
		"sync":     cat(hello, frame(header{version: v, op: OpSync, reqID: 2, obj: objA}, nil, nil)),
		"setattr":  cat(hello, frame(header{version: v, op: OpSetAttr, reqID: 2, obj: objA}, meta, nil)),
		"reply":    frame(header{version: v, op: OpGetAttr, flags: flagReply, reqID: 2, obj: objA}, attr, nil),
		"errreply": frame(header{version: v, op: OpWrite, flags: flagReply, reqID: 2, status: 28}, nil, []byte("no space")),
		"session": cat(hello,
			frame(header{version: v, op: OpWrite, reqID: 2, obj: objA, length: 3}, nil, []byte("abc")),
			frame(header{version: v, op: OpRead, reqID: 3, obj: objA, length: 3}, nil, nil),
			frame(header{version: v, op: 99, reqID: 4, obj: objA}, nil, nil)),
		"badmagic":  append([]byte("GET / HTTP/1.1\r\n"), make([]byte, 60)...),
		"truncated": hello[:HeaderSize+3],
		"oldpeer":   frame(header{version: v + 1, op: OpHello, reqID: 1}, nil, nil),
	}
	badCRC := bytes.Clone(seeds["write"])
	badCRC[len(badCRC)-1] ^= 1 // payload byte
	seeds["badpayloadcrc"] = badCRC
	big := make([]byte, HeaderSize)
	(&header{version: v, op: OpWrite, reqID: 2, length: MaxPayload + 1, payloadLen: MaxPayload + 1}).put(big)
	seeds["oversized"] = cat(hello, big)
	return seeds
}

// TestFuzzSeedCorpus writes the seed corpus with -update-seeds and
// otherwise checks that it is there, so `go test` always runs it.
func TestFuzzSeedCorpus(t *testing.T) {
	for _, target := range []string{"FuzzReadHeader", "FuzzServeConn"} {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, data := range seedFrames() {
			p := filepath.Join(dir, "seed-"+name)
			if *updateSeeds {
				os.MkdirAll(dir, 0o755)
				content := "go test fuzz v1\n[]byte(" + strconv.Quote(string(data)) + ")\n"
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("seed corpus file missing (run go test -run TestFuzzSeedCorpus -update-seeds): %v", err)
			}
		}
	}
}

// FuzzReadHeader feeds arbitrary bytes to the frame decoder and the
// request checks: they must return errors, never panic, and never accept
// a frame over the limits (which would let a peer make us allocate).
func FuzzReadHeader(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf [HeaderSize + MaxExt]byte
		for range 64 {
			h, ext, err := readHeader(r, buf[:])
			if err != nil {
				if errors.Is(err, ErrFrameTooLarge) && h.payloadLen <= MaxPayload {
					t.Fatalf("too-large error for a payload of %d", h.payloadLen)
				}
				return
			}
			if len(ext) > MaxExt || h.payloadLen > MaxPayload {
				t.Fatalf("accepted ext %d payload %d", len(ext), h.payloadLen)
			}
			// Read the payload as the server would, bounded by what is there.
			p := make([]byte, min(int(h.payloadLen), r.Len()))
			io.ReadFull(r, p)
			checkRequest(&h, ext, p)
			if m, err := optMeta(ext); err == nil && m != nil {
				var b [metaSize]byte
				m.put(b[:])
				if m2, _ := decodeMeta(b[:]); m2 != *m {
					t.Fatalf("meta round trip: %+v != %+v", m2, *m)
				}
			}
			decodeAttr(ext)
		}
	})
}

// FuzzServeConn runs a server connection over arbitrary client bytes: the
// server must answer or hang up, never panic or hang.
func FuzzServeConn(f *testing.F) {
	for _, s := range seedFrames() {
		f.Add(s)
	}
	h := newMem(objA)
	h.maxSize = 8 << 20
	s := &Server{
		h: h, log: slog.New(slog.DiscardHandler), warn: netguard.NewWarner(nil, 0), version: version.Protocol, ioTimeout: 5e9,
		conns: make(map[*serverConn]struct{}), opts: ServerOptions{Fsname: "testfs"},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		sc := &serverConn{nc: server, br: bufio.NewReader(server)}
		s.mu.Lock()
		s.conns[sc] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serveConn(sc)
		drained := make(chan struct{})
		go func() {
			io.Copy(io.Discard, client)
			close(drained)
		}()
		client.Write(data)
		client.Close()
		<-drained
		s.wg.Wait()
	})
}

func TestFuzzSeedsMakeServerAnswer(t *testing.T) {
	// The seeds are not only parsed: a session gets real answers.
	s := seedFrames()
	srv, _ := serve(t, newMem(objA), ServerOptions{}, ClientOptions{})
	r := dialRaw(t, srv.Addr().String())
	r.send(s["session"])
	want := []struct {
		op     Op
		status uint16
	}{{OpHello, 0}, {OpWrite, 0}, {OpRead, 0}, {99, 38 /* ENOSYS */}}
	for i, w := range want {
		h, p, err := r.recv()
		if err != nil || h.op != w.op || h.status != w.status {
			t.Fatalf("reply %d: op %s status %d %q %v, want %s status %d", i, h.op, h.status, p, err, w.op, w.status)
		}
		if h.op == OpRead && string(p) != "abc" {
			t.Fatalf("read %q", p)
		}
	}
}
