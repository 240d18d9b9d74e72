package projections

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/relayhq/relay/domain"
)

// story appends a tenant's whole life: an inspector with requests and
// expiry, an account with tokens, a PROXY Endpoint with agents, forwards,
// failures, retries, reconfiguration and deletion. Every view table gets rows.
func story(ctx context.Context, w writer, n string, at time.Time) error {
	insp, acct, ep := "insp-"+n, "acct-"+n, "ep-"+n
	tick := func() time.Time { at = at.Add(time.Second); return at }
	proxy := domain.EndpointSettings{Name: "ep " + n, Mode: domain.ModeProxy, Target: "127.0.0.1:3000", ResponseCapture: true}
	steps := []func() (uint64, error){
		func() (uint64, error) { return w.newInspector(ctx, insp, time.Hour, tick()) },
		func() (uint64, error) { return w.signUp(ctx, acct, "Tenant "+n, "tok-a-"+n, "secret-a-"+n, tick()) },
		func() (uint64, error) { return w.newEndpoint(ctx, ep, acct, proxy, tick()) },
		func() (uint64, error) {
			return w.agent(ctx, ep, domain.AgentConnected{EndpointID: ep, AgentID: "ag-1-" + n, Target: proxy.Target}, tick())
		},
		func() (uint64, error) {
			return w.agent(ctx, ep, domain.AgentConnected{EndpointID: ep, AgentID: "ag-2-" + n, Target: proxy.Target}, tick())
		},
	}
	for k := range 4 {
		id := fmt.Sprintf("di-%s-%d", n, k)
		steps = append(steps,
			func() (uint64, error) {
				return w.receive(ctx, id, insp, domain.AddressInspector, "", request(fmt.Sprintf("/i/%d?x", k), "hello"), tick())
			},
			func() (uint64, error) {
				return w.onDelivery(ctx, id, tick(), func(d *domain.Delivery) error { d.Answer(204, ""); return nil })
			})
	}
	steps = append(steps, func() (uint64, error) {
		return w.receiveAnswered(ctx, "da-"+n, insp, domain.AddressInspector, "", request("/answered", "at receipt"), 204, tick())
	})
	for k := range 4 {
		id := fmt.Sprintf("de-%s-%d", n, k)
		steps = append(steps,
			func() (uint64, error) {
				return w.receive(ctx, id, ep, domain.AddressEndpoint, acct, request("/e", fmt.Sprintf(`{"k":%d}`, k)), tick())
			},
			func() (uint64, error) {
				return w.onDelivery(ctx, id, tick(), func(d *domain.Delivery) error { return d.RequestForward("a1", ep, false) })
			},
			func() (uint64, error) {
				return w.onDelivery(ctx, id, tick(), func(d *domain.Delivery) error {
					if k%2 == 0 {
						d.RecordResponse(domain.ForwardResponded{AttemptID: "a1", Status: 200 + k, Headers: []domain.Header{{Name: "A", Value: "1"}},
							Body: []byte("ok"), BodySize: 2, Captured: true, DurationMs: int64(k)})
						d.Answer(200+k, "")
					} else {
						d.RecordFailure(domain.ForwardFailed{AttemptID: "a1", Status: 502, Error: "refused", DurationMs: 1})
						d.Answer(502, "")
					}
					return nil
				})
			},
			func() (uint64, error) {
				return w.onDelivery(ctx, id, tick(), func(d *domain.Delivery) error {
					var edit *domain.RequestEdit
					if k == 1 { // an edited retry: its body kept apart (attempt_edits)
						body := []byte(`{"edited":true}`)
						edit = &domain.RequestEdit{SetHeaders: []domain.Header{{Name: "X-Debug", Value: "1"}}, Body: &body}
					}
					return d.RequestRetry("a2", acct, domain.EndpointStatus{Mode: domain.ModeProxy, AgentConnected: true}, edit)
				})
			},
			func() (uint64, error) {
				return w.onDelivery(ctx, id, tick(), func(d *domain.Delivery) error {
					if k < 2 { // the Endpoint captured responses, then stopped
						d.RecordResponse(domain.ForwardResponded{AttemptID: "a2", Status: 201, Headers: []domain.Header{{Name: "B", Value: "2"}},
							Body: []byte("created"), BodySize: 7, Captured: true, DurationMs: 3})
						return nil
					}
					d.RecordResponse(domain.ForwardResponded{AttemptID: "a2", Status: 201, BodySize: 0, Captured: false, DurationMs: 3})
					return nil
				})
			})
	}
	// An inspector purged by retention whose deliveries are still to be
	// deleted (inspectors_purging; deleting a stream is left to
	// TestPurgeDropsRowsAndRebuildsEqual: its tombstone carries the clock's
	// time, which would move the stats' horizon past the stories').
	gone := "ip-" + n
	steps = append(steps, func() (uint64, error) { return w.newInspector(ctx, gone, time.Hour, tick()) })
	for k := range 2 {
		steps = append(steps, func() (uint64, error) {
			return w.receiveAnswered(ctx, fmt.Sprintf("dp-%s-%d", n, k), gone, domain.AddressInspector, "", request("/gone", "old"), 204, tick())
		})
	}
	steps = append(steps,
		func() (uint64, error) {
			last := tick()
			return w.purgeInspector(ctx, gone, last, last.Add(3*time.Hour), 2)
		})
	steps = append(steps,
		func() (uint64, error) { // a queued delivery whose first attempt failed (the queue view)
			qid := "queued-" + n
			return w.save(ctx, domain.DeliveryStream(qid), domain.NoStream(), tick(),
				domain.DeliveryReceived{DeliveryID: qid, Address: ep, AddressKind: domain.AddressEndpoint, AccountID: acct, Method: "POST", Target: "/q",
					Headers: []domain.Header{{Name: "Content-Type", Value: "application/json"}}, Body: []byte(`{"q":1}`), BodySize: 7, Complete: true, Answer: &domain.ReceiptAnswer{Status: 202, Reason: domain.ReasonQueued}, Queued: true},
				domain.ForwardRequested{DeliveryID: qid, AttemptID: "qa1", EndpointID: ep, Retry: true, Queued: true},
				domain.ForwardFailed{DeliveryID: qid, AttemptID: "qa1", Status: 503, Error: "no agent connected"},
				domain.DeliveryRetryScheduled{DeliveryID: qid, AttemptID: "qa1", Failures: 1, NextAt: at.Add(time.Minute).Format(time.RFC3339Nano), Reason: "503"})
		},
		func() (uint64, error) { // its next attempt left open by a crash, the one after sent as a possible duplicate
			qid := "queued-" + n
			return w.save(ctx, domain.DeliveryStream(qid), domain.StreamExists(), tick(),
				domain.ForwardRequested{DeliveryID: qid, AttemptID: "qa2", EndpointID: ep, Retry: true, Queued: true},
				domain.ForwardFailed{DeliveryID: qid, AttemptID: "qa2", Status: 502, Error: domain.FailureRestarted},
				domain.ForwardRequested{DeliveryID: qid, AttemptID: "qa3", EndpointID: ep, Retry: true, Queued: true, PossibleDuplicate: true},
				domain.ForwardResponded{DeliveryID: qid, AttemptID: "qa3", Status: 200, DurationMs: 2},
				domain.DeliveryDelivered{DeliveryID: qid, AttemptID: "qa3", Status: 200})
		},
		func() (uint64, error) {
			return w.onEndpoint(ctx, ep, tick(), func(e *domain.Endpoint) error {
				s := proxy
				s.Name, s.ResponseCapture = "renamed "+n, false
				return e.Reconfigure("", s)
			})
		},
		func() (uint64, error) {
			return w.onAccount(ctx, acct, tick(), func(a *domain.Account) error {
				return a.IssueToken("tok-b-"+n, hashToken("secret-b-"+n), "b", time.Time{})
			})
		},
		func() (uint64, error) {
			return w.onAccount(ctx, acct, tick(), func(a *domain.Account) error { return a.RevokeToken("tok-a-" + n) })
		},
		func() (uint64, error) {
			used := tick()
			return w.save(ctx, domain.AccountStream(acct), domain.Any(), used,
				domain.TokenUsed{AccountID: acct, TokenID: "tok-b-" + n, At: used.Format(time.RFC3339Nano)})
		},
		func() (uint64, error) {
			d, err := domain.RequestDeviceCode("dev-"+n, hashToken("device-"+n), hashToken("user-"+n), "laptop "+n, "198.51.100.0/24", at.Add(10*time.Minute))
			if err != nil {
				return 0, err
			}
			if err := d.Approve(acct, at); err != nil {
				return 0, err
			}
			return w.save(ctx, domain.DeviceStream("dev-"+n), d.Expected(), tick(), d.Changes()...)
		},
		func() (uint64, error) {
			v, err := domain.CreateInvite("inv-"+n, hashToken("invite-"+n), acct, at.Add(time.Hour))
			if err != nil {
				return 0, err
			}
			if err := v.Use("acct-invited-"+n, at); err != nil {
				return 0, err
			}
			return w.save(ctx, domain.InviteStream("inv-"+n), v.Expected(), tick(), v.Changes()...)
		},
		func() (uint64, error) {
			sealed := "aes256gcm:v1:0f1e2d3c4b5a6978:c2VhbGVkIGhhc2g"
			return w.onAccount(ctx, acct, tick(), func(a *domain.Account) error {
				if err := a.SetUpOwner(domain.NewMember{ID: "mem-1-" + n, Login: "Owner-" + n, PasswordSealed: sealed},
					domain.SessionToken{ID: "ses-1-" + n, Hash: hashToken("session-" + n), ExpiresAt: at.Add(time.Hour)}); err != nil {
					return err
				}
				if err := a.InviteMember("mem-1-"+n, "minv-"+n, hashToken("join-"+n), domain.RoleMember, at, at.Add(time.Hour)); err != nil {
					return err
				}
				if err := a.Join("minv-"+n, domain.NewMember{ID: "mem-2-" + n, Login: "member-" + n, PasswordSealed: sealed},
					domain.SessionToken{ID: "ses-2-" + n, Hash: hashToken("session-2-" + n), ExpiresAt: at.Add(time.Hour)}, at); err != nil {
					return err
				}
				if err := a.ChangeRole("mem-1-"+n, "mem-2-"+n, domain.RoleOwner); err != nil {
					return err
				}
				return a.RemoveMember("mem-2-"+n, "mem-1-"+n)
			})
		},
		func() (uint64, error) {
			return w.agent(ctx, ep, domain.AgentDisconnected{EndpointID: ep, AgentID: "ag-1-" + n, Reason: "bye"}, tick())
		},
		func() (uint64, error) { return w.expireInspector(ctx, insp, at, at.Add(2*time.Hour)) },
		func() (uint64, error) { return w.newEndpoint(ctx, ep+"-x", acct, proxy, tick()) },
		func() (uint64, error) {
			return w.onEndpoint(ctx, ep+"-x", tick(), func(e *domain.Endpoint) error { return e.Delete("") })
		},
	)
	for i, step := range steps {
		if _, err := step(); err != nil {
			return fmt.Errorf("story %s step %d: %w", n, i, err)
		}
	}
	return nil
}

// stories runs n stories concurrently, as live traffic would arrive.
func (e *env) stories(n int) {
	e.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() { errs <- story(e.ctx, e.writer, fmt.Sprint(i), t0.Add(time.Duration(i)*time.Hour)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) allEvents() []domain.RecordedEvent {
	e.t.Helper()
	events, err := e.store.ReadAll(e.ctx, 0, 100000)
	if err != nil {
		e.t.Fatal(err)
	}
	return events
}

// apply applies events to v directly, as Run would.
func TestRebuildYieldsTheSameViews(t *testing.T) {
	e := newEnv(t, Options{})
	e.stories(4) // applied live by Run while they are appended
	e.sync(e.views)
	live := dump(t, e.views)
	for _, table := range viewTables {
		if len(live[table]) == 0 {
			t.Fatalf("table %s is empty: the stories do not cover it", table)
		}
	}
	// What the API gives, headers and bodies read from the log included.
	liveHistory := histories(t, e.views)
	var bodies, responses, uncaptured int
	for _, d := range liveHistory {
		if len(d.Headers) > 0 && len(d.Body) > 0 {
			bodies++
		}
		if len(d.ResponseHeaders) > 0 && len(d.ResponseBody) > 0 {
			responses++
		}
		if d.ResponseStatus != nil && d.ResponseBody == nil && len(d.Attempts) > 0 {
			uncaptured++
		}
	}
	if len(liveHistory) != 48 || bodies != 48 || responses == 0 || uncaptured == 0 {
		t.Fatalf("%d deliveries, %d with headers and body, %d with a captured response, %d with an uncaptured one: the stories do not cover them",
			len(liveHistory), bodies, responses, uncaptured)
	}

	// A queued attempt and a possible duplicate keep what they were.
	var queued, duplicates int
	for _, d := range liveHistory {
		for _, a := range d.Attempts {
			if a.Queued {
				queued++
			}
			if a.PossibleDuplicate {
				duplicates++
			}
		}
	}
	if queued != 4*3 || duplicates != 4 {
		t.Errorf("%d queued attempts, %d possible duplicates; want 12 and 4", queued, duplicates)
	}

	fresh := e.open("fresh.db", Options{})
	e.run(fresh)
	e.sync(fresh)
	compareDumps(t, "fresh views from position 0", live, dump(t, fresh))
	compareHistories(t, "fresh views from position 0", liveHistory, histories(t, fresh))

	if err := e.views.Rebuild(e.ctx); err != nil {
		t.Fatal(err)
	}
	e.sync(e.views)
	compareDumps(t, "rebuilt views", live, dump(t, e.views))
	compareHistories(t, "rebuilt views", liveHistory, histories(t, e.views))

	// Run keeps going after a rebuild.
	pos := e.do(e.receive(e.ctx, "after-rebuild", "insp-0", domain.AddressInspector, "", request("/", ""), t0))
	if d := e.delivery("after-rebuild"); d.Position != pos {
		t.Errorf("delivery after rebuild at %d, want %d", d.Position, pos)
	}
}

func TestReplayIsIdempotent(t *testing.T) {
	e := newEnv(t, Options{})
	e.stories(2)
	e.sync(e.views)
	events := e.allEvents()
	before, pos := dump(t, e.views), e.views.Position()

	// The same events again: all at or below the checkpoint, all skipped.
	// (A prefix alone would reopen agent sessions closed later, and every
	// re-applied delivery event would be announced to watchers.)
	changes, cancel := e.views.Watch("insp-0")
	defer cancel()
	applyTB(t, e.views, events)
	applyTB(t, e.views, events[:len(events)/3])
	applyTB(t, e.views, events[len(events)/2:])
	if e.views.Position() != pos {
		t.Errorf("position moved from %d to %d", pos, e.views.Position())
	}
	compareDumps(t, "after re-delivery", before, dump(t, e.views))
	next := e.do(e.receive(e.ctx, "next", "insp-0", domain.AddressInspector, "", request("/", ""), t0))
	if c := recvChange(t, changes); c.DeliveryID != "next" || c.Position != next {
		t.Errorf("first change after re-delivery = %+v, want the new delivery at %d", c, next)
	}
	before = dump(t, e.views)
	events = e.allEvents()

	// Even with the checkpoint lost, applying the log twice gives the same
	// views: the handlers themselves are idempotent.
	twice := e.open("twice.db", Options{})
	applyTB(t, twice, events)
	if _, err := twice.w.ExecContext(e.ctx, "UPDATE checkpoint SET position = 0"); err != nil {
		t.Fatal(err)
	}
	twice.setPosition(0)
	applyTB(t, twice, events)
	compareDumps(t, "applied twice", before, dump(t, twice))
	compareHistories(t, "applied twice", histories(t, e.views), histories(t, twice))
}

func TestRestartContinuesFromCheckpoint(t *testing.T) {
	e := newEnv(t, Options{})
	e.must(e.newInspector(e.ctx, "insp-1", time.Hour, t0))
	for i := range 5 {
		e.must(e.receive(e.ctx, fmt.Sprintf("old-%d", i), "insp-1", domain.AddressInspector, "", request("/", ""), t0))
	}
	e.sync(e.views)
	pos, before := e.views.Position(), dump(t, e.views)
	e.stop()
	if err := e.views.Close(); err != nil {
		t.Fatal(err)
	}

	// Events appended while the views are down are caught up on restart.
	e.must(e.receive(e.ctx, "while-down", "insp-1", domain.AddressInspector, "", request("/", ""), t0))
	v := e.open("views.db", Options{})
	if v.Position() != pos {
		t.Fatalf("reopened at %d, want checkpoint %d", v.Position(), pos)
	}
	compareDumps(t, "reopened", before, dump(t, v))
	changes, cancel := v.Watch("insp-1")
	defer cancel()
	e.run(v)
	// Only the delivery after the checkpoint is applied: re-applying the old
	// ones would announce them first.
	c := recvChange(t, changes)
	if c.DeliveryID != "while-down" || !c.New || c.Position <= pos {
		t.Errorf("first change after restart = %+v, want the new delivery after %d", c, pos)
	}
	e.sync(v)
	if p, err := v.Deliveries(e.ctx, "insp-1", 10, ""); err != nil || len(p.Items) != 6 {
		t.Errorf("history after restart: %d items, %v", len(p.Items), err)
	}
}

func TestWaitFor(t *testing.T) {
	e := newEnv(t, Options{})
	waiting := func(v *Runner, ctx context.Context, pos uint64) <-chan error {
		done := make(chan error, 1)
		go func() { done <- v.WaitFor(ctx, pos) }()
		return done
	}
	result := func(done <-chan error) error {
		t.Helper()
		select {
		case err := <-done:
			return err
		case <-time.After(waitTimeout):
			t.Fatal("WaitFor did not return")
			return nil
		}
	}

	done := waiting(e.views, e.ctx, 1)
	select {
	case err := <-done:
		t.Fatalf("WaitFor(1) returned %v before anything was appended", err)
	default:
	}
	e.must(e.newInspector(e.ctx, "insp-1", time.Hour, t0))
	if err := result(done); err != nil {
		t.Errorf("WaitFor(1) = %v after the append", err)
	}
	if _, err := e.views.Inspector(e.ctx, "insp-1"); err != nil {
		t.Errorf("read after WaitFor: %v", err)
	}
	if err := e.views.WaitFor(e.ctx, 1); err != nil {
		t.Errorf("WaitFor of an applied position = %v", err)
	}

	ctx, cancel := context.WithCancel(e.ctx)
	done = waiting(e.views, ctx, 1000)
	cancel()
	if err := result(done); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitFor after cancel = %v, want context.Canceled", err)
	}

	other := e.open("other.db", Options{})
	done = waiting(other, e.ctx, 1000)
	if err := other.Close(); err != nil {
		t.Fatal(err)
	}
	if err := result(done); !errors.Is(err, ErrClosed) {
		t.Errorf("WaitFor after Close = %v, want ErrClosed", err)
	}
}

func TestUnknownAndBrokenEventsAreSkipped(t *testing.T) {
	e := newEnv(t, Options{})
	raw := func(stream, typ, data string) {
		t.Helper()
		ev := domain.EventData{ID: uuid.NewString(), Type: typ, Data: []byte(data),
			Metadata: domain.Metadata{SchemaVersion: 1, OccurredAt: t0}}
		if _, err := e.store.Append(e.ctx, stream, domain.Any(), ev); err != nil {
			t.Fatal(err)
		}
	}
	raw("future-1", "future.thing.v9", `{"x":1}`)
	raw("delivery-bad", domain.TypeDeliveryReceived, `{"delivery_id":5}`)
	e.must(e.newInspector(e.ctx, "insp-1", time.Hour, t0))
	pos := e.do(e.receive(e.ctx, "d-1", "insp-1", domain.AddressInspector, "", request("/", ""), t0))
	if e.views.Position() != pos {
		t.Errorf("position %d, want %d", e.views.Position(), pos)
	}
	if p, err := e.views.Deliveries(e.ctx, "insp-1", 10, ""); err != nil || len(p.Items) != 1 {
		t.Errorf("history: %+v, %v", p, err)
	}
}
