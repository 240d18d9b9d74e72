package commands_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestConcurrentRetriesOfOneDelivery: 64 retries of one delivery at once
// (a console's Retry clicked again and again, a script retrying in
// parallel), to an Endpoint with nine listeners, so that each retry also
// meets the outcomes of the others and the copies of all of them being
// recorded. Every retry is performed and answered: 64 attempts, each with
// its outcome, and the copies the listeners got are those the delivery
// records, no more than domain.MaxDeliveryCopies. Before, 17 to 44 of the
// 64 retries were refused domain.ErrWrongExpectedRevision (CONFLICT), and
// 16 to 20 of the attempts recorded were left without an outcome.
func TestConcurrentRetriesOfOneDelivery(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, _ := e.account(t, "Ada")
	ep := e.endpoint(t, ada.ID, proxySettings)
	const listeners, retries = 9, 64
	given := e.listenersCountingCopies(t, ep.ID, ada.ID, listeners) // copies the listeners got
	id := e.receive(t, ep.ID, domain.AddressEndpoint, ada.ID, request("/hooks", webhookBody, len(webhookBody)), 503)
	var wg sync.WaitGroup
	errs := make([]error, retries)
	for i := range retries {
		wg.Go(func() {
			_, errs[i] = e.svc.RetryDelivery(ctx(t), ada.ID, id, nil)
		})
	}
	wg.Wait()
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			if failed <= 3 {
				t.Errorf("retry %d: %v", i+1, err)
			}
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d retries at once failed, want none", failed, retries)
	}

	e.waitStill(t, func() bool { return given.Load() >= domain.MaxDeliveryCopies })
	d, err := e.views.Delivery(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	var attempts, answered, copies int
	for _, a := range d.Attempts {
		switch {
		case a.Copy:
			copies++
		case a.Status != nil && *a.Status == 200:
			attempts++
			answered++
		default:
			attempts++
		}
	}
	t.Logf("%d retries at once to %d listeners: %d attempts, %d answered 200; %d copies given, %d recorded",
		retries, listeners, attempts, answered, given.Load(), copies)
	if attempts != retries || answered != retries {
		t.Errorf("the delivery records %d attempts, %d of them answered 200; want %d, all answered", attempts, answered, retries)
	}
	if g := given.Load(); g > domain.MaxDeliveryCopies || int(g) != copies {
		t.Errorf("%d copies given and %d recorded, want as many, at most %d (domain.MaxDeliveryCopies)", g, copies, domain.MaxDeliveryCopies)
	}
}

// TestARetryWhoseCallerLeftStopsWaitingForItsTurn: a retry waiting for its
// delivery's turn (another writer holds it) ends with its caller's
// context, records nothing and leaves the turn to the next; once the turn
// is free a retry is recorded and answered.
func TestARetryWhoseCallerLeftStopsWaitingForItsTurn(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, _ := e.account(t, "Ada")
	ep := e.endpoint(t, ada.ID, proxySettings)
	e.listenersCountingCopies(t, ep.ID, ada.ID, 1)
	id := e.receive(t, ep.ID, domain.AddressEndpoint, ada.ID, request("/hooks", webhookBody, len(webhookBody)), 503)
	end, err := e.rec.Turn(ctx(t), id) // another writer of the delivery
	if err != nil {
		t.Fatal(err)
	}
	before := e.lastPosition(t)
	left, cancel := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel()
	gave := make(chan error, 1)
	go func() {
		_, err := e.svc.RetryDelivery(left, ada.ID, id, nil)
		gave <- err
	}()
	select {
	case err := <-gave:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("retry whose caller left while it waited for its turn: %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		end()
		t.Fatal("a retry whose caller left 200 ms in still waited for its turn 10 s later")
	}
	if after := e.lastPosition(t); after != before {
		t.Errorf("the log moved from %d to %d for a retry that never had its turn", before, after)
	}
	if n := e.rec.TurnsHeld(); n != 1 {
		t.Errorf("%d deliveries with writers holding or waiting, want 1 (the holder)", n)
	}
	end()
	d, err := e.svc.RetryDelivery(ctx(t), ada.ID, id, nil)
	if err != nil {
		t.Fatalf("retry once the turn is free: %v", err)
	}
	answered := 0
	for _, a := range d.Attempts {
		if !a.Copy && a.Status != nil && *a.Status == 200 {
			answered++
		}
	}
	if answered != 1 {
		t.Errorf("the delivery records %d attempts answered 200 after its retry, want the retry's", answered)
	}
}
