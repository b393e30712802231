package ldlm

import (
	"testing"
	"time"

	"nacre/internal/fid"
)

// TestAReplacedOpenListKeepsTheOpensOfItsSession: a client's new session
// sends the list of its open files once registered, and a file it opened
// as the session began may be noted first and be missing from the list.
// The list replaces what earlier sessions noted, not that open: the
// MDS destroyed such a file when another client removed it (nacre get,
// whose first open comes right after its session starts).
func TestAReplacedOpenListKeepsTheOpensOfItsSession(t *testing.T) {
	s := NewServer(nil, nil, nil)
	const client, other = 7, 8
	f1, f2, f3 := fid.FID{Seq: 0x200000400, Oid: 1}, fid.FID{Seq: 0x200000400, Oid: 2}, fid.FID{Seq: 0x200000400, Oid: 3}
	if err := s.NoteOpens(client, []fid.FID{f1}, nil, false); err == nil {
		t.Fatal("an open noted without a session: want Unavailable")
	}
	s.mu.Lock()
	s.sessions[client] = &session{client: client}
	s.mu.Unlock()
	if err := s.NoteOpens(client, []fid.FID{f1}, nil, false); err != nil {
		t.Fatal(err)
	}
	// A new session: f2 opened at once, then the list (f3; f1 was closed
	// while the client was away).
	s.mu.Lock()
	s.sessions[client] = &session{client: client}
	s.mu.Unlock()
	if err := s.NoteOpens(client, []fid.FID{f2}, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteOpens(client, []fid.FID{f3}, nil, true); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    fid.FID
		want bool
	}{{f1, false}, {f2, true}, {f3, true}} {
		if got := s.HeldOpen(c.f, other, time.Second); got != c.want {
			t.Errorf("after the new session's list, %v held open: %v, want %v", c.f, got, c.want)
		}
	}
	if !s.OpenElsewhere(other, time.Second) || s.OpenElsewhere(client, time.Second) {
		t.Error("OpenElsewhere does not see the client's opens from another client only")
	}
	if err := s.NoteOpens(client, nil, []fid.FID{f2, f3}, false); err != nil {
		t.Fatal(err)
	}
	if s.HeldOpen(f2, other, time.Second) || s.OpenElsewhere(other, time.Second) {
		t.Error("closed files still held open")
	}
}
