package ingress

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/ratelimit"
)

// TestAddressRateLimitRefusesAndCounts: past the burst an address answers
// 429 with Retry-After and records nothing; the refusals become one
// address.rate_limited.v1 with their count, and a quiet interval appends
// none.
func TestAddressRateLimitRefusesAndCounts(t *testing.T) {
	e := newEnv(t, Config{AddressRate: ratelimit.Rate{N: 1, Per: time.Minute, Burst: 2}})
	e.routes.set(Route{ID: "ep1", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeLog})
	other := Route{ID: "ep2", Kind: domain.AddressEndpoint, AccountID: "acc1", Mode: domain.ModeLog}
	e.routes.set(other)
	for i := range 5 {
		resp, body := e.do("POST", "ep1.localhost", "/", nil, []byte("x"))
		want := http.StatusNoContent
		if i >= 2 {
			want = http.StatusTooManyRequests
		}
		if resp.StatusCode != want {
			t.Fatalf("request %d: %d %q, want %d", i, resp.StatusCode, body, want)
		}
		if want == http.StatusTooManyRequests && (resp.Header.Get("Retry-After") != "60" || !strings.Contains(string(body), "rate limit")) {
			t.Fatalf("request %d: Retry-After %q body %q", i, resp.Header.Get("Retry-After"), body)
		}
	}
	if resp, _ := e.do("POST", "ep2.localhost", "/", nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("another address shares the bucket: %d", resp.StatusCode)
	}
	recs, err := e.store.ReadAll(t.Context(), 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	received := 0
	for _, r := range recs {
		if r.Type == domain.TypeDeliveryReceived {
			received++
		}
	}
	if received != 3 {
		t.Fatalf("%d deliveries recorded, want the 3 answered 204", received)
	}

	e.srv.appendRefusals(context.Background())
	e.srv.appendRefusals(context.Background()) // nothing refused since: no event
	evs := e.stream(domain.RefusalsStream("ep1"))
	if len(evs) != 1 {
		t.Fatalf("refusals stream holds %d events, want 1", len(evs))
	}
	if got := evs[0].(domain.AddressRateLimited); got.Refused != 3 || got.AddressKind != domain.AddressEndpoint {
		t.Fatalf("refusal event %+v", got)
	}
}

// TestInspectorQuotaRefuses: an inspector whose stored bytes reached the
// quota answers 429 and records nothing.
func TestInspectorQuotaRefuses(t *testing.T) {
	e := newEnv(t, Config{InspectorQuota: 1 << 10})
	e.addInspector("insp1", time.Hour)
	e.routes.set(Route{ID: "insp1", Kind: domain.AddressInspector, LastActivityAt: e.clock.Now(), StoredBytes: 1 << 10})
	before := e.lastPosition()
	resp, body := e.do("POST", "insp1.localhost", "/", nil, []byte("x"))
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), "storage quota (1.0 KiB) is used up") {
		t.Fatalf("answered %d %q", resp.StatusCode, body)
	}
	if after := e.lastPosition(); after != before {
		t.Fatalf("a request past the quota was recorded: log moved from %d to %d", before, after)
	}
	e.routes.set(Route{ID: "insp1", Kind: domain.AddressInspector, LastActivityAt: e.clock.Now(), StoredBytes: 1<<10 - 1})
	if resp, _ := e.do("POST", "insp1.localhost", "/", nil, []byte("x")); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("below the quota: %d", resp.StatusCode)
	}
}
