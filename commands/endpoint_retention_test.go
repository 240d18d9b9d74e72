package commands_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/commands"
	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/readmodel"
)

// endpointDeliveryAt records a delivery to an Endpoint at time at: answered
// 204, or (waiting) with a forward requested and no outcome yet.
func (e *env) endpointDeliveryAt(t *testing.T, endpointID, accountID string, at time.Time, waiting bool) string {
	t.Helper()
	id := commands.NewDeliveryID()
	req := domain.CapturedRequest{Method: "POST", Target: "/" + id, Host: "h", Proto: "HTTP/1.1", Body: []byte("b"), BodySize: 1, Complete: true}
	var (
		d   *domain.Delivery
		err error
	)
	if waiting {
		if d, err = domain.ReceiveDelivery(id, endpointID, domain.AddressEndpoint, accountID, req); err == nil {
			err = d.RequestForward("attempt-1", endpointID, false)
		}
	} else {
		d, err = domain.ReceiveAndAnswer(id, endpointID, domain.AddressEndpoint, accountID, req, 204, "")
	}
	if err != nil {
		t.Fatal(err)
	}
	data, _, err := e.codec.EncodeAll(nil, commands.NewEventID, d.Changes(), at, domain.Trace{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.store.Append(ctx(t), domain.DeliveryStream(id), domain.NoStream(), data...)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.views.WaitFor(ctx(t), res.Position); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSweepEndpointRetention: an Endpoint's own window removes exactly its
// answered deliveries received before now minus the window, by one
// decision; a delivery a forward waits on, newer ones and an Endpoint on
// the default window keep theirs; a second sweep at the same time decides
// nothing again.
func TestSweepEndpointRetention(t *testing.T) {
	cfg := defaultConfig()
	cfg.Retention = domain.RetentionLimits{Default: time.Hour, Min: time.Second, Max: 2 * time.Hour}
	e := newEnv(t, cfg)
	acc, _ := e.account(t, "team")
	short := e.endpoint(t, acc.ID, domain.EndpointSettings{Name: "short", Mode: domain.ModeLog, Retention: time.Minute})
	def := e.endpoint(t, acc.ID, domain.EndpointSettings{Name: "default", Mode: domain.ModeLog})
	if _, err := e.svc.CreateEndpoint(ctx(t), acc.ID, "", domain.EndpointSettings{Name: "long", Mode: domain.ModeLog, Retention: 3 * time.Hour}); !errors.Is(err, domain.ErrInvalidInput) {
		t.Fatalf("a window beyond the maximum: %v", err)
	}

	at := time.Now().UTC()
	gone := map[string]bool{
		e.endpointDeliveryAt(t, short.ID, acc.ID, at, false): true,
		e.endpointDeliveryAt(t, short.ID, acc.ID, at, false): true,
	}
	kept := []string{
		e.endpointDeliveryAt(t, short.ID, acc.ID, at, true),                      // waiting on its forward
		e.endpointDeliveryAt(t, short.ID, acc.ID, at.Add(10*time.Minute), false), // newer than the cutoff
		e.endpointDeliveryAt(t, def.ID, acc.ID, at, false),                       // on the 1h default
	}
	now := at.Add(5 * time.Minute)
	res, err := e.svc.SweepEndpointRetention(ctx(t), now)
	if err != nil || res.Decided != 1 || res.Deleted != 2 {
		t.Fatalf("sweep: %+v, %v; want 1 decision and 2 deletions", res, err)
	}
	for id := range gone {
		if _, err := e.store.ReadStream(ctx(t), domain.DeliveryStream(id), 0, 1); !errors.Is(err, domain.ErrStreamDeleted) {
			t.Errorf("stream of %s: %v, want deleted", id, err)
		}
	}
	for _, id := range kept {
		if _, err := e.views.DeliverySummary(ctx(t), id); err != nil {
			t.Errorf("delivery %s: %v, want kept", id, err)
		}
	}
	_, events := e.stream(t, domain.EndpointStream(short.ID))
	d, ok := events[len(events)-1].(domain.EndpointRetained)
	if !ok || d.Deliveries != 2 || d.RetentionMs != 60000 || d.Cutoff != now.Add(-time.Minute).Format(time.RFC3339Nano) {
		t.Fatalf("decision %+v", events[len(events)-1])
	}
	ep, err := e.views.Endpoint(ctx(t), short.ID)
	if err != nil || !ep.RetainedTo.Equal(now.Add(-time.Minute)) || ep.Retention != time.Minute {
		t.Fatalf("endpoint view %+v, %v", ep, err)
	}
	if res, err := e.svc.SweepEndpointRetention(ctx(t), now); err != nil || res != (commands.EndpointSweepResult{}) {
		t.Fatalf("second sweep: %+v, %v; want nothing", res, err)
	}
}

// TestEndpointRetentionReachesEveryAccount: one account whose Endpoints
// each have an old delivery at every sweep fill the decisions a sweep
// makes; another account's Endpoint is still decided, and its old
// delivery deleted, within as many sweeps as it takes to go through every
// Endpoint holding old deliveries once.
func TestEndpointRetentionReachesEveryAccount(t *testing.T) {
	cfg := defaultConfig()
	cfg.Retention = domain.RetentionLimits{Default: time.Hour, Min: time.Second, Max: 2 * time.Hour}
	e := newEnv(t, cfg)
	set := func(name string) domain.EndpointSettings {
		return domain.EndpointSettings{Name: name, Mode: domain.ModeLog, Retention: time.Minute}
	}
	other, _ := e.account(t, "other")
	// An Endpoint of the other account in the upper half of the ids, so a
	// full sweep's worth of the first account's sort before it.
	var victim readmodel.Endpoint
	for i := 0; victim.ID == "" || victim.ID < "n"; i++ {
		victim = e.endpoint(t, other.ID, set(fmt.Sprintf("v%d", i)))
	}
	busy, _ := e.account(t, "busy")
	var flood []string
	for below := 0; below < commands.SweepEndpoints; {
		ep := e.endpoint(t, busy.ID, set(fmt.Sprintf("f%d", len(flood))))
		flood = append(flood, ep.ID)
		if ep.ID < victim.ID {
			below++
		}
	}

	at := time.Now().UTC()
	old := e.endpointDeliveryAt(t, victim.ID, other.ID, at, false)
	// Every Endpoint holding old deliveries is decided once within this
	// many sweeps, however the ids sort.
	sweeps := (len(flood) + 1 + commands.SweepEndpoints - 1) / commands.SweepEndpoints
	decided := 0
	for k := range sweeps {
		for _, id := range flood {
			e.endpointDeliveryAt(t, id, busy.ID, at.Add(time.Duration(k)*2*time.Minute), false)
		}
		res, err := e.svc.SweepEndpointRetention(ctx(t), at.Add(time.Duration(k+1)*2*time.Minute))
		if err != nil {
			t.Fatalf("sweep %d: %v", k, err)
		}
		decided += res.Decided
	}
	if _, err := e.store.ReadStream(ctx(t), domain.DeliveryStream(old), 0, 1); !errors.Is(err, domain.ErrStreamDeleted) {
		t.Fatalf("after %d sweeps (%d decisions, %d Endpoints of one account with old deliveries, %d of them sorting before the other account's): the other account's old delivery: %v, want deleted",
			sweeps, decided, len(flood), commands.SweepEndpoints, err)
	}
}

// TestEndpointRetentionDeletesEveryEndpointsInTurn: an Endpoint with more
// deliveries past its window than a sweep deletes does not hold another
// Endpoint's deletions until its own are done: each page of deletions goes
// on after the Endpoint the page before ended with, so with two Endpoints
// holding old deliveries, each has a page within two.
func TestEndpointRetentionDeletesEveryEndpointsInTurn(t *testing.T) {
	commands.SmallEndpointSweeps(t, 1, 10)
	cfg := defaultConfig()
	cfg.Retention = domain.RetentionLimits{Default: time.Hour, Min: time.Second, Max: 2 * time.Hour}
	e := newEnv(t, cfg)
	set := domain.EndpointSettings{Name: "hooks", Mode: domain.ModeLog, Retention: time.Minute}
	busy, _ := e.account(t, "busy")
	other, _ := e.account(t, "other")
	// Created first, so it comes first in the views' own order.
	big := e.endpoint(t, busy.ID, set)
	small := e.endpoint(t, other.ID, set)
	at := time.Now().UTC()
	for range 35 {
		e.endpointDeliveryAt(t, big.ID, busy.ID, at, false)
	}
	old := e.endpointDeliveryAt(t, small.ID, other.ID, at, false)
	now := at.Add(5 * time.Minute)
	deleted := 0
	for range 2 {
		res, err := e.svc.SweepEndpointRetention(ctx(t), now)
		if err != nil {
			t.Fatal(err)
		}
		deleted += res.Deleted
	}
	if _, err := e.store.ReadStream(ctx(t), domain.DeliveryStream(old), 0, 1); !errors.Is(err, domain.ErrStreamDeleted) {
		t.Fatalf("after 2 sweeps of one page of 10 (%d deleted), the other account's old delivery: %v, want deleted", deleted, err)
	}
}
