package agent

import (
	"bytes"
	"strings"
	"testing"

	"github.com/relayhq/relay/agentcli"
)

// TestJSONObserverReportsRefusals: an answer the relay refused is told on
// the status stream, the sender's path made safe for a terminal; an event
// that only reports the refusal (agentcli.ForwardEvent.ReportOnly) writes no
// second JSON line for the forward.
func TestJSONObserverReportsRefusals(t *testing.T) {
	e := agentcli.ForwardEvent{AttemptID: "att-1", Method: "POST", Path: "/hook\x1b[2J", Status: 200, ReportError: "gone"}
	for _, only := range []bool{false, true} {
		var out, status bytes.Buffer
		e.ReportOnly = only
		NewJSONObserver(&out, &status).Forwarded(e)
		if got, want := status.String(), "POST /hook\\x1b[2J: gone\n"; got != want {
			t.Errorf("ReportOnly %v: status %q, want %q", only, got, want)
		}
		if lines := strings.Count(out.String(), "\n"); lines != map[bool]int{false: 1, true: 0}[only] {
			t.Errorf("ReportOnly %v: %d JSON lines: %q", only, lines, out.String())
		}
	}
}
