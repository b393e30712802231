package cli

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestWriteJSONErrorIsADocument: a command run with --json that failed
// prints {"error": MESSAGE}, the message as people see it.
func TestWriteJSONErrorIsADocument(t *testing.T) {
	var b strings.Builder
	WriteJSONError(&b, errors.New("MGS at 127.0.0.1:1 does not answer"))
	var doc map[string]string
	if err := json.Unmarshal([]byte(b.String()), &doc); err != nil || doc["error"] != "MGS at 127.0.0.1:1 does not answer" || len(doc) != 1 {
		t.Fatalf("%q: %v %v", b.String(), doc, err)
	}
}
