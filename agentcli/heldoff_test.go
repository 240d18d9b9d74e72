package agentcli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/gqlws"
	"github.com/relayhq/relay/internal/testwait"
)

// timedObserver keeps each state event with the time it was told.
type timedObserver struct {
	discard
	mu     sync.Mutex
	states []StateEvent
	at     []time.Time
}

func (o *timedObserver) State(e StateEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.states, o.at = append(o.states, e), append(o.at, time.Now())
}

// reconnecting waits for the first Reconnecting event and returns it with
// the time it was told.
func (o *timedObserver) reconnecting(t *testing.T) (StateEvent, time.Time) {
	t.Helper()
	var ev StateEvent
	var at time.Time
	testwait.CheckFor(t, 10*time.Second, 5*time.Millisecond, func() error {
		o.mu.Lock()
		defer o.mu.Unlock()
		for i, e := range o.states {
			if e.State == Reconnecting {
				ev, at = e, o.at[i]
				return nil
			}
		}
		return fmt.Errorf("states %+v, want a reconnecting one", o.states)
	})
	return ev, at
}

// TestAgentHeldOffBySessionRefusals: a forwardRequests subscription the
// relay refuses for now, past the open sessions' cap (TOO_MANY_SESSIONS)
// or the session starts' rate (RATE_LIMITED with retryAfterSeconds), is
// told as such (HeldOff, the relay's words and what to do) and retried
// after a long wait: at least heldOffBase/2 for a cap, at least the
// relay's retryAfter for a rate, instead of the 250–500 ms after a drop.
func TestAgentHeldOffBySessionRefusals(t *testing.T) {
	tests := []struct {
		name     string
		errors   string
		minDelay time.Duration
		want     []string
	}{
		{"too many sessions",
			`[{"message":"this Endpoint has 1 agent session open, the most it may have (relay serve --max-endpoint-sessions); end one of its listeners and this one connects on its next try","extensions":{"code":"TOO_MANY_SESSIONS"}}]`,
			heldOffBase / 2, []string{"end one of its listeners", "TOO_MANY_SESSIONS", "relay endpoints show ep"}},
		{"session rate",
			`[{"message":"this account started agent sessions as fast as it may (60/min); retry in 40 s","extensions":{"code":"RATE_LIMITED","retryAfterSeconds":40}}]`,
			40 * time.Second, []string{"as fast as it may", "RATE_LIMITED"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newWSServer(t)
			obs := &timedObserver{}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- Serve(ctx, Options{Server: srv.url, Token: "t", Observer: obs, Endpoints: []Route{{EndpointID: "ep", Target: "127.0.0.1:1"}}})
			}()
			p := srv.accept(t)
			p.handshake("t", "ep")
			p.send(wsMessage{ID: subscriptionID(0), Type: gqlws.Error, Payload: json.RawMessage(tt.errors)})

			ev, at := obs.reconnecting(t)
			if !ev.HeldOff {
				t.Errorf("reconnecting %+v, want HeldOff", ev)
			}
			for _, w := range tt.want {
				if !strings.Contains(ev.Reason, w) {
					t.Errorf("reason %q, want it to say %q", ev.Reason, w)
				}
			}
			if delay := ev.NextTry.Sub(at); delay < tt.minDelay-time.Second {
				t.Errorf("next try %s after the refusal, want at least %s", delay.Round(time.Millisecond), tt.minDelay)
			}
			var text strings.Builder
			(&TextObserver{Out: &text, Status: &text}).State(ev)
			if !strings.HasPrefix(text.String(), "not connected: the relay refused this listener for now: ") || !strings.Contains(text.String(), "; trying again in ") {
				t.Errorf("printed %q, want it to say the relay refused this listener for now and when it tries again", text.String())
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
}

// TestHeldOffDelay: a cap's refusals wait from heldOffBase/2 and never
// past heldOffCap; a rate's wait at least retryAfter and at most a quarter
// more, or the ordinary backoff when that is longer.
func TestHeldOffDelay(t *testing.T) {
	a := &agent{backoffBase: 500 * time.Millisecond, backoffCap: 10 * time.Second}
	capped := &heldOffError{full: true}
	rated := &heldOffError{retryAfter: 20 * time.Second}
	for failures := range 12 {
		for range 50 {
			if d := a.heldOffDelay(capped, failures); d < heldOffBase/2 || d > heldOffCap {
				t.Fatalf("a cap's refusal after %d failures waits %s, want within [%s, %s]", failures, d, heldOffBase/2, heldOffCap)
			}
			if d := a.heldOffDelay(rated, failures); d < 20*time.Second || d > 25*time.Second {
				t.Fatalf("a rate's refusal after %d failures waits %s, want within [20s, 25s]", failures, d)
			}
		}
	}
	if d := a.heldOffDelay(capped, 10); d < heldOffCap/2 {
		t.Errorf("after 10 failures a cap's refusal waits %s, want at least %s", d, heldOffCap/2)
	}
}
