// Package logtest holds what tests of several packages do on the event
// log: record a delivery as ingress does, append, read back and measure.
package logtest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
)

// BytesAfter sums the payload bytes of the events the log holds after
// position from: what a test's operations appended, counted, not timed.
func BytesAfter(t testing.TB, store domain.EventStore, from uint64) int64 {
	t.Helper()
	var n int64
	for {
		recs, err := store.ReadAll(context.Background(), from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return n
		}
		for _, r := range recs {
			n += int64(len(r.Data))
			from = r.Position
		}
	}
}

// Log is an event log tests append to and read back, with the codec its
// events are encoded by.
type Log struct {
	Store domain.EventStore
	Codec *domain.Codec
}

// seq numbers the deliveries Receive records, across every Log of a test
// binary, so that no two share an ID.
var seq atomic.Int64

// Receive records a delivery to an Endpoint and its first attempt, as
// ingress does before forwarding, and returns the command to forward.
func (l *Log) Receive(tb testing.TB, endpointID, accountID string) domain.ForwardCommand {
	tb.Helper()
	n := seq.Add(1)
	deliveryID, attemptID := fmt.Sprintf("del-%d", n), fmt.Sprintf("att-%d", n)
	body := []byte(fmt.Sprintf(`{"n":%d}`, n))
	headers := []domain.Header{{Name: "Content-Type", Value: "application/json"}, {Name: "X-Multi", Value: "a"}, {Name: "X-Multi", Value: "b"}}
	d, err := domain.ReceiveDelivery(deliveryID, endpointID, domain.AddressEndpoint, accountID, domain.CapturedRequest{
		Method: "POST", Target: "/hooks//x?y=%2F", Host: endpointID + ".localhost", Proto: "HTTP/1.1",
		RemoteAddr: "127.0.0.1:1", Headers: headers, Body: body, BodySize: int64(len(body)), Complete: true,
	})
	if err != nil {
		tb.Fatalf("receive: %v", err)
	}
	if err := d.RequestForward(attemptID, endpointID, false); err != nil {
		tb.Fatalf("request forward: %v", err)
	}
	l.AppendChanges(tb, domain.DeliveryStream(deliveryID), d.Expected(), d.Changes(), "corr-"+deliveryID)
	return domain.ForwardCommand{
		DeliveryID: deliveryID, AttemptID: attemptID, EndpointID: endpointID, AccountID: accountID,
		Method: "POST", Target: "/hooks//x?y=%2F", Headers: headers, Body: body,
		Timeout: 10 * time.Second, CorrelationID: "corr-" + deliveryID,
	}
}

// AppendChanges encodes an aggregate's changes and appends them to stream
// at the revision expected.
func (l *Log) AppendChanges(tb testing.TB, stream string, expected domain.ExpectedRevision, changes []domain.Event, correlation string) {
	tb.Helper()
	data := make([]domain.EventData, len(changes))
	for i, ev := range changes {
		var err error
		if data[i], err = l.Codec.Encode(uuid.NewString(), ev, time.Now(), domain.Trace{CorrelationID: correlation}); err != nil {
			tb.Fatalf("encode: %v", err)
		}
	}
	if _, err := l.Store.Append(context.Background(), stream, expected, data...); err != nil {
		tb.Fatalf("append to %s: %v", stream, err)
	}
}

// Events reads a whole stream (its first 1 000 events); a missing stream
// reads as empty.
func (l *Log) Events(tb testing.TB, stream string) []domain.RecordedEvent {
	tb.Helper()
	recs, err := l.Store.ReadStream(context.Background(), stream, 0, 1000)
	if errors.Is(err, domain.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		tb.Fatalf("read %s: %v", stream, err)
	}
	return recs
}

// Decode decodes a recorded event.
func (l *Log) Decode(tb testing.TB, r domain.RecordedEvent) domain.Event {
	tb.Helper()
	ev, err := l.Codec.Decode(r.Type, r.Data)
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	return ev
}

// Last returns the newest event of a stream, decoded.
func (l *Log) Last(tb testing.TB, stream string) (domain.RecordedEvent, domain.Event) {
	tb.Helper()
	recs := l.Events(tb, stream)
	if len(recs) == 0 {
		tb.Fatalf("stream %s is empty", stream)
	}
	r := recs[len(recs)-1]
	return r, l.Decode(tb, r)
}
