package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestErrorMessageDropsTheGRPCWrapping: a command's error is shown with
// the server's message, without gRPC's "rpc error: code = ... desc =".
func TestErrorMessageDropsTheGRPCWrapping(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"fault inject /f: rpc error: code = FailedPrecondition desc = stripe 9: the file has 2 stripes", "fault inject /f: stripe 9: the file has 2 stripes"},
		{"rpc error: code = Unavailable desc = connection refused", "connection refused"},
		{"open big.iso: no such file or directory", "open big.iso: no such file or directory"},
	} {
		if got := ErrorMessage(errors.New(c.in)); got != c.want {
			t.Errorf("ErrorMessage(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestWriteJSONErrorIsADocument: a command run with --json that failed
// prints {"error": MESSAGE}, the message as people see it.
func TestWriteJSONErrorIsADocument(t *testing.T) {
	var b strings.Builder
	WriteJSONError(&b, errors.New("rpc error: code = Unavailable desc = MGS at 127.0.0.1:1 does not answer"))
	var doc map[string]string
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil || doc["error"] != "MGS at 127.0.0.1:1 does not answer" || len(doc) != 1 {
		t.Fatalf("%q: %v %v", b.String(), doc, err)
	}
}
