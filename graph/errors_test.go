package graph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

// TestErrorPresenter: every domain refusal keeps its code when wrapped,
// absent things share one message, and anything else is hidden.
func TestErrorPresenter(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("retry delivery d-1: %w", err) }
	tests := []struct {
		name        string
		err         error
		code, msg   string
		field       string
		wantNoField bool
	}{
		{"unauthenticated", wrap(domain.ErrUnauthenticated), "UNAUTHENTICATED", "retry delivery d-1: unauthenticated", "", true},
		{"not found hides the id", wrap(fmt.Errorf("endpoint %q: %w", "ep-secret", domain.ErrNotFound)), "NOT_FOUND", "not found", "", true},
		{"invalid input names the field", wrap(&domain.InvalidInputError{Field: "target", Reason: "bad"}), "INVALID_INPUT", "", "target", false},
		{"retry not proxy", wrap(domain.ErrRetryNotProxy), "RETRY_NOT_PROXY", "retry delivery d-1: " + domain.ErrRetryNotProxy.Error(), "", true},
		{"agent not connected", wrap(domain.ErrAgentNotConnected), "AGENT_NOT_CONNECTED", "retry delivery d-1: " + domain.ErrAgentNotConnected.Error(), "", true},
		{"payload incomplete", wrap(domain.ErrPayloadIncomplete), "PAYLOAD_INCOMPLETE", "retry delivery d-1: " + domain.ErrPayloadIncomplete.Error(), "", true},
		{"disk reserve", wrap(domain.ErrDiskReserve), "INSUFFICIENT_STORAGE", "retry delivery d-1: " + domain.ErrDiskReserve.Error(), "", true},
		{"conflict hides the stream", wrap(&domain.WrongExpectedRevisionError{Stream: "endpoint-ep-secret", Expected: domain.Exact(3), Actual: 4, Exists: true}), "CONFLICT", "changed concurrently by another request; try again", "", true},
		{"rate limited", wrap(&RateLimitedError{RetryAfter: 5500 * time.Millisecond}), "RATE_LIMITED", "retry delivery d-1: too many requests from this address; retry in 6 s", "", true},
		{"anything else is internal", errors.New("disk on fire at /var/lib/relay"), "INTERNAL", "internal error", "", true},
	}
	present := errorPresenter(slog.New(slog.DiscardHandler))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ge := present(context.Background(), tt.err)
			if got := ge.Extensions["code"]; got != tt.code {
				t.Errorf("code = %v, want %s", got, tt.code)
			}
			if tt.msg != "" && ge.Message != tt.msg {
				t.Errorf("message = %q, want %q", ge.Message, tt.msg)
			}
			if retry, ok := ge.Extensions["retryAfterSeconds"]; ok != (tt.code == "RATE_LIMITED") || (ok && retry != 6) {
				t.Errorf("retryAfterSeconds = %v (%v)", retry, ok)
			}
			field, ok := ge.Extensions["field"]
			if tt.wantNoField == ok || (ok && field != tt.field) {
				t.Errorf("field = %v (%v), want %q", field, ok, tt.field)
			}
		})
	}
}

// TestEveryCodeInTheREADME: the README's list of refusal codes names every
// code the error presenter gives, once.
func TestEveryCodeInTheREADME(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(readme), "Refusals carry `extensions.code`:")
	if !ok {
		t.Fatal("the README has no list of refusal codes")
	}
	list, _, _ = strings.Cut(list, "\n\n")
	want := []string{"RATE_LIMITED", "TOO_MANY_SESSIONS", "INTERNAL"}
	for _, c := range codes {
		if !slices.Contains(want, c.code) {
			want = append(want, c.code)
		}
	}
	for _, code := range want {
		if n := strings.Count(list, "`"+code+"`"); n != 1 {
			t.Errorf("the README's list names `%s` %d times, want once", code, n)
		}
	}
}
