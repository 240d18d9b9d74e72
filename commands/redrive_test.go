package commands_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// TestRedriveLeavesDeliveriesAtTheAttemptCapDead: a dead delivery that has
// had domain.MaxDeliveryAttempts is not put back in its queue, where its
// next attempt could only make it dead again. When it is the Endpoint's
// only dead delivery the redrive is INVALID_INPUT saying why and appends
// nothing, as a retry of it is; beside another dead delivery, only the
// other is put back and the call says how many it left dead.
func TestRedriveLeavesDeliveriesAtTheAttemptCapDead(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, _ := e.account(t, "Ada")
	ep := e.endpoint(t, ada.ID, domain.EndpointSettings{Name: "orders", Mode: domain.ModeQueue, Target: "127.0.0.1:3000"})
	// dead records a queued delivery that died after attempts attempts.
	dead := func(attempts int) string {
		t.Helper()
		id := commands.NewDeliveryID()
		d, err := domain.ReceiveAndAnswer(id, ep.ID, domain.AddressEndpoint, ada.ID, request("/q", webhookBody, len(webhookBody)), 202, "")
		if err != nil {
			t.Fatal(err)
		}
		changes := d.Changes()
		r := changes[0].(domain.DeliveryReceived)
		r.Queued = true
		changes[0] = r
		for i := range attempts {
			a := fmt.Sprint("a", i)
			changes = append(changes, domain.ForwardRequested{DeliveryID: id, AttemptID: a, EndpointID: ep.ID, Retry: true, Queued: true},
				domain.ForwardFailed{DeliveryID: id, AttemptID: a, Status: 503, Error: domain.FailureNoAgent})
		}
		changes = append(changes, domain.DeliveryDead{DeliveryID: id, AttemptID: fmt.Sprint("a", attempts-1), Failures: attempts,
			Reason: fmt.Sprintf("dead after %d attempts: last 503 no agent connected", attempts)})
		e.appendChanges(t, domain.DeliveryStream(id), domain.NoStream(), changes, id)
		return id
	}
	deadIDs := func() []string {
		t.Helper()
		rows, _, err := e.views.QueueList(ctx(t), ada.ID, ep.ID, readmodel.QueueDead, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range rows {
			ids = append(ids, r.DeliveryID)
		}
		return ids
	}

	capped := dead(domain.MaxDeliveryAttempts)
	before := e.lastPosition(t)
	res, err := e.svc.RedriveDead(ctx(t), ada.ID, "", ep.ID, "")
	t.Logf("redrive of a delivery with %d attempts: %+v, %v", domain.MaxDeliveryAttempts, res, err)
	if !errors.Is(err, domain.ErrInvalidInput) || !errors.Is(err, domain.ErrAttemptLimit) || res.Count != 0 {
		t.Fatalf("redrive of the only dead delivery, at %d attempts: put back %d, error %v; want none put back and INVALID_INPUT",
			domain.MaxDeliveryAttempts, res.Count, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("%d attempts or %d redrives, the most one delivery may have", domain.MaxDeliveryAttempts, domain.MaxDeliveryRedrives)) {
		t.Errorf("refusal %q does not say why", err)
	}
	e.appended(t, before, 0, "a refused redrive")
	if got := deadIDs(); len(got) != 1 || got[0] != capped {
		t.Fatalf("dead after the refused redrive: %v, want %s", got, capped)
	}

	other := dead(3)
	before = e.lastPosition(t)
	res, err = e.svc.RedriveDead(ctx(t), ada.ID, "", ep.ID, "")
	if err != nil || res.Count != 1 || res.LeftDead != 1 {
		t.Fatalf("redrive of one delivery at the cap and one at 3 attempts: %+v, %v; want 1 put back, 1 left dead", res, err)
	}
	e.appended(t, before, 1, "a redrive of one delivery")
	if got := deadIDs(); len(got) != 1 || got[0] != capped {
		t.Fatalf("dead after the redrive: %v, want only %s (%s put back)", got, capped, other)
	}
}

// TestRedrivesOfOneDeliveryAreBounded: a queued delivery that dies of its
// age spends no attempt, and a redrive restarts its age, so redriving it
// each time it dies could grow its stream for as long as the account went
// on. It is put back at most domain.MaxDeliveryRedrives times; then it
// stays dead and the redrive is INVALID_INPUT, appending nothing.
func TestRedrivesOfOneDeliveryAreBounded(t *testing.T) {
	e := newEnv(t, defaultConfig())
	ada, _ := e.account(t, "Ada")
	ep := e.endpoint(t, ada.ID, domain.EndpointSettings{Name: "orders", Mode: domain.ModeQueue, Target: "127.0.0.1:3000"})
	id := commands.NewDeliveryID()
	d, err := domain.ReceiveAndAnswer(id, ep.ID, domain.AddressEndpoint, ada.ID, request("/q", webhookBody, len(webhookBody)), 202, "")
	if err != nil {
		t.Fatal(err)
	}
	changes := d.Changes()
	r := changes[0].(domain.DeliveryReceived)
	r.Queued = true
	changes[0] = r
	e.appendChanges(t, domain.DeliveryStream(id), domain.NoStream(), changes, id)
	// The driver's decision for a delivery past its age: no attempt.
	diesOfAge := func() {
		t.Helper()
		e.appendChanges(t, domain.DeliveryStream(id), domain.Any(), []domain.Event{
			domain.DeliveryDead{DeliveryID: id, Reason: "dead: older than 1m0s before delivery"}}, id)
	}

	const tries = 3 * domain.MaxQueueAttempts
	redriven := 0
	for range tries {
		diesOfAge()
		res, err := e.svc.RedriveDead(ctx(t), ada.ID, "", ep.ID, "")
		if err != nil {
			if !errors.Is(err, domain.ErrInvalidInput) || res.Count != 0 || res.LeftDead != 1 {
				t.Fatalf("redrive %d: %+v, %v; want INVALID_INPUT, nothing put back, one left dead", redriven+1, res, err)
			}
			break
		}
		redriven += res.Count
	}
	recs, _ := e.stream(t, domain.DeliveryStream(id))
	t.Logf("%d redrives of one delivery dying of its age; its stream holds %d events", redriven, len(recs))
	if redriven != domain.MaxDeliveryRedrives {
		t.Fatalf("one delivery dying of its age was put back %d times in %d tries, want %d", redriven, tries, domain.MaxDeliveryRedrives)
	}
	before := e.lastPosition(t)
	if _, err := e.svc.RedriveDead(ctx(t), ada.ID, "", ep.ID, ""); err == nil || !strings.Contains(err.Error(), "redrives, the most one delivery may have") {
		t.Fatalf("redrive past the bound: %v; want it to say why", err)
	}
	e.appended(t, before, 0, "a redrive past the bound")
}
