package agentcli

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
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
// TestTextObserverReportsRefusals: an answer the relay refused is told on
// the status stream, the sender's path made safe for a terminal; an event
// that only reports it (ReportOnly) prints no second line for the forward.
func TestTextObserverReportsRefusals(t *testing.T) {
	e := ForwardEvent{Time: time.Date(2026, 11, 23, 13, 40, 9, 0, time.UTC), DeliveryID: "d-1", Method: "POST", Path: "/hook\x1b[2J",
		Status: 200, Duration: 3 * time.Millisecond, ReportError: "gone"}
	for _, only := range []bool{false, true} {
		var out, status bytes.Buffer
		e.ReportOnly = only
		(&TextObserver{Out: &out, Status: &status}).Forwarded(e)
		if got, want := status.String(), "POST /hook\\x1b[2J: gone\n"; got != want {
			t.Errorf("ReportOnly %v: status %q, want %q", only, got, want)
		}
		if line := out.String(); only != (line == "") {
			t.Errorf("ReportOnly %v: output %q", only, line)
		}
	}
}

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

// countingWriter counts the writes it takes.
type countingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

func (w *countingWriter) state() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String(), w.writes
}

// TestTextObserverGathersLines: forward lines in quick succession reach
// Out in order and in fewer writes than lines; the first is written at
// once, the rest within lineDelay, and a status line comes after every
// forward line before it.
func TestTextObserverGathersLines(t *testing.T) {
	var out countingWriter
	o := &TextObserver{Out: &out, Status: &out}
	e := ForwardEvent{Time: time.Date(2026, 11, 23, 13, 40, 9, 0, time.UTC), Method: "POST", Status: 200}
	const n = 100
	var want strings.Builder
	for i := range n {
		e.Path = fmt.Sprintf("/hook/%d", i)
		e.DeliveryID = fmt.Sprintf("d-%d", i)
		o.Forwarded(e)
		fmt.Fprintf(&want, "13:40:09 POST /hook/%d → 200 (0 ms)  delivery d-%d\n", i, i)
		if i == 0 {
			if got, _ := out.state(); got != want.String() {
				t.Fatalf("first line not written at once: %q", got)
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, writes := out.state()
		if got == want.String() {
			if writes >= n {
				t.Errorf("%d lines took %d writes", n, writes)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lines never all written: %q", got)
		}
		time.Sleep(time.Millisecond)
	}

	e.Path = "/last"
	e.DeliveryID = "d-last"
	o.Forwarded(e)
	o.Forwarded(e) // kept for a flush
	o.State(StateEvent{State: Stopped})
	got, _ := out.state()
	if tail := "13:40:09 POST /last → 200 (0 ms)  delivery d-last\n13:40:09 POST /last → 200 (0 ms)  delivery d-last\nagent stopped\n"; !strings.HasSuffix(got, tail) {
		t.Errorf("output ends %q, want %q", got[max(0, len(got)-200):], tail)
	}
}

// TestTextObserverCountsInWords: a count of listeners reads as English
// (1 listener, 2 listeners), never "listener(s)".
func TestTextObserverCountsInWords(t *testing.T) {
	tests := []struct {
		listeners int
		want      string
	}{
		{1, "endpoint orders (ep1): primary: this agent's answers go to the senders (1 listener)\n"},
		{2, "(2 listeners)\n"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.listeners), func(t *testing.T) {
			var out bytes.Buffer
			(&TextObserver{Out: &out, Status: &out}).Role(RoleEvent{EndpointID: "ep1", Name: "orders", Primary: true, Listeners: tt.listeners})
			if got := out.String(); !strings.HasSuffix(got, tt.want) || strings.Contains(got, "(s)") {
				t.Errorf("Role printed %q, want it to end %q", got, tt.want)
			}
		})
	}
}

// TestTextObserverQueueRoles: on a QUEUE Endpoint the relay answers the
// senders at once, so the role line says what the primary's answers do
// there: decide the queue's attempts.
func TestTextObserverQueueRoles(t *testing.T) {
	tests := []struct {
		mode, want string
	}{
		{"QUEUE", "endpoint orders (ep1): primary: this agent's answers decide the queue's attempts (the relay answered the senders) (1 listener)\n"},
		{"PROXY", "endpoint orders (ep1): primary: this agent's answers go to the senders (1 listener)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			var out bytes.Buffer
			o := &TextObserver{Out: &out, Status: &out}
			o.State(StateEvent{State: Connected, Server: "ws://relay/graphql", Endpoints: []EndpointInfo{{ID: "ep1", Name: "orders", Mode: tt.mode, Target: "http://localhost:3000"}}})
			o.Role(RoleEvent{EndpointID: "ep1", Name: "orders", Primary: true, Listeners: 1})
			if got := out.String(); !strings.HasSuffix(got, tt.want) {
				t.Errorf("Role printed %q, want it to end %q", got, tt.want)
			}
		})
	}
}
