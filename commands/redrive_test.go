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
	if !strings.Contains(err.Error(), fmt.Sprintf("%d attempts, the most one delivery may have", domain.MaxDeliveryAttempts)) {
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
