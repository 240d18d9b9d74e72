package systemtest

import (
	"crypto/rand"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestRetryCostStaysFlatAndAttemptsEnd: one delivery's owner retries it
// over and over (response capture on, the local process answers 250 KiB).
// A retry reads the delivery's request and only what its stream gained
// since the last one, never its captured responses' bodies: retry 120
// costs about what retry 1 did, and 8 retries at once raise the relay's
// peak RSS by little. Past domain.MaxDeliveryAttempts a retry is refused
// (INVALID_INPUT, saying why) and nothing is recorded.
func TestRetryCostStaysFlatAndAttemptsEnd(t *testing.T) {
	answer := make([]byte, 250<<10)
	_, _ = rand.Read(answer)
	p := startProxyRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(answer)
	}), true)
	if resp := p.send(t, "POST", "/hook", nil, []byte(`{"n":1}`)); resp.Status != 200 {
		t.Fatalf("first delivery: %d", resp.Status)
	}
	d := deliveryAt(t, p.r, p.acct.Token, p.ep.ID, "/hook")
	const q = `mutation($id: ID!){ retryDelivery(id: $id){ id } }`
	retry := func() time.Duration {
		start := time.Now()
		p.r.MustGraphQL(t, p.acct.Token, q, map[string]any{"id": d.ID}, nil)
		return time.Since(start)
	}
	first := retry()
	for range 118 {
		retry()
	}
	last := retry()
	before := peakRSSKiB(t, p.r)
	var wg sync.WaitGroup
	start := time.Now()
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); retry() }()
	}
	wg.Wait()
	grew := peakRSSKiB(t, p.r) - before
	t.Logf("retry 1 took %s, retry 120 %s; 8 retries at once took %s and raised the relay's peak RSS by %d MiB (from %d MiB)",
		first, last, time.Since(start), grew>>10, before>>10)
	if grew > 64<<10 || last > 10*first {
		t.Fatalf("a retry's cost grows with the delivery's attempts: retry 120 took %s (retry 1: %s); 8 retries at once +%d MiB peak RSS", last, first, grew>>10)
	}

	// The first attempt and 128 retries so far: up to the bound, then refused.
	for range domain.MaxDeliveryAttempts - 129 {
		retry()
	}
	res := p.r.GraphQL(t, p.acct.Token, q, map[string]any{"id": d.ID})
	if len(res.Errors) == 0 || res.Errors[0].Code() != "INVALID_INPUT" || !strings.Contains(res.Errors[0].Message, "attempts") {
		t.Fatalf("retry past %d attempts: %+v, want INVALID_INPUT saying the delivery has had its attempts", domain.MaxDeliveryAttempts, res.Errors)
	}
	t.Logf("retry %d refused: %s", domain.MaxDeliveryAttempts, res.Errors[0].Message)
	var out struct {
		Delivery struct{ Attempts []struct{ ID string } }
	}
	p.r.MustGraphQL(t, p.acct.Token, `query($id: ID!){ delivery(id: $id){ attempts { id } } }`, map[string]any{"id": d.ID}, &out)
	if n := len(out.Delivery.Attempts); n != domain.MaxDeliveryAttempts {
		t.Fatalf("the delivery has %d attempts, want %d", n, domain.MaxDeliveryAttempts)
	}
}
