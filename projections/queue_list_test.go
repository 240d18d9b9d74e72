package projections

import (
	"errors"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// TestQueueListPagesByCursor: an Endpoint's dead deliveries come page by
// page from each page's end cursor, each once and in the order received,
// whatever else the account queues; a cursor the API did not give
// (positions written out, one past the largest, leading zeros, 1 MiB of
// digits) is INVALID_INPUT on after, never a page from the oldest.
func TestQueueListPagesByCursor(t *testing.T) {
	s := newSynth(t, []byte("{}"))
	v := s.open("views.db")
	for _, ep := range []string{"ep-1", "ep-2"} {
		s.queue(domain.EndpointStream(ep), domain.EndpointCreated{EndpointID: ep, AccountID: "acct-1", Name: ep, Mode: domain.ModeQueue})
	}
	var want []string
	for i := range 7 {
		for _, ep := range []string{"ep-1", "ep-2"} {
			id := s.nextID()
			stream := domain.DeliveryStream(id)
			s.queue(stream, domain.DeliveryReceived{DeliveryID: id, Address: ep, AddressKind: domain.AddressEndpoint,
				AccountID: "acct-1", Method: "POST", Target: "/q", Body: s.body, BodySize: 2, Complete: true, Queued: true})
			if ep == "ep-1" && i != 3 { // one of ep-1's stays queued
				s.queue(stream, domain.DeliveryDead{DeliveryID: id, Failures: 1, Reason: "gone"})
				want = append(want, id)
			}
		}
	}
	applyTB(t, v, s.take())

	var got []string
	after := ""
	for range 10 {
		page, end, err := v.QueueList(t.Context(), "acct-1", "ep-1", readmodel.QueueDead, after, 4)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			if end != after {
				t.Errorf("an empty page's end cursor %q, want the one given %q", end, after)
			}
			break
		}
		for _, e := range page {
			got = append(got, e.DeliveryID)
		}
		after = end
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("pages gave %v, want %v", got, want)
	}

	for _, bad := range []string{"1234", "18446744073709551615", readmodel.EncodeCursor(0), "ZDE6MDAx" /* d1:001 */, strings.Repeat("9", 1<<20),
		readmodel.EncodeCursor(1 << 63) /* past int64 */, "c1"} {
		_, _, err := v.QueueList(t.Context(), "acct-1", "ep-1", readmodel.QueueDead, bad, 4)
		var invalid *domain.InvalidInputError
		if !errors.As(err, &invalid) || invalid.Field != "after" {
			t.Errorf("cursor %q (%d bytes): %v, want INVALID_INPUT on after", bad[:min(len(bad), 24)], len(bad), err)
		}
	}
	if _, _, err := v.QueueList(t.Context(), "acct-1", "", "", readmodel.EncodeCursor(uint64(1)), 4); err != nil {
		t.Errorf("a cursor it gave, without Endpoint or state: %v", err)
	}
}
