package agentcli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestTextObserverPrintsRequests: one line per forward, and with
// PrintHeaders and PrintBody the request under it; what a sender controls
// cannot drive the terminal (escape sequences and bidi overrides are
// printed escaped).
func TestTextObserverPrintsRequests(t *testing.T) {
	e := ForwardEvent{
		Time: time.Date(2026, 11, 23, 13, 40, 9, 0, time.UTC), EndpointID: "ep1", DeliveryID: "d-1",
		Method: "POST", Path: "/hook\x1b[2J", Status: 200, Duration: 3 * time.Millisecond,
		RequestHeaders: []Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Evil", Value: "a\u202eb"}},
		RequestBody:    []byte("{\"a\":1,\n\"t\":\"\x1b]0;owned\x07\"}"),
	}
	tests := []struct {
		name           string
		headers, body  bool
		want, wantNone []string
	}{
		{name: "line only", want: []string{"13:40:09 POST /hook\\x1b[2J → 200 (3 ms)  delivery d-1\n"}, wantNone: []string{"Content-Type", `"a":1`}},
		{name: "headers", headers: true, want: []string{"    Content-Type: application/json\n", "    X-Evil: a\\u202eb\n"}, wantNone: []string{`"a":1`}},
		{name: "body", body: true, want: []string{"    {\"a\":1,\n    \"t\":\"\\x1b]0;owned\\x07\"}\n"}, wantNone: []string{"Content-Type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			o := &TextObserver{Out: &out, Status: &out, PrintHeaders: tt.headers, PrintBody: tt.body}
			o.Forwarded(e)
			got := out.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("output %q lacks %q", got, w)
				}
			}
			for _, w := range tt.wantNone {
				if strings.Contains(got, w) {
					t.Errorf("output %q has %q", got, w)
				}
			}
			if strings.ContainsAny(got, "\x1b\x07\u202e") {
				t.Errorf("output %q carries a control character the sender sent", got)
			}
		})
	}
}

// TestTextObserverMarksCopies: a request received as a copy says so on its
// line; the primary's does not.
func TestTextObserverMarksCopies(t *testing.T) {
	e := ForwardEvent{Time: time.Date(2026, 11, 23, 13, 40, 9, 0, time.UTC), DeliveryID: "d-1", Method: "POST", Path: "/hook",
		Status: 500, Duration: 3 * time.Millisecond}
	for _, copied := range []bool{false, true} {
		var out bytes.Buffer
		e.Copy = copied
		(&TextObserver{Out: &out, Status: &out}).Forwarded(e)
		want := "13:40:09 POST /hook → 500 (3 ms)  delivery d-1\n"
		if copied {
			want = "13:40:09 POST /hook → 500 (3 ms)  copy: not sent to the sender  delivery d-1\n"
		}
		if out.String() != want {
			t.Errorf("copy %v: %q, want %q", copied, out.String(), want)
		}
	}
}
