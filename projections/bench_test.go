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

// synth appends the events of synthetic deliveries to a real event store in
// a temp dir and hands them over as the subscription would, so tests and
// benchmarks can apply them to views directly (measuring the projection
// alone) while the views can still read bodies and headers from the log.
type synth struct {
	tb    testing.TB
	store *sqlite.Store
	codec *domain.Codec
	n     int    // deliveries made so far
	body  []byte // body of every delivery
	at    time.Time
	last  uint64                                // position of the last event taken
	waits []func() (domain.AppendResult, error) // queued appends
	// live: take receives the events by subscription, as Run does (from the
	// log's tail, with the payloads they were encoded from), instead of
	// reading them back (decoded by the views).
	live bool
}

// newSynth opens an empty store in a temp dir; it is closed at cleanup,
// after the views opened with open.
func newSynth(tb testing.TB, body []byte) *synth {
	tb.Helper()
	store, err := sqlite.Open(tb.Context(), filepath.Join(tb.TempDir(), "events.db"), sqlite.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := store.Close(); err != nil {
			tb.Error(err)
		}
	})
	return &synth{tb: tb, store: store, codec: domain.NewCodec(), body: body, at: t0}
}

// open opens views named name on the synth's store, without Run.
func (s *synth) open(name string) *Runner {
	s.tb.Helper()
	v, err := Open(s.tb.Context(), filepath.Join(s.tb.TempDir(), name), s.store, Options{})
	if err != nil {
		s.tb.Fatal(err)
	}
	s.tb.Cleanup(func() {
		if err := v.Close(); err != nil {
			s.tb.Error(err)
		}
	})
	return v
}

// queue appends events to stream, in one append, without waiting for it:
// queued appends share the store's transactions and land in queue order.
func (s *synth) queue(stream string, events ...domain.Event) {
	s.tb.Helper()
	data := make([]domain.EventData, len(events))
	for i, ev := range events {
		s.at = s.at.Add(time.Millisecond)
		d, err := s.codec.Encode(uuid.NewString(), ev, s.at, domain.Trace{})
		if err != nil {
			s.tb.Fatal(err)
		}
		data[i] = d
	}
	wait, err := s.store.QueueAppend(s.tb.Context(), stream, domain.Any(), data...)
	if err != nil {
		s.tb.Fatal(err)
	}
	s.waits = append(s.waits, wait)
}

// take waits for the queued appends and returns every event appended since
// the last take, in position order.
func (s *synth) take() []domain.RecordedEvent {
	s.tb.Helper()
	var end uint64
	for _, wait := range s.waits {
		res, err := wait()
		if err != nil {
			s.tb.Fatal(err)
		}
		end = max(end, res.Position)
	}
	s.waits = nil
	var out []domain.RecordedEvent
	if s.live {
		sub, err := s.store.SubscribeAll(s.tb.Context(), s.last)
		if err != nil {
			s.tb.Fatal(err)
		}
		defer sub.Close()
		for s.last < end {
			evs, err := sub.Recv(s.tb.Context())
			if err != nil {
				s.tb.Fatal(err)
			}
			out = append(out, evs...)
			s.last = evs[len(evs)-1].Position
		}
		return out
	}
	for {
		evs, err := s.store.ReadAll(s.tb.Context(), s.last, 1000)
		if err != nil {
			s.tb.Fatal(err)
		}
		if len(evs) == 0 {
			return out
		}
		out = append(out, evs...)
		s.last = evs[len(evs)-1].Position
	}
}

// nextID names the next delivery.
func (s *synth) nextID() string {
	s.n++
	return fmt.Sprintf("d-%08d", s.n)
}

// delivery queues the four events of one proxied delivery to address.
func (s *synth) delivery(address string) {
	id := s.nextID()
	stream := domain.DeliveryStream(id)
	s.queue(stream, domain.DeliveryReceived{DeliveryID: id, Address: address, AddressKind: domain.AddressEndpoint,
		AccountID: "acct-1", Method: "POST", Target: "/hook", Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}},
		Body: s.body, BodySize: int64(len(s.body)), Complete: true})
	s.queue(stream, domain.ForwardRequested{DeliveryID: id, AttemptID: "a1", EndpointID: address})
	s.queue(stream, domain.ForwardResponded{DeliveryID: id, AttemptID: "a1", Status: 200, Body: []byte("ok"), BodySize: 2, Captured: true, DurationMs: 3})
	s.queue(stream, domain.DeliveryAnswered{DeliveryID: id, Status: 200})
}

// inspectorDelivery queues a request to an inspector answered 204 by the
// relay itself: DeliveryReceived and DeliveryAnswered in one append, or
// (oneEvent) a DeliveryReceived that carries the answer, as ingress records
// it now.
func (s *synth) inspectorDelivery(address string, oneEvent bool) {
	id := s.nextID()
	received := domain.DeliveryReceived{DeliveryID: id, Address: address, AddressKind: domain.AddressInspector,
		Method: "POST", Target: "/hook?attempt=1", Host: address + ".relay.localhost", Proto: "HTTP/1.1",
		RemoteAddr: "127.0.0.1:40000", Headers: benchHeaders, Body: s.body, BodySize: int64(len(s.body)), Complete: true}
	if oneEvent {
		received.Answer = &domain.ReceiptAnswer{Status: 204}
		s.queue(domain.DeliveryStream(id), received)
		return
	}
	s.queue(domain.DeliveryStream(id), received, domain.DeliveryAnswered{DeliveryID: id, Status: 204})
}

// benchHeaders are the headers of a typical signed webhook.
var benchHeaders = []domain.Header{
	{Name: "Accept", Value: "*/*"}, {Name: "Content-Type", Value: "application/json"},
	{Name: "User-Agent", Value: "Stripe/1.0 (+https://stripe.com/docs/webhooks)"},
	{Name: "Stripe-Signature", Value: "t=1492774577,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"},
	{Name: "X-Request-Id", Value: "0f6c1e0c-8b4e-4a43-9a53-6f4c2ad3e8a1"}, {Name: "Accept-Encoding", Value: "gzip"},
}

// batch queues n proxied deliveries spread over a few addresses and returns
// every event queued since the last take.
func (s *synth) batch(n int) []domain.RecordedEvent {
	for i := range n {
		s.delivery(fmt.Sprintf("ep-%d", i%4))
	}
	return s.take()
}

func applyTB(tb testing.TB, v *Runner, events []domain.RecordedEvent) {
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
	s := newSynth(b, bytes.Repeat([]byte("x"), 1024))
	v := s.open("views.db")
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

// BenchmarkApplyInspectorDeliveries measures the projection applying
// requests to inspectors, the relay's busiest path: each op is one batch of
// 64 deliveries (1 KiB bodies, six headers) spread over 8 inspectors, read
// back from a real SQLite log. "pairs" records each as DeliveryReceived and
// DeliveryAnswered, "answered-at-receipt" as one DeliveryReceived carrying
// the answer; "/live" receives them as Run does, by subscription from the
// log's tail, with the payloads they were encoded from.
func BenchmarkApplyInspectorDeliveries(b *testing.B) {
	for _, bc := range []struct {
		name     string
		oneEvent bool
		live     bool
	}{{"pairs", false, false}, {"answered-at-receipt", true, false}, {"answered-at-receipt/live", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			const perBatch, inspectors = 64, 8
			s := newSynth(b, bytes.Repeat([]byte(`{"k":"v"}`), 1024/9+1)[:1024])
			s.live = bc.live
			v := s.open("views.db")
			for i := range inspectors {
				id := fmt.Sprintf("insp-%d", i)
				s.queue(domain.InspectorStream(id), domain.InspectorCreated{InspectorID: id, IdleTTLMs: 86400000})
			}
			applyTB(b, v, s.take())
			deliveries := 0
			var cpu time.Duration
			for b.Loop() {
				b.StopTimer()
				for i := range perBatch {
					s.inspectorDelivery(fmt.Sprintf("insp-%d", i%inspectors), bc.oneEvent)
				}
				batch := s.take()
				b.StartTimer()
				cpu += applyOnThread(b, v, batch)
				deliveries += perBatch
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(deliveries), "ns/delivery")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(deliveries), "cpu-ns/delivery")
			b.ReportMetric(float64(deliveries)/b.Elapsed().Seconds(), "deliveries/s")
		})
	}
}

// TestHeapStaysFlat applies 2,000 then 20,000 deliveries with 4 KiB bodies
// and logs the Go heap in use after each: bodies live only in the log, so ten
// times the history must not mean ten times the heap. The bound is loose
// (a quarter of the bodies' size) so only real retention fails it.
func TestHeapStaysFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("applies 80,000 events")
	}
	if raceEnabled {
		t.Skip("heap figures mean nothing under the race detector; scripts/test runs this without -race")
	}
	s := newSynth(t, bytes.Repeat([]byte("b"), 4096))
	v := s.open("views.db")
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
