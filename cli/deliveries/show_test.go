package deliveries

import (
	"strings"
	"testing"

	"github.com/relayhq/relay/deliveryjson"
)

// TestShowLabelsQueuedAttempts: `deliveries show` says which attempts the
// queue sent and which may be duplicates; a user's retry gets neither.
func TestShowLabelsQueuedAttempts(t *testing.T) {
	s200, s503, s502 := 200, 503, 502
	d := deliveryJSON{ID: "d-1", Address: "orders", Method: "POST", Path: "/", ReceivedAt: "2026-03-04T05:06:07Z", Complete: true,
		Attempts: []deliveryjson.Attempt{
			{Status: &s503, Retry: true, Queued: true},
			{Status: &s502, Retry: true, Queued: true},
			{Status: &s200, Retry: true, Queued: true, PossibleDuplicate: true},
			{Status: &s200, Retry: true},
		}}
	var b strings.Builder
	printDelivery(&b, d, false)
	lines := map[string]string{}
	for _, l := range strings.Split(b.String(), "\n") {
		if n, rest, ok := strings.Cut(strings.TrimSpace(l), ": "); ok && len(n) == 1 {
			lines[n] = rest
		}
	}
	for _, tc := range []struct {
		n, want string
		queued  bool
	}{
		{"1", "503 (from the queue)", true},
		{"2", "502 (from the queue)", true},
		{"3", "200 (from the queue, a possible duplicate: an earlier attempt was left open)", true},
		{"4", "200  fidelity", false},
	} {
		got := lines[tc.n]
		if !strings.HasPrefix(got, tc.want) || (!tc.queued && strings.Contains(got, "queue")) {
			t.Errorf("attempt %s: %q, want it to start with %q\n%s", tc.n, got, tc.want, b.String())
		}
	}
}

// TestShowSaysWhyTheResponseBodyIsNotStored: a latest answer recorded
// without its body because of the storage quota is said so, with the
// reason; one whose body is stored (or not captured at all) says nothing.
func TestShowSaysWhyTheResponseBodyIsNotStored(t *testing.T) {
	s200 := 200
	why := "storage quota exceeded"
	for _, tc := range []struct {
		reason *string
		want   bool
	}{{&why, true}, {nil, false}} {
		d := deliveryJSON{ID: "d-1", Address: "orders", Method: "POST", Path: "/", ReceivedAt: "2026-03-04T05:06:07Z", Complete: true,
			ResponseStatus: &s200, ResponseNotCaptured: tc.reason, Attempts: []deliveryjson.Attempt{{Status: &s200, Retry: true, Queued: true}}}
		var b strings.Builder
		printDelivery(&b, d, false)
		if got := strings.Contains(b.String(), "\nresponse body not stored: storage quota exceeded\n"); got != tc.want {
			t.Errorf("reason %v: says it %v, want %v\n%s", tc.reason, got, tc.want, b.String())
		}
	}
}
