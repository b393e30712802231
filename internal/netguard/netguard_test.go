package netguard

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"
)

// TestReadGrowingReservesWhatArrives: a reader that stops early leaves a
// buffer of about what it gave, not of what was asked; a full read gives
// every byte.
func TestReadGrowingReservesWhatArrives(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	b, err := ReadGrowing(bytes.NewReader(data[:1000]), nil, 16<<20)
	if err != io.ErrUnexpectedEOF || len(b) != 1000 || cap(b) > growFrom {
		t.Fatalf("1000 bytes of a claimed 16 MiB: len %d cap %d err %v; want cap at most %d", len(b), cap(b), err, growFrom)
	}
	b, err = ReadGrowing(bytes.NewReader(data[:300<<10]), nil, 16<<20)
	if err != io.ErrUnexpectedEOF || cap(b) > 2*(300<<10) {
		t.Fatalf("300 KiB of a claimed 16 MiB: cap %d err %v; want at most twice what came", cap(b), err)
	}
	b, err = ReadGrowing(bytes.NewReader(data), make([]byte, 10), len(data))
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("whole read: %d bytes, err %v", len(b), err)
	}
	small := make([]byte, 0, 4096)
	b, err = ReadGrowing(bytes.NewReader(data), small, 100)
	if err != nil || &b[0] != &small[:1][0] || !bytes.Equal(b, data[:100]) {
		t.Fatal("a buffer that holds the frame is not reused")
	}
}

// TestWarnerLimitsLinesPerPeer: one line per peer per interval, the next
// one counting those suppressed; other peers are not held back.
func TestWarnerLimitsLinesPerPeer(t *testing.T) {
	var out bytes.Buffer
	w := NewWarner(slog.New(slog.NewTextHandler(&out, nil)), 10*time.Second)
	now := time.Unix(1000, 0)
	w.now = func() time.Time { return now }
	for range 50 {
		w.Warn("10.0.0.1", "bad frame")
	}
	w.Warn("10.0.0.2", "bad frame")
	if n := strings.Count(out.String(), "bad frame"); n != 2 {
		t.Fatalf("%d lines for 50 warnings of one peer and one of another, want 2:\n%s", n, out.String())
	}
	now = now.Add(10 * time.Second)
	w.Warn("10.0.0.1", "bad frame")
	if !strings.Contains(out.String(), "suppressed=49") {
		t.Fatalf("the line after the interval does not count the 49 suppressed:\n%s", out.String())
	}
}

// TestLoopbackPeersGetTheLargerDefault: by default a loopback peer (every
// client of a one-machine cluster) may hold more than DefaultMaxPerPeer
// connections; an explicit bound holds for it too.
func TestLoopbackPeersGetTheLargerDefault(t *testing.T) {
	for _, tc := range []struct {
		max, open, want int
	}{
		{0, DefaultMaxPerPeer + 20, DefaultMaxPerPeer + 20},
		{5, 8, 5},
	} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		l := LimitPeers(ln, tc.max, nil, "test port")
		accepted := make(chan net.Conn, tc.open)
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				accepted <- c
			}
		}()
		var clients []net.Conn
		for range tc.open {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
		}
		// The refused ones are closed by the listener at once.
		deadline := time.Now().Add(5 * time.Second)
		for len(accepted) < tc.want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		if got := len(accepted); got != tc.want {
			t.Errorf("max %d, %d connections from loopback: %d accepted, want %d", tc.max, tc.open, got, tc.want)
		}
		l.Close()
		for _, c := range clients {
			c.Close()
		}
		for len(accepted) > 0 {
			(<-accepted).Close()
		}
	}
}
