package projections

import (
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// BenchmarkAddress measures the per-request routing lookup of ingress, for
// an inspector and for an Endpoint id, on views that also hold history.
func BenchmarkAddress(b *testing.B) {
	s := newSynth(b, []byte("{}"))
	v := s.open("views.db")
	s.queue(domain.InspectorStream("insp-1"), domain.InspectorCreated{InspectorID: "insp-1", IdleTTLMs: 60000})
	s.queue(domain.EndpointStream("ep-0"), domain.EndpointCreated{EndpointID: "ep-0", AccountID: "acct-1",
		Name: "hooks", Mode: domain.ModeProxy, Target: "http://127.0.0.1:9/", ResponseCapture: true})
	applyTB(b, v, s.batch(256))
	for _, tc := range []struct {
		name string
		id   string
		kind domain.AddressKind
	}{
		{"inspector", "insp-1", domain.AddressInspector},
		{"endpoint", "ep-0", domain.AddressEndpoint},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx := b.Context()
			for b.Loop() {
				a, err := v.Address(ctx, tc.id)
				if err != nil {
					b.Fatal(err)
				}
				if a.Kind != tc.kind {
					b.Fatalf("kind %s, want %s", a.Kind, tc.kind)
				}
			}
		})
	}
}

// BenchmarkReads measures the other per-request reads: the token check of
// the GraphQL API, an Endpoint, one delivery and a page of history.
func BenchmarkReads(b *testing.B) {
	s := newSynth(b, []byte("{}"))
	v := s.open("views.db")
	hash := hashToken("secret")
	s.queue(domain.AccountStream("acct-1"), domain.AccountCreated{AccountID: "acct-1", Name: "a"})
	s.queue(domain.AccountStream("acct-1"), domain.TokenIssued{AccountID: "acct-1", TokenID: "t1", TokenHash: hash})
	s.queue(domain.EndpointStream("ep-0"), domain.EndpointCreated{EndpointID: "ep-0", AccountID: "acct-1",
		Name: "hooks", Mode: domain.ModeProxy, Target: "http://127.0.0.1:9/", ResponseCapture: true})
	applyTB(b, v, s.batch(256))
	ctx := b.Context()
	// AccountQuota runs on every request to an Endpoint (its account's quota).
	b.Run("AccountQuota", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.AccountQuota(ctx, "acct-1"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AccountByTokenHash", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.AccountByTokenHash(ctx, hash); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Endpoint", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.Endpoint(ctx, "ep-0"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Delivery", func(b *testing.B) {
		for b.Loop() {
			if _, err := v.Delivery(ctx, "d-00000100"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Deliveries", func(b *testing.B) {
		for b.Loop() {
			if p, err := v.Deliveries(ctx, "ep-0", 20, ""); err != nil || len(p.Items) != 20 {
				b.Fatal(len(p.Items), err)
			}
		}
	})
}

// TestBatchSplitDoesNotMatter applies the same deliveries (received, then
// forwarded, answered, answered again, forwarded once more) once as a single
// batch and once an event per batch: the deferred delivery updates of a
// batch must leave exactly the rows the event-by-event updates leave.
func TestBatchSplitDoesNotMatter(t *testing.T) {
	s := newSynth(t, []byte("b"))
	for i := range 6 {
		s.delivery(fmt.Sprintf("ep-%d", i%2))
		id := fmt.Sprintf("d-%08d", s.n)
		stream := domain.DeliveryStream(id)
		s.queue(stream, domain.DeliveryAnswered{DeliveryID: id, Status: 502})
		s.queue(stream, domain.ForwardRequested{DeliveryID: id, AttemptID: "a2", Retry: true})
		s.queue(stream, domain.ForwardFailed{DeliveryID: id, AttemptID: "a2", Status: 504, Error: "timeout"})
	}
	// An answer for a delivery received only later in the batch changes nothing.
	s.queue(domain.DeliveryStream("late"), domain.DeliveryAnswered{DeliveryID: "late", Status: 204})
	s.queue(domain.DeliveryStream("late"), domain.DeliveryReceived{DeliveryID: "late", Address: "insp",
		AddressKind: domain.AddressInspector, Method: "GET", Target: "/", Complete: true})
	events := s.take()

	whole, split := s.open("whole.db"), s.open("split.db")
	applyTB(t, whole, events)
	for i := range events {
		applyTB(t, split, events[i:i+1])
	}
	want := dump(t, split)
	if len(want["attempts"]) != 12 || len(want["deliveries"]) != 7 {
		t.Fatalf("split views hold %d attempts and %d deliveries, want 12 and 7", len(want["attempts"]), len(want["deliveries"]))
	}
	compareDumps(t, "one batch", want, dump(t, whole))
	compareHistories(t, "one batch", histories(t, split), histories(t, whole))
	d, err := whole.Delivery(t.Context(), "d-00000001")
	if err != nil || status(d.ResponseStatus) != "504" || d.UpdatedPosition != 7 {
		t.Fatalf("d-00000001: status %s, updated at %d, %v; want 504 at 7", status(d.ResponseStatus), d.UpdatedPosition, err)
	}
	late, err := whole.Delivery(t.Context(), "late")
	if err != nil || late.ResponseStatus != nil {
		t.Fatalf("late: status %s, %v; want nil", status(late.ResponseStatus), err)
	}
}

// BenchmarkAccountUsage measures me { usage }: its count of the deliveries
// of the last day walks deliveries_by_account, so it grows with them.
func BenchmarkAccountUsage(b *testing.B) {
	s := newSynth(b, []byte("{}"))
	v := s.open("views.db")
	s.queue(domain.AccountStream("acct-1"), domain.AccountCreated{AccountID: "acct-1", Name: "a"})
	for i := range 4 {
		id := fmt.Sprintf("ep-%d", i)
		s.queue(domain.EndpointStream(id), domain.EndpointCreated{EndpointID: id, AccountID: "acct-1", Name: "hooks", Mode: domain.ModeLog})
	}
	applyTB(b, v, s.take())
	for range 25 {
		applyTB(b, v, s.batch(4000))
	}
	ctx := b.Context()
	for b.Loop() {
		u, err := v.AccountUsage(ctx, "acct-1", time.Time{})
		if err != nil || u.DeliveriesWindow != 100_000 {
			b.Fatal(u, err)
		}
	}
}
