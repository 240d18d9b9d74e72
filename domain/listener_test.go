package domain_test

import (
	"fmt"
	"testing"

	"github.com/relayhq/relay/domain"
)

func TestPrimaryIndex(t *testing.T) {
	tests := []struct {
		name  string
		asked []bool
		want  int
	}{
		{"none", nil, -1},
		{"first connected", []bool{false, false, false}, 0},
		{"the one that asked", []bool{false, true, false}, 1},
		{"the newest that asked", []bool{true, false, true, false}, 2},
		{"alone", []bool{false}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := domain.PrimaryIndex(len(tt.asked), func(i int) bool { return tt.asked[i] }); got != tt.want {
				t.Fatalf("PrimaryIndex(%v) = %d, want %d", tt.asked, got, tt.want)
			}
		})
	}
}

func TestListenersDecide(t *testing.T) {
	const ep = "e1"
	conn := func(id string, asked bool) domain.Event {
		return domain.AgentConnected{EndpointID: ep, AgentID: id, Primary: asked}
	}
	gone := func(id string) domain.Event { return domain.AgentDisconnected{EndpointID: ep, AgentID: id} }
	changed := func(id, prev, reason string) domain.Event {
		return domain.PrimaryChanged{EndpointID: ep, AgentID: id, Previous: prev, Reason: reason}
	}
	tests := []struct {
		name   string
		given  []domain.Event
		want   domain.PrimaryChanged
		change bool
	}{
		{name: "no session ever", given: nil},
		{name: "first listener", given: []domain.Event{conn("a", false)},
			want: domain.PrimaryChanged{EndpointID: ep, AgentID: "a", Reason: domain.PrimaryFirst}, change: true},
		{name: "first asked", given: []domain.Event{conn("a", true)},
			want: domain.PrimaryChanged{EndpointID: ep, AgentID: "a", Reason: domain.PrimaryAsked}, change: true},
		{name: "recorded already", given: []domain.Event{conn("a", false), changed("a", "", domain.PrimaryFirst)}},
		{name: "a second session gets copies", given: []domain.Event{conn("a", false), changed("a", "", domain.PrimaryFirst), conn("b", false)}},
		{name: "a second session asks", given: []domain.Event{conn("a", false), changed("a", "", domain.PrimaryFirst), conn("b", true)},
			want: domain.PrimaryChanged{EndpointID: ep, AgentID: "b", Previous: "a", Reason: domain.PrimaryAsked}, change: true},
		{name: "the primary leaves, the oldest takes over",
			given: []domain.Event{conn("a", false), changed("a", "", domain.PrimaryFirst), conn("b", false), conn("c", false), gone("a")},
			want:  domain.PrimaryChanged{EndpointID: ep, AgentID: "b", Previous: "a", Reason: domain.PrimaryLeft}, change: true},
		{name: "the asking primary leaves, the previous asker takes over",
			given: []domain.Event{conn("a", false), conn("b", true), conn("c", true), changed("c", "", domain.PrimaryAsked), gone("c")},
			want:  domain.PrimaryChanged{EndpointID: ep, AgentID: "b", Previous: "c", Reason: domain.PrimaryLeft}, change: true},
		{name: "a copy leaves", given: []domain.Event{conn("a", false), conn("b", false), changed("a", "", domain.PrimaryFirst), gone("b")}},
		{name: "the last leaves",
			given: []domain.Event{conn("a", false), changed("a", "", domain.PrimaryFirst), gone("a")},
			want:  domain.PrimaryChanged{EndpointID: ep, Previous: "a", Reason: domain.PrimaryNone}, change: true},
		{name: "none left, recorded", given: []domain.Event{conn("a", false), changed("a", "", domain.PrimaryFirst), gone("a"), changed("", "a", domain.PrimaryNone)}},
		{name: "a session reconnecting under its id goes last",
			given: []domain.Event{conn("a", false), conn("b", false), changed("a", "", domain.PrimaryFirst), gone("a"), changed("b", "a", domain.PrimaryLeft), conn("a", false)}},
		{name: "two changes raced: the stream decides once",
			given: []domain.Event{conn("a", false), conn("b", false), changed("a", "", domain.PrimaryFirst), changed("a", "", domain.PrimaryFirst)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := domain.LoadListeners(tt.given).Decide(ep)
			if ok != tt.change || got != tt.want {
				t.Fatalf("Decide = %+v, %v; want %+v, %v", got, ok, tt.want, tt.change)
			}
		})
	}
}

// TestListenersSnapshot: a snapshot is due once more than SnapshotAfter
// events plus one per open session follow the last one; folding from it
// decides as folding everything before it does, then and afterwards.
func TestListenersSnapshot(t *testing.T) {
	const ep = "e1"
	conn := func(id string, asked bool) domain.Event {
		return domain.AgentConnected{EndpointID: ep, AgentID: id, Primary: asked}
	}
	gone := func(id string) domain.Event { return domain.AgentDisconnected{EndpointID: ep, AgentID: id} }
	// noise changes nothing: the end of a session never started.
	noise := func(n int) []domain.Event {
		out := make([]domain.Event, n)
		for i := range out {
			out[i] = gone("never")
		}
		return out
	}
	history := []domain.Event{conn("a", false), conn("b", true), domain.PrimaryChanged{EndpointID: ep, AgentID: "b", Reason: domain.PrimaryAsked},
		conn("c", false), gone("b")} // b left: a is due to take over
	whole := domain.LoadListeners(history)
	whole.Fold(noise(domain.SnapshotAfter + 2 - len(history)))
	if _, due := whole.Snapshot(ep); due {
		t.Fatalf("a snapshot is due after %d events with 2 sessions open", domain.SnapshotAfter+2)
	}
	whole.Fold(noise(1))
	snap, due := whole.Snapshot(ep)
	want := domain.ListenersSnapshot{EndpointID: ep, Open: []domain.ListenerSession{{AgentID: "a"}, {AgentID: "c"}}, Primary: "b"}
	if !due || fmt.Sprint(snap) != fmt.Sprint(want) {
		t.Fatalf("Snapshot = %+v, %v; want %+v", snap, due, want)
	}
	from := domain.LoadListeners([]domain.Event{snap})
	whole.Fold([]domain.Event{snap})
	for _, next := range [][]domain.Event{nil, {domain.PrimaryChanged{EndpointID: ep, AgentID: "a", Previous: "b", Reason: domain.PrimaryLeft}}, {conn("d", true)}, {gone("a"), gone("d")}} {
		whole.Fold(next)
		from.Fold(next)
		c1, ok1 := whole.Decide(ep)
		c2, ok2 := from.Decide(ep)
		if c1 != c2 || ok1 != ok2 || fmt.Sprint(whole.Open()) != fmt.Sprint(from.Open()) {
			t.Fatalf("after %v: the whole stream decides %+v (%v) with %v open, the snapshot %+v (%v) with %v", next, c1, ok1, whole.Open(), c2, ok2, from.Open())
		}
		if _, due := from.Snapshot(ep); due {
			t.Fatal("a snapshot is due right after one")
		}
	}

	crowd := domain.LoadListeners(nil)
	for i := range domain.MaxSnapshotSessions + 1 {
		crowd.Fold([]domain.Event{conn(fmt.Sprint(i), false)})
	}
	crowd.Fold(noise(2 * (domain.SnapshotAfter + domain.MaxSnapshotSessions)))
	if _, due := crowd.Snapshot(ep); due {
		t.Errorf("a snapshot of %d open sessions, more than %d", domain.MaxSnapshotSessions+1, domain.MaxSnapshotSessions)
	}
}
