package domain_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/relayhq/relay/domain"
)

func TestQueuePolicyBounds(t *testing.T) {
	for _, tt := range []struct {
		name  string
		p     domain.QueuePolicy
		field string // "" when valid
	}{
		{"defaults", domain.QueuePolicy{}, ""},
		{"everything set", domain.QueuePolicy{MaxInFlight: 100, RatePerSecond: 1000, Ordering: domain.OrderStrict,
			RetryOn: []string{"no-listener", "5xx", "timeout", "4xx"}, BackoffBaseMs: 100, BackoffCapMs: 86_400_000, MaxAttempts: 100, MaxAgeMs: 60_000}, ""},
		{"nothing retried", domain.QueuePolicy{RetryOn: []string{}}, ""},
		{"negative base", domain.QueuePolicy{BackoffBaseMs: -1}, "queue.backoffBase"},
		{"base too short", domain.QueuePolicy{BackoffBaseMs: 10}, "queue.backoffBase"},
		{"cap below base", domain.QueuePolicy{BackoffBaseMs: 2000, BackoffCapMs: 1000}, "queue.backoffCap"},
		{"cap below the default base", domain.QueuePolicy{BackoffCapMs: 500}, "queue.backoffCap"},
		{"cap too long", domain.QueuePolicy{BackoffCapMs: 86_400_001}, "queue.backoffCap"},
		{"attempts too many", domain.QueuePolicy{MaxAttempts: 101}, "queue.maxAttempts"},
		{"negative attempts", domain.QueuePolicy{MaxAttempts: -1}, "queue.maxAttempts"},
		{"in flight too many", domain.QueuePolicy{MaxInFlight: 101}, "queue.maxInFlight"},
		{"rate too high", domain.QueuePolicy{RatePerSecond: 1001}, "queue.ratePerSecond"},
		{"unknown ordering", domain.QueuePolicy{Ordering: "sideways"}, "queue.ordering"},
		{"unknown class", domain.QueuePolicy{RetryOn: []string{"5xx", "teapot"}}, "queue.retryOn"},
		{"age too short", domain.QueuePolicy{MaxAgeMs: 1000}, "queue.maxAge"},
		{"age too long", domain.QueuePolicy{MaxAgeMs: 31 * 86_400_000}, "queue.maxAge"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			var bad *domain.InvalidInputError
			switch {
			case tt.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.field != "" && (!errors.As(err, &bad) || bad.Field != tt.field):
				t.Fatalf("got %v, want an invalid %s", err, tt.field)
			}
		})
	}
}

func TestQueueEndpointAndOutcomeClasses(t *testing.T) {
	if _, err := domain.NewEndpoint("abcdefghijklmnop", "acc", "", domain.EndpointSettings{Name: "q", Mode: domain.ModeQueue}); err != nil {
		t.Fatalf("a QUEUE Endpoint needs no target: %v", err)
	}
	_, err := domain.NewEndpoint("abcdefghijklmnop", "acc", "", domain.EndpointSettings{Name: "q", Mode: domain.ModeQueue, Queue: &domain.QueuePolicy{MaxAttempts: 500}})
	if err == nil || !strings.Contains(err.Error(), "maxAttempts") {
		t.Fatalf("bad policy accepted: %v", err)
	}
	p := domain.DefaultQueuePolicy()
	for _, tt := range []struct {
		out    domain.ForwardOutcome
		class  string
		counts bool
	}{
		{domain.ForwardOutcome{Status: 200}, "", false},
		{domain.ForwardOutcome{Status: 302}, "", false},
		{domain.ForwardOutcome{Status: 404}, domain.Fail4xx, false},
		{domain.ForwardOutcome{Status: 500}, domain.Fail5xx, true},
		{domain.ForwardOutcome{Status: 502, Error: "connection refused"}, domain.Fail5xx, true},
		{domain.ForwardOutcome{Status: 503, Error: "no agent connected"}, domain.FailNoListener, false},
		{domain.ForwardOutcome{Status: 504, Error: "local target did not answer within 30s"}, domain.FailTimeout, true},
	} {
		class := domain.OutcomeClass(tt.out)
		if class != tt.class || p.Counts(class) != tt.counts {
			t.Errorf("%+v: class %q counted %v, want %q %v", tt.out, class, p.Counts(class), tt.class, tt.counts)
		}
	}
}
