package commands_test

import (
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestCopiesOfADeliveryAreBounded: nine listeners on one Endpoint, one
// delivery retried 60 times. Each attempt goes to the primary and a copy
// to each of the eight others while its delivery may record them: the
// delivery records domain.MaxDeliveryCopies copies and every attempt, and
// that is what a page of its history reads; the listeners get the copies
// it records, no more, though an attempt is requested before the copies
// of the one before are recorded (the hub counts those it gave). Before,
// it recorded all 480 (540 rows read with the delivery on every page,
// live row and explanation; with 64 listeners and 200 attempts, 12 800);
// then the listeners got all 480, 280 of them recorded nowhere; then
// 201–325, counted from what the delivery had recorded as each attempt
// was requested. Every retry is still answered.
func TestCopiesOfADeliveryAreBounded(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, _ := e.account(t, "Ada")
	ep := e.endpoint(t, ada.ID, proxySettings)
	const listeners, retries = 9, 60
	given := e.listenersCountingCopies(t, ep.ID, ada.ID, listeners) // copies the listeners got
	id := e.receive(t, ep.ID, domain.AddressEndpoint, ada.ID, request("/hooks", webhookBody, len(webhookBody)), 503)
	for i := range retries {
		// Each retry meets the copies of the one before being recorded:
		// the command reads and decides again, the client does not.
		d, err := e.svc.RetryDelivery(ctx(t), ada.ID, id, nil)
		if err != nil {
			t.Fatalf("retry %d: %v", i+1, err)
		}
		if st := d.ResponseStatus; st == nil || *st != 200 {
			t.Fatalf("retry %d answered %v, want 200", i+1, st)
		}
	}
	// The copies of the last retry are recorded after its answer: read
	// once every copy is answered and the log is still.
	e.waitStill(t, func() bool { return given.Load() >= domain.MaxDeliveryCopies })
	page, err := e.views.DeliverySummaries(ctx(t), ep.ID, 10, "")
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("history: %d rows, %v", len(page.Items), err)
	}
	var attempts, copies int
	for _, a := range page.Items[0].Attempts {
		if a.Copy {
			copies++
		} else {
			attempts++
		}
	}
	t.Logf("%d retries to %d listeners gave %d copies; the delivery records %d attempts and %d copies", retries, listeners, given.Load(), attempts, copies)
	if g := given.Load(); g != domain.MaxDeliveryCopies {
		t.Errorf("%d copies given, want the %d the delivery records", g, domain.MaxDeliveryCopies)
	}
	if attempts != retries || copies != domain.MaxDeliveryCopies {
		t.Fatalf("the delivery records %d attempts and %d copies, want %d and %d (domain.MaxDeliveryCopies)", attempts, copies, retries, domain.MaxDeliveryCopies)
	}

	// Once the delivery has recorded its copies, an attempt gives none.
	before := given.Load()
	if _, err := e.svc.RetryDelivery(ctx(t), ada.ID, id, nil); err != nil {
		t.Fatalf("a retry past the copies: %v", err)
	}
	// The copies, had any been given, reach their listeners beside the
	// primary's answer, at once: a second is ample to see one.
	for end := time.Now().Add(time.Second); given.Load() == before && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	if g := given.Load() - before; g != 0 {
		t.Errorf("a retry of a delivery with its %d copies recorded gave %d copies, which it cannot record; want none", domain.MaxDeliveryCopies, g)
	}
}
