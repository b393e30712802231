package localcluster

import (
	"encoding/json"
	"fmt"
	"io"
)

// StatusFailed is what `nacre status --dir` adds when the cluster's MGS
// (at mgs) did not answer with err: with the MGS down (after a power
// cut, say) what runs here is still worth knowing. With asJSON it writes
// a document to out, as scripts get one on standard output either way:
// the error and the processes (Processes). The error it returns adds the
// report of the processes (ProcessReport; self runs this binary again).
func StatusFailed(out io.Writer, dir, mgs string, err error, asJSON bool, self string) error {
	if asJSON {
		procs, _ := Processes(dir)
		doc := struct {
			Error     string         `json:"error"`
			MGS       string         `json:"mgs"`
			Processes []ProcessState `json:"processes"`
		}{err.Error(), mgs, procs}
		b, _ := json.MarshalIndent(doc, "", "  ")
		fmt.Fprintln(out, string(b))
	}
	return fmt.Errorf("%w\n%s", err, ProcessReport(dir, self))
}
