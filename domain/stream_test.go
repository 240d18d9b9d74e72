package domain_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
)

func TestEncodeAll(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	events := []domain.Event{
		domain.DeliveryReceived{DeliveryID: "d1", Method: "POST", Target: "/"},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "a1"},
		domain.DeliveryAnswered{DeliveryID: "d1", Status: 204},
	}
	tests := []struct {
		name    string
		ids     []string
		wantIDs []string
	}{
		{"fresh IDs", nil, []string{"new-1", "new-2", "new-3"}},
		{"IDs of an earlier try", []string{"x", "y", "z"}, []string{"x", "y", "z"}},
		{"some IDs missing", []string{"x"}, []string{"x", "new-1", "new-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := 0
			newID := func() string { n++; return fmt.Sprintf("new-%d", n) }
			tr := domain.Trace{CorrelationID: "d1", CausationID: "cause"}
			data, ids, err := domain.NewCodec().EncodeAll(tt.ids, newID, events, at, tr)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.wantIDs) {
				t.Fatalf("ids = %v, want %v", ids, tt.wantIDs)
			}
			for i, d := range data {
				wantCause := ids[0]
				if i == 0 {
					wantCause = "cause"
				}
				m := d.Metadata
				if d.ID != ids[i] || d.Type != events[i].EventType() || m.CorrelationID != "d1" || m.CausationID != wantCause || !m.OccurredAt.Equal(at) || m.OccurredAt.Location() != time.UTC {
					t.Errorf("event %d = %s %s %+v, want ID %s caused by %s at %s UTC", i, d.ID, d.Type, m, ids[i], wantCause, at)
				}
			}
		})
	}
}

func TestEncodeAllRefusesUnknownEvent(t *testing.T) {
	_, _, err := domain.NewCodec().EncodeAll([]string{"a", "b"}, nil, []domain.Event{domain.EndpointDeleted{}, unknownEvent{}}, time.Now(), domain.Trace{})
	if !errors.Is(err, domain.ErrUnknownEventType) {
		t.Fatalf("err = %v, want ErrUnknownEventType", err)
	}
}

type unknownEvent struct{}

func (unknownEvent) EventType() string { return "unknown.v1" }

func TestLoadStream(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "log.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	codec := domain.NewCodec()

	// More events than one page, so the read must go on past it.
	const n = 700
	events := make([]domain.Event, n)
	for i := range events {
		events[i] = domain.DeliveryAnswered{DeliveryID: "d1", Status: 200 + i%300}
	}
	i := 0
	newID := func() string { i++; return fmt.Sprintf("00000000-0000-4000-8000-%012d", i) }
	data, _, err := codec.EncodeAll(nil, newID, events, time.Now(), domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Append(ctx, "delivery-d1", domain.NoStream(), data...); err != nil {
		t.Fatal(err)
	}

	recs, got, err := domain.LoadStream(ctx, store, codec, "delivery-d1")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != n || len(got) != n {
		t.Fatalf("loaded %d records and %d events, want %d", len(recs), len(got), n)
	}
	for i := range got {
		if got[i] != events[i] || recs[i].Revision != uint64(i) || recs[i].ID != data[i].ID {
			t.Fatalf("event %d = %+v (revision %d, ID %s), want %+v (revision %d, ID %s)", i, got[i], recs[i].Revision, recs[i].ID, events[i], i, data[i].ID)
		}
	}

	if _, _, err := domain.LoadStream(ctx, store, codec, "delivery-missing"); !errors.Is(err, domain.ErrStreamNotFound) {
		t.Fatalf("missing stream: err = %v, want ErrStreamNotFound", err)
	}
}
