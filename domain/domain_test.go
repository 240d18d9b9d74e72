package domain_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

func req(body string, size int64) domain.CapturedRequest {
	return domain.CapturedRequest{Method: "POST", Target: "/x", Body: []byte(body), BodySize: size, Complete: int64(len(body)) == size}
}

func TestReceiveDeliveryInvariants(t *testing.T) {
	tests := []struct {
		name string
		req  domain.CapturedRequest
		want error
	}{
		{"complete body", req("abc", 3), nil},
		{"truncated body", req("ab", 10), nil},
		{"empty target", domain.CapturedRequest{Method: "GET", Complete: true}, domain.ErrInvalidInput},
		{"absolute target", domain.CapturedRequest{Method: "GET", Target: "http://x/", Complete: true}, domain.ErrInvalidInput},
		{"asterisk", domain.CapturedRequest{Method: "OPTIONS", Target: "*", Complete: true}, nil},
		{"no method", domain.CapturedRequest{Target: "/", Complete: true}, domain.ErrInvalidInput},
		{"body longer than size", domain.CapturedRequest{Method: "POST", Target: "/", Body: []byte("abc"), BodySize: 2}, domain.ErrInvalidInput},
		{"complete flag lies", domain.CapturedRequest{Method: "POST", Target: "/", Body: []byte("ab"), BodySize: 3, Complete: true}, domain.ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := domain.ReceiveDelivery("d1", "addr", domain.AddressInspector, "", tt.req)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err == nil {
				if len(d.Changes()) != 1 || d.Changes()[0].EventType() != domain.TypeDeliveryReceived {
					t.Fatalf("changes = %v", d.Changes())
				}
				if d.Expected() != domain.NoStream() {
					t.Fatalf("new delivery must append with NoStream")
				}
			}
		})
	}
}

func TestReceiveAndAnswer(t *testing.T) {
	tests := []struct {
		name   string
		status int
		want   error
	}{
		{"inspector 204", 204, nil},
		{"refusal 413", 413, nil},
		{"no status", 0, domain.ErrInvalidInput},
		{"not a status", 1000, domain.ErrInvalidInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := domain.ReceiveAndAnswer("d1", "addr", domain.AddressInspector, "", req("abc", 3), tt.status, "why")
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err != nil {
				return
			}
			changes := d.Changes()
			if len(changes) != 1 {
				t.Fatalf("changes = %v, want one DeliveryReceived", changes)
			}
			got := changes[0].(domain.DeliveryReceived).Answer
			if got == nil || *got != (domain.ReceiptAnswer{Status: tt.status, Reason: "why"}) {
				t.Fatalf("answer = %+v", got)
			}
			// Answered at receipt: a later answer raises nothing, also
			// once the delivery is loaded back from its stream.
			for _, d := range []*domain.Delivery{d, domain.LoadDelivery(changes)} {
				if !d.Answered() {
					t.Fatal("not answered")
				}
				before := len(d.Changes())
				d.Answer(500, "late")
				if len(d.Changes()) != before {
					t.Fatalf("a second answer was raised: %v", d.Changes())
				}
			}
		})
	}
}

func TestDeliveryAttempts(t *testing.T) {
	given := []domain.Event{
		domain.DeliveryReceived{DeliveryID: "d1", Address: "ep", AddressKind: domain.AddressEndpoint, AccountID: "acc", Method: "POST", Target: "/", Complete: true},
		domain.ForwardRequested{DeliveryID: "d1", AttemptID: "a1", EndpointID: "ep"},
	}
	t.Run("response for a pending attempt is recorded once", func(t *testing.T) {
		d := domain.LoadDelivery(given)
		d.RecordResponse(domain.ForwardResponded{AttemptID: "a1", Status: 200})
		d.RecordResponse(domain.ForwardResponded{AttemptID: "a1", Status: 500})
		d.RecordFailure(domain.ForwardFailed{AttemptID: "a1", Status: 504})
		if n := len(d.Changes()); n != 1 {
			t.Fatalf("%d events, want 1", n)
		}
		if d.Expected() != domain.Exact(1) {
			t.Fatalf("expected %v, want revision 1", d.Expected())
		}
	})
	t.Run("unknown attempt raises nothing", func(t *testing.T) {
		d := domain.LoadDelivery(given)
		d.RecordResponse(domain.ForwardResponded{AttemptID: "nope", Status: 200})
		if len(d.Changes()) != 0 {
			t.Fatalf("raised %v", d.Changes())
		}
	})
	t.Run("answer only once", func(t *testing.T) {
		d := domain.LoadDelivery(given)
		d.Answer(504, "timeout")
		d.Answer(502, "again")
		if len(d.Changes()) != 1 {
			t.Fatalf("raised %v", d.Changes())
		}
	})
}

func TestRetryPreconditions(t *testing.T) {
	proxy := domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}
	received := func(kind domain.AddressKind, complete bool) []domain.Event {
		return []domain.Event{domain.DeliveryReceived{DeliveryID: "d1", Address: "ep", AddressKind: kind, Method: "POST", Target: "/", Complete: complete}}
	}
	tests := []struct {
		name  string
		given []domain.Event
		ep    domain.EndpointStatus
		want  error
	}{
		{"allowed", received(domain.AddressEndpoint, true), proxy, nil},
		{"log mode", received(domain.AddressEndpoint, true), domain.EndpointStatus{Mode: domain.ModeLog, AgentConnected: true}, domain.ErrRetryNotProxy},
		{"inspector", received(domain.AddressInspector, true), proxy, domain.ErrRetryNotProxy},
		{"no agent", received(domain.AddressEndpoint, true), domain.EndpointStatus{Mode: domain.ModeProxy}, domain.ErrAgentNotConnected},
		{"incomplete", received(domain.AddressEndpoint, false), proxy, domain.ErrPayloadIncomplete},
		{"headers dropped", []domain.Event{domain.DeliveryReceived{DeliveryID: "d1", Address: "ep", AddressKind: domain.AddressEndpoint,
			Method: "POST", Target: "/", Complete: true, DroppedHeaders: 1}}, proxy, domain.ErrPayloadIncomplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := domain.LoadDelivery(tt.given)
			err := d.RequestRetry("a2", "acc", tt.ep, nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err == nil {
				ch := d.Changes()
				if len(ch) != 2 || ch[0].EventType() != domain.TypeRetryRequested || ch[1].EventType() != domain.TypeForwardRequested {
					t.Fatalf("changes = %v", ch)
				}
				if !d.Pending("a2") {
					t.Fatalf("retry attempt not pending")
				}
			} else if len(d.Changes()) != 0 {
				t.Fatalf("a refused retry raised %v", d.Changes())
			}
		})
	}
}

func TestInspectorExpiry(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	in, err := domain.NewInspector("abc", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	loaded := domain.LoadInspector(in.Changes())
	if loaded.ExpireIfIdle(now, now.Add(59*time.Minute)) {
		t.Fatalf("expired before its TTL")
	}
	if !loaded.ExpireIfIdle(now, now.Add(time.Hour)) || len(loaded.Changes()) != 1 {
		t.Fatalf("did not expire at its TTL: %v", loaded.Changes())
	}
	if !loaded.ExpireIfIdle(now, now.Add(2*time.Hour)) || len(loaded.Changes()) != 1 {
		t.Fatalf("expiring twice raised another event")
	}
	for _, bad := range []string{"", "UPPER", "a.b", "-a", "a-", strings.Repeat("a", 64)} {
		if _, err := domain.NewInspector(bad, time.Hour); !errors.Is(err, domain.ErrInvalidInput) {
			t.Errorf("id %q accepted", bad)
		}
	}
}

func TestEndpointSettings(t *testing.T) {
	tests := []struct {
		name string
		set  domain.EndpointSettings
		want string // field named in the error, "" for valid
	}{
		{"log without target", domain.EndpointSettings{Name: "a", Mode: domain.ModeLog}, ""},
		{"proxy 127.0.0.1", domain.EndpointSettings{Name: "a", Mode: domain.ModeProxy, Target: "127.0.0.1:3000"}, ""},
		{"proxy localhost", domain.EndpointSettings{Name: "a", Mode: domain.ModeProxy, Target: "localhost:65535"}, ""},
		{"proxy without target", domain.EndpointSettings{Name: "a", Mode: domain.ModeProxy}, "target"},
		{"remote host", domain.EndpointSettings{Name: "a", Mode: domain.ModeProxy, Target: "10.0.0.1:80"}, "target"},
		{"port 0", domain.EndpointSettings{Name: "a", Mode: domain.ModeProxy, Target: "127.0.0.1:0"}, "target"},
		{"port text", domain.EndpointSettings{Name: "a", Mode: domain.ModeProxy, Target: "127.0.0.1:http"}, "target"},
		{"leading zero port", domain.EndpointSettings{Name: "a", Mode: domain.ModeProxy, Target: "127.0.0.1:080"}, "target"},
		{"url", domain.EndpointSettings{Name: "a", Mode: domain.ModeProxy, Target: "http://127.0.0.1:80"}, "target"},
		{"no name", domain.EndpointSettings{Mode: domain.ModeLog}, "name"},
		{"bad mode", domain.EndpointSettings{Name: "a", Mode: "BOTH"}, "mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.set.Validate()
			var inv *domain.InvalidInputError
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want != "" && (!errors.As(err, &inv) || inv.Field != tt.want):
				t.Fatalf("err = %v, want invalid %s", err, tt.want)
			}
		})
	}
}

func TestEndpointReconfigureNoOpRaisesNothing(t *testing.T) {
	set := domain.EndpointSettings{Name: "a", Mode: domain.ModeLog}
	ep, err := domain.NewEndpoint("ep1", "acc", "", set)
	if err != nil {
		t.Fatal(err)
	}
	loaded := domain.LoadEndpoint(ep.Changes())
	if err := loaded.Reconfigure("", set); err != nil || len(loaded.Changes()) != 0 {
		t.Fatalf("no-op update: err=%v changes=%v", err, loaded.Changes())
	}
	set.Mode, set.Target = domain.ModeProxy, "127.0.0.1:3000"
	if err := loaded.Reconfigure("", set); err != nil || len(loaded.Changes()) != 1 {
		t.Fatalf("update: err=%v changes=%v", err, loaded.Changes())
	}
	if err := loaded.Delete(""); err != nil {
		t.Fatal(err)
	}
	if err := loaded.Delete(""); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if loaded.OwnedBy("acc") {
		t.Fatalf("a deleted Endpoint is still visible")
	}
}

func TestStripHopByHop(t *testing.T) {
	in := []domain.Header{
		{Name: "Connection", Value: "keep-alive, X-Secret"}, {Name: "X-Secret", Value: "1"},
		{Name: "keep-alive", Value: "timeout=5"}, {Name: "Transfer-Encoding", Value: "chunked"},
		{Name: "Te", Value: "trailers"}, {Name: "Upgrade", Value: "h2c"}, {Name: "Proxy-Connection", Value: "x"},
		{Name: "Trailer", Value: "X"}, {Name: "X-Keep", Value: "a"}, {Name: "Stripe-Signature", Value: "t=1"}, {Name: "X-Keep", Value: "b"},
	}
	got := domain.StripHopByHop(in)
	want := []domain.Header{{Name: "X-Keep", Value: "a"}, {Name: "Stripe-Signature", Value: "t=1"}, {Name: "X-Keep", Value: "b"}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	// Filtered in place, the result is the same.
	if inPlace := domain.AppendEndToEnd(in[:0], in); !slices.Equal(inPlace, want) {
		t.Fatalf("in place: got %v, want %v", inPlace, want)
	}
}

func TestExpectedRevisionMatches(t *testing.T) {
	tests := []struct {
		e      domain.ExpectedRevision
		last   uint64
		exists bool
		want   bool
	}{
		{domain.Any(), 0, false, true}, {domain.Any(), 5, true, true},
		{domain.NoStream(), 0, false, true}, {domain.NoStream(), 0, true, false},
		{domain.StreamExists(), 0, true, true}, {domain.StreamExists(), 0, false, false},
		{domain.Exact(3), 3, true, true}, {domain.Exact(3), 2, true, false}, {domain.Exact(0), 0, false, false},
	}
	for _, tt := range tests {
		if got := tt.e.Matches(tt.last, tt.exists); got != tt.want {
			t.Errorf("%v.Matches(%d, %v) = %v", tt.e, tt.last, tt.exists, got)
		}
	}
}

func TestResumeAttemptAppendsRightAfterTheRequest(t *testing.T) {
	d := domain.ResumeAttempt("d1", "a1", 1)
	d.RecordResponse(domain.ForwardResponded{AttemptID: "a1", Status: 200})
	d.RecordResponse(domain.ForwardResponded{AttemptID: "a2", Status: 200})
	ch := d.Changes()
	if len(ch) != 1 || ch[0].(domain.ForwardResponded).DeliveryID != "d1" {
		t.Fatalf("changes = %+v", ch)
	}
	if d.Expected() != domain.Exact(1) {
		t.Fatalf("expected %v, want revision 1 (the request's)", d.Expected())
	}
}

// TestInspectorPurge: given an inspector idle since last, when the retention
// sweep asks at now, then it is purged only past TTL plus retention, once,
// with its expiry recorded first if no request did.
func TestInspectorPurge(t *testing.T) {
	last := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const ttl, retention = time.Hour, 24 * time.Hour
	tests := []struct {
		name       string
		expired    bool // an expiry is already in the stream
		purged     bool // a purge is already in the stream
		now        time.Time
		wantPurged bool
		wantEvents []string
	}{
		{name: "before expiry", now: last.Add(30 * time.Minute)},
		{name: "expired, retention running", expired: true, now: last.Add(ttl + retention - time.Nanosecond)},
		{name: "retention over, expiry recorded", expired: true, now: last.Add(ttl + retention), wantPurged: true,
			wantEvents: []string{domain.TypeInspectorPurged}},
		{name: "retention over, expiry never recorded", now: last.Add(ttl + retention + time.Hour), wantPurged: true,
			wantEvents: []string{domain.TypeInspectorExpired, domain.TypeInspectorPurged}},
		{name: "already purged", expired: true, purged: true, now: last.Add(100 * ttl), wantPurged: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := []domain.Event{domain.InspectorCreated{InspectorID: "i1", IdleTTLMs: ttl.Milliseconds()}}
			if tt.expired {
				events = append(events, domain.InspectorExpired{InspectorID: "i1"})
			}
			if tt.purged {
				events = append(events, domain.InspectorPurged{InspectorID: "i1"})
			}
			in := domain.LoadInspector(events)
			got, err := in.PurgeIfRetained(last, tt.now, retention, 3)
			if err != nil || got != tt.wantPurged {
				t.Fatalf("PurgeIfRetained = %v, %v; want %v", got, err, tt.wantPurged)
			}
			var types []string
			for _, e := range in.Changes() {
				types = append(types, e.EventType())
			}
			if fmt.Sprint(types) != fmt.Sprint(tt.wantEvents) {
				t.Fatalf("events %v, want %v", types, tt.wantEvents)
			}
			if n := len(in.Changes()); n > 0 {
				p := in.Changes()[n-1].(domain.InspectorPurged)
				if p.Deliveries != 3 || p.RetentionMs != retention.Milliseconds() || p.LastActivityAt != "2026-01-01T00:00:00Z" {
					t.Fatalf("purge event %+v", p)
				}
			}
		})
	}
	if _, err := domain.LoadInspector(nil).PurgeIfRetained(last, last, 0, 0); err == nil {
		t.Fatal("a retention of 0 was accepted")
	}
}
