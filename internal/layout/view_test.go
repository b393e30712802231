package layout

import (
	"bytes"
	"testing"
)

// TestViewsOfAStripedFile: 2 stripes of 4 bytes over 10 bytes of data.
// Stripe 0 holds bytes 0-3 and 8-9, stripe 1 bytes 4-7.
func TestViewsOfAStripedFile(t *testing.T) {
	data := []byte("0123456789")
	if got := ObjectData(data, 4, 2, 0); string(got) != "012389" {
		t.Errorf("object 0 holds %q, want 012389", got)
	}
	if got := ObjectData(data, 4, 2, 1); string(got) != "4567" {
		t.Errorf("object 1 holds %q, want 4567", got)
	}
	if got, want := View(data, 4, 2, map[int]bool{1: true}, 0), []byte("\x00\x00\x00\x004567\x00\x00"); !bytes.Equal(got, want) {
		t.Errorf("with stripe 1 only: %q, want %q", got, want)
	}
	if got := EndOfStripe(len(data), 4, 2, 1); got != 8 {
		t.Errorf("a file holding only stripe 1 ends at %d, want 8", got)
	}
	if got := View(data, 4, 2, map[int]bool{0: true, 1: true}, 6); string(got) != "012345" {
		t.Errorf("cut to 6: %q", got)
	}
}
