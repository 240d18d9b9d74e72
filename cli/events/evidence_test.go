package events

import (
	"strings"
	"testing"

	"github.com/relayhq/relay/evidence"
)

// TestPrintTailSaysWhenACountStopped: a retention decision whose count
// stopped at its bound is printed as "at least N", never as N.
func TestPrintTailSaysWhenACountStopped(t *testing.T) {
	var out strings.Builder
	printTail(evidence.Report{Checkpoints: 1, DecisionsTotal: 2, Decisions: []evidence.Decision{
		{Position: 7, Type: "endpoint.retained.v1", Endpoint: "ep-1", RetentionMs: 3_600_000, Cutoff: "2026-01-01T00:00:00Z", Deliveries: 3},
		{Position: 9, Type: "endpoint.retained.v1", Endpoint: "ep-2", RetentionMs: 3_600_000, Cutoff: "2026-01-01T00:00:00Z", Deliveries: 1000, AtLeast: true},
	}}, 0, &out)
	for _, want := range []string{"endpoint ep-1, window 1h, received before 2026-01-01T00:00:00Z, 3 deliveries deleted\n",
		"endpoint ep-2, window 1h, received before 2026-01-01T00:00:00Z, at least 1000 deliveries deleted\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verify printed\n%s\nwant a line ending %q", out.String(), want)
		}
	}
}
