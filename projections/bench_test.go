package projections

import (
	"bytes"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/eventstore/sqlite"
)

// synth produces the events of forwarded deliveries with positions, as the
// subscription would deliver them, without going through a store: it
// measures the projection alone.
type synth struct {
	t     testing.TB
	codec *domain.Codec
	pos   uint64
	n     int
	body  []byte
}

func (s *synth) event(stream string, rev uint64, ev domain.Event) domain.RecordedEvent {
	data, err := s.codec.Encode(uuid.NewString(), ev, t0.Add(time.Duration(s.pos)*time.Millisecond), domain.Trace{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.pos++
	return domain.RecordedEvent{EventData: data, Stream: stream, Revision: rev, Position: s.pos}
}

// delivery returns the four events of one proxied delivery to address.
func (s *synth) delivery(address string) []domain.RecordedEvent {
	s.n++
	id := fmt.Sprintf("d-%08d", s.n)
	stream := domain.DeliveryStream(id)
	return []domain.RecordedEvent{
		s.event(stream, 0, domain.DeliveryReceived{DeliveryID: id, Address: address, AddressKind: domain.AddressEndpoint,
			AccountID: "acct-1", Method: "POST", Target: "/hook", Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}},
			Body: s.body, BodySize: int64(len(s.body)), Complete: true}),
		s.event(stream, 1, domain.ForwardRequested{DeliveryID: id, AttemptID: "a1", EndpointID: address}),
		s.event(stream, 2, domain.ForwardResponded{DeliveryID: id, AttemptID: "a1", Status: 200, Body: []byte("ok"), BodySize: 2, Captured: true, DurationMs: 3}),
		s.event(stream, 3, domain.DeliveryAnswered{DeliveryID: id, Status: 200}),
	}
}

// batch returns the events of n deliveries spread over a few addresses.
func (s *synth) batch(n int) []domain.RecordedEvent {
	out := make([]domain.RecordedEvent, 0, 4*n)
	for i := range n {
		out = append(out, s.delivery(fmt.Sprintf("ep-%d", i%4))...)
	}
	return out
}

// openBare opens views on an empty real store, without Run.
func openBare(tb testing.TB) *Views {
	tb.Helper()
	dir := tb.TempDir()
	ctx := tb.Context()
	store, err := sqlite.Open(ctx, filepath.Join(dir, "events.db"), sqlite.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	v, err := Open(ctx, filepath.Join(dir, "views.db"), store, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := v.Close(); err != nil {
			tb.Error(err)
		}
		if err := store.Close(); err != nil {
			tb.Error(err)
		}
	})
	return v
}

func applyTB(tb testing.TB, v *Views, events []domain.RecordedEvent) {
	tb.Helper()
	v.writeMu.Lock()
	defer v.writeMu.Unlock()
	if err := v.applyBatch(tb.Context(), events); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkApply measures events applied per second, in batches of 256
// events (64 proxied deliveries with 1 KiB bodies), as Run applies them.
func BenchmarkApply(b *testing.B) {
	v := openBare(b)
	s := &synth{t: b, codec: domain.NewCodec(), body: bytes.Repeat([]byte("x"), 1024)}
	events := 0
	for b.Loop() {
		b.StopTimer()
		batch := s.batch(64)
		b.StartTimer()
		applyTB(b, v, batch)
		events += len(batch)
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// TestHeapStaysFlat applies 2,000 then 20,000 deliveries with 4 KiB bodies
// and logs the Go heap in use after each: bodies live only in SQLite, so ten
// times the history must not mean ten times the heap. The bound is loose
// (a quarter of the bodies' size) so only real retention fails it.
func TestHeapStaysFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("applies 80,000 events")
	}
	if raceEnabled {
		t.Skip("heap figures mean nothing under the race detector; run without -race")
	}
	v := openBare(t)
	s := &synth{t: t, codec: domain.NewCodec(), body: bytes.Repeat([]byte("b"), 4096)}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	fill := func(total int) {
		for s.n < total {
			applyTB(t, v, s.batch(min(128, total-s.n)))
		}
	}
	fill(2000)
	small := heap()
	fill(20000)
	large := heap()
	t.Logf("heap in use: %d KiB after 2k deliveries, %d KiB after 20k (bodies: %d KiB)", small>>10, large>>10, 20000*4)
	if large > small && large-small > 20000*4096/4 {
		t.Errorf("heap grew by %d KiB from 2k to 20k deliveries: something keeps deliveries in memory", (large-small)>>10)
	}
	p, err := v.Deliveries(t.Context(), "ep-0", 1, "")
	if err != nil || len(p.Items) != 1 || p.Items[0].ID != "d-00019997" || len(p.Items[0].Body) != 4096 {
		t.Fatalf("newest delivery of ep-0: %d items, %v", len(p.Items), err)
	}
}
