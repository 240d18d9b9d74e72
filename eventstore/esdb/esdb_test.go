package esdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"github.com/EventStore/EventStore-Client-Go/v4/esdb"
	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/storetest"
)

// TestConformance runs the shared suite against a real server, named by
// RELAY_EVENTSTORE_URL (e.g. esdb://admin:changeit@127.0.0.1:2113?tls=false).
func TestConformance(t *testing.T) {
	url := os.Getenv("RELAY_EVENTSTORE_URL")
	if url == "" {
		t.Skip("RELAY_EVENTSTORE_URL is not set: set it to an EventStoreDB server (esdb://host:2113?tls=false; docker compose --profile esdb up) to run the conformance suite against it")
	}
	open := func(t *testing.T) domain.EventStore {
		t.Helper()
		s, err := Open(t.Context(), url, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		return s
	}
	storetest.Run(t, storetest.Factory{
		Open: open,
		Reopen: func(t *testing.T, old domain.EventStore) domain.EventStore {
			if err := old.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t)
		},
		// A shared server: not empty, byte-offset positions, IDs checked
		// only at the place of a retry.
		Guarantees: storetest.Guarantees{},
	})
}

func TestExpectedRevision(t *testing.T) {
	tests := []struct {
		in   domain.ExpectedRevision
		want esdb.ExpectedRevision
	}{
		{domain.Any(), esdb.Any{}},
		{domain.NoStream(), esdb.NoStream{}},
		{domain.StreamExists(), esdb.StreamExists{}},
		{domain.Exact(0), esdb.StreamRevision{Value: 0}},
		{domain.Exact(41), esdb.StreamRevision{Value: 41}},
		{domain.Exact(math.MaxUint64), esdb.StreamRevision{Value: math.MaxUint64}},
	}
	for _, tt := range tests {
		t.Run(tt.in.String(), func(t *testing.T) {
			if got := expectedRevision(tt.in); got != tt.want {
				t.Fatalf("expectedRevision(%s) = %#v, want %#v", tt.in, got, tt.want)
			}
		})
	}
}

func TestSentinelFor(t *testing.T) {
	tests := []struct {
		code esdb.ErrorCode
		want error
	}{
		{esdb.ErrorCodeWrongExpectedVersion, domain.ErrWrongExpectedRevision},
		{esdb.ErrorCodeResourceNotFound, domain.ErrStreamNotFound},
		{esdb.ErrorCodeStreamDeleted, domain.ErrStreamDeleted},
		{esdb.ErrorCodeDeadlineExceeded, context.DeadlineExceeded},
		{esdb.ErrorCodeConnectionClosed, ErrClosed},
		{esdb.ErrorCodeUnknown, nil},
		{esdb.ErrorCodeAccessDenied, nil},
		{esdb.ErrorUnavailable, nil},
	}
	for _, tt := range tests {
		if got := sentinelFor(tt.code); got != tt.want {
			t.Errorf("sentinelFor(%d) = %v, want %v", tt.code, got, tt.want)
		}
	}
}

func TestTranslate(t *testing.T) {
	plain := errors.New("boom")
	clientErr, _ := esdb.FromError(plain) // ErrorCodeUnknown: the port has no sentinel for it
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
		is   []error
	}{
		{"nil", t.Context(), nil, nil},
		{"not a client error", t.Context(), plain, []error{plain}},
		{"unclassified client error", t.Context(), fmt.Errorf("append: %w", clientErr), []error{plain}},
		{"ended context", cancelled, plain, []error{context.Canceled, plain}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := translate(tt.ctx, tt.err)
			if (got == nil) != (tt.err == nil) {
				t.Fatalf("translate(%v) = %v", tt.err, got)
			}
			for _, want := range tt.is {
				if !errors.Is(got, want) {
					t.Fatalf("translate(%v) = %v, want it to wrap %v", tt.err, got, want)
				}
			}
			if errors.Is(got, domain.ErrStreamNotFound) || errors.Is(got, domain.ErrWrongExpectedRevision) {
				t.Fatalf("translate(%v) = %v: classified an unknown error", tt.err, got)
			}
		})
	}
}

// TestEventRoundTrip encodes events as the adapter sends them, builds the
// record the server would hand back, and decodes it.
func TestEventRoundTrip(t *testing.T) {
	zone := time.FixedZone("UTC-03:00", -3*3600)
	tests := []struct {
		name        string
		data        []byte
		contentType esdb.ContentType
	}{
		{"json", []byte(`{ "a" : 1 }`), esdb.ContentTypeJson},
		{"binary", []byte{0, 0xff, 0xfe, 'x'}, esdb.ContentTypeBinary},
		{"empty", nil, esdb.ContentTypeBinary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := domain.EventData{
				ID:   uuid.NewString(),
				Type: "delivery.received.v1",
				Data: tt.data,
				Metadata: domain.Metadata{
					SchemaVersion: 2,
					OccurredAt:    time.Date(2025, 6, 7, 8, 9, 10, 999999999, zone),
					CorrelationID: "c", CausationID: "d",
				},
			}
			proposed, err := toProposed([]domain.EventData{in})
			if err != nil {
				t.Fatal(err)
			}
			p := proposed[0]
			if p.ContentType != tt.contentType || p.EventID.String() != in.ID || !bytes.Equal(p.Data, in.Data) {
				t.Fatalf("proposed = %+v", p)
			}
			out, err := toRecorded(&esdb.RecordedEvent{
				EventID: p.EventID, EventType: p.EventType, StreamID: "delivery-1", EventNumber: 4,
				Position: esdb.Position{Commit: 900, Prepare: 900}, Data: p.Data, UserMetadata: p.Metadata,
			}, 900)
			if err != nil {
				t.Fatal(err)
			}
			if out.ID != in.ID || out.Type != in.Type || !bytes.Equal(out.Data, in.Data) || out.Stream != "delivery-1" || out.Revision != 4 || out.Position != 900 {
				t.Fatalf("recorded = %+v", out)
			}
			if !out.Metadata.OccurredAt.Equal(in.Metadata.OccurredAt) || out.Metadata.OccurredAt.Location() != time.UTC {
				t.Fatalf("OccurredAt = %v, want %v in UTC", out.Metadata.OccurredAt, in.Metadata.OccurredAt)
			}
			if out.Metadata.CorrelationID != "c" || out.Metadata.CausationID != "d" || out.Metadata.SchemaVersion != 2 {
				t.Fatalf("metadata = %+v", out.Metadata)
			}
		})
	}
}

func TestStreamReadWithoutPosition(t *testing.T) {
	var place positioner
	pos, err := place.place(unknownPosition)
	if err != nil {
		t.Fatal(err)
	}
	if pos != 0 {
		t.Fatalf("Position = %d, want 0 (unknown)", pos)
	}
}

// TestServerTombstone needs no server: the server's "$streamDeleted" event
// reads as the port's tombstone naming the stream.
func TestServerTombstone(t *testing.T) {
	out, err := toRecorded(&esdb.RecordedEvent{EventID: uuid.New(), EventType: "$streamDeleted", StreamID: "delivery-1",
		EventNumber: 9223372036854775807, Position: esdb.Position{Commit: 42, Prepare: 42}}, 42)
	if err != nil {
		t.Fatal(err)
	}
	e, err := domain.NewCodec().Decode(out.Type, out.Data)
	if err != nil {
		t.Fatal(err)
	}
	if tomb, ok := e.(domain.StreamDeleted); !ok || tomb.Stream != "delivery-1" || out.Position != 42 {
		t.Fatalf("got %+v at %d", e, out.Position)
	}
}

func TestIsSystem(t *testing.T) {
	tests := []struct {
		stream, typ string
		want        bool
	}{
		{"delivery-1", "delivery.received.v1", false},
		{"$stats-127.0.0.1:2113", "$statsCollected", true},
		{"$projections-$all", "$ProjectionsInitialized", true},
		{"delivery-1", "$>", true},
		{"$ce-delivery", "delivery.received.v1", true},
		{"delivery-1", "$streamDeleted", false},       // the server's tombstone: the port's too
		{"log-removed-delivery-1", removedType, true}, // a deletion's record: the chain's, not the port's
	}
	for _, tt := range tests {
		if got := isSystem(&esdb.RecordedEvent{StreamID: tt.stream, EventType: tt.typ}); got != tt.want {
			t.Errorf("isSystem(%s, %s) = %v, want %v", tt.stream, tt.typ, got, tt.want)
		}
	}
	if !isSystem(nil) {
		t.Error("isSystem(nil) = false, want true")
	}
}

// TestOpenRefusesBadConnectionString needs no server: parsing fails first,
// and the error must not echo the password.
func TestOpenRefusesBadConnectionString(t *testing.T) {
	_, err := Open(t.Context(), "http://admin:secret@127.0.0.1:1?tls=false", Options{})
	if err == nil {
		t.Fatal("Open accepted a connection string with a bad scheme")
	}
	if bytes.Contains([]byte(err.Error()), []byte("secret")) {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// TestOpenFailsWithoutServer points at a port nothing listens on; Open
// must fail within its context instead of handing out a dead store.
func TestOpenFailsWithoutServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	s, err := Open(ctx, "esdb://127.0.0.1:1?tls=false&maxDiscoverAttempts=1&discoveryInterval=10&gossipTimeout=100", Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded without a server")
	}
}
