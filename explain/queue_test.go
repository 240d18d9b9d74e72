package explain

import (
	"testing"
	"time"

	"github.com/relayhq/relay/readmodel"
)

// TestQueueStatus: the one sentence the explanation, the API and the
// command line give of where a queued delivery stands.
func TestQueueStatus(t *testing.T) {
	next := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		name string
		e    readmodel.QueueEntry
		want string
	}{
		{"waiting", readmodel.QueueEntry{State: readmodel.QueueQueued}, "queued, waiting for a listener"},
		{"failed", readmodel.QueueEntry{State: readmodel.QueueQueued, Tries: 1, Failures: 1, Reason: "503", NextAt: next},
			"attempt 1 failed 503, next at 2026-01-02T03:04:05.000Z"},
		{"not counted", readmodel.QueueEntry{State: readmodel.QueueQueued, Tries: 2, Reason: "no listener (not counted: waiting for a listener)", NextAt: next},
			"attempt 2: no listener (not counted: waiting for a listener); next at 2026-01-02T03:04:05.000Z"},
		{"in flight", readmodel.QueueEntry{State: readmodel.QueueInFlight, Tries: 3}, "attempt 3 sent, waiting for its outcome"},
		{"dead", readmodel.QueueEntry{State: readmodel.QueueDead, Tries: 5, Reason: "dead after 5 attempts: last 503"}, "dead after 5 attempts: last 503"},
		{"delivered", readmodel.QueueEntry{State: readmodel.QueueDone, Tries: 2, Status: 204}, "delivered on attempt 2 (204)"},
		{"next a duplicate", readmodel.QueueEntry{State: readmodel.QueueQueued, Duplicate: true},
			"queued, waiting for a listener; the next attempt may be a duplicate (an earlier one was left open)"},
		{"sent again", readmodel.QueueEntry{State: readmodel.QueueDone, Tries: 2, Status: 200, Duplicates: 1},
			"delivered on attempt 2 (200); 1 attempt sent again after one was left open (possible duplicates, same Relay-Delivery-Id)"},
		{"sent again twice", readmodel.QueueEntry{State: readmodel.QueueDone, Tries: 3, Status: 200, Duplicates: 2},
			"delivered on attempt 3 (200); 2 attempts sent again after one was left open (possible duplicates, same Relay-Delivery-Id)"},
		{"unknown state", readmodel.QueueEntry{State: "elsewhere"}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := QueueStatus(tt.e); got != tt.want {
				t.Errorf("QueueStatus = %q, want %q", got, tt.want)
			}
		})
	}
}
