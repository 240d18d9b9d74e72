package domain_test

import (
	"errors"
	"testing"

	"github.com/relayhq/relay/domain"
)

// TestAccountSetQuota: given an account, when the operator sets a quota,
// then one event (none for the quota it has), and bad input raises nothing.
func TestAccountSetQuota(t *testing.T) {
	acc := func(t *testing.T, history ...domain.Event) *domain.Account {
		t.Helper()
		return domain.LoadAccount(append([]domain.Event{domain.AccountCreated{AccountID: "acc-1", Name: "A"}}, history...))
	}
	set := domain.AccountQuotaSet{AccountID: "acc-1", StorageBytes: 5 << 30, Rate: "100/s,burst=100"}
	for _, tc := range []struct {
		name    string
		given   []domain.Event
		storage int64
		rate    string
		apiCost string
		want    int
		wantErr error
	}{
		{name: "first quota", storage: 5 << 30, rate: "100/s,burst=100", want: 1},
		{name: "the same again", given: []domain.Event{set}, storage: 5 << 30, rate: "100/s,burst=100", want: 0},
		{name: "back to the defaults", given: []domain.Event{set}, storage: domain.QuotaDefault, want: 1},
		{name: "unlimited", storage: 0, rate: "off", want: 1},
		{name: "an API cost budget", given: []domain.Event{set}, storage: 5 << 30, rate: "100/s,burst=100", apiCost: "600000/min,burst=600000", want: 1},
		{name: "API cost off", storage: domain.QuotaDefault, apiCost: "off", want: 1},
		{name: "negative", storage: -2, wantErr: domain.ErrInvalidInput},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := acc(t, tc.given...)
			err := a.SetQuota(tc.storage, tc.rate, tc.apiCost)
			if !errors.Is(err, tc.wantErr) || len(a.Changes()) != tc.want {
				t.Fatalf("SetQuota = %v with %d events, want %v with %d", err, len(a.Changes()), tc.wantErr, tc.want)
			}
			if tc.want == 1 {
				if q, ok := a.Quota(); !ok || q.StorageBytes != tc.storage || q.Rate != tc.rate || q.APICost != tc.apiCost {
					t.Fatalf("quota after SetQuota: %+v %v", q, ok)
				}
			}
		})
	}
	if err := domain.LoadAccount(nil).SetQuota(1, "", ""); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("quota of an account that does not exist: %v", err)
	}
}
