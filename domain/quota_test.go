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

// TestSharedStorageRefusals: the budgets shared by client networks (the
// guests', the sign-ups') refuse through one rule and one error, with the
// words clients and tests read, word for word; only the guests' count in
// the guests' refusal metrics.
func TestSharedStorageRefusals(t *testing.T) {
	guests, signups := domain.GuestStorage{Total: 1600}, domain.SignupStorage{Total: 1600}
	for _, tc := range []struct {
		name                    string
		check                   func(total, ofNetwork int64, network string) error
		total, ofNetwork        int64
		network                 string
		want                    string // "" for room
		wantBudget, wantNetwork int64
	}{
		{name: "guests with room", check: guests.Check, total: 1599, ofNetwork: 99, network: "192.0.2.0/24"},
		{name: "guests no bound", check: domain.GuestStorage{}.Check, total: 1 << 40, ofNetwork: 1 << 40, network: "192.0.2.0/24"},
		{name: "guests whole", check: guests.Check, total: 1600, network: "192.0.2.0/24", wantBudget: 1,
			want: "this relay's storage for guest inspectors (1600 bytes) is used up: nothing more is recorded for guests until their deliveries expire; an account's Endpoints are not affected"},
		{name: "guests network", check: guests.Check, total: 100, ofNetwork: 100, network: "192.0.2.0/24", wantNetwork: 1,
			want: "the guest inspectors created from your network (192.0.2.0/24) hold their share of this relay's storage for guests (100 bytes of 1600): nothing more is recorded for them until their deliveries expire; an account's Endpoints are not affected"},
		{name: "guests no network", check: guests.Check, total: 100, ofNetwork: 100},
		{name: "sign-ups with room", check: signups.Check, total: 1599, ofNetwork: 99, network: "192.0.2.0/24"},
		{name: "sign-ups whole", check: signups.Check, total: 1600, network: "192.0.2.0/24",
			want: "this relay's storage for accounts made by open sign-up (1600 bytes) is used up: no account is signed up and nothing more is recorded for them until their deliveries are deleted or expire, or the relay's operator gives an account a storage quota of its own (relay accounts set-quota --storage)"},
		{name: "sign-ups network", check: signups.Check, total: 100, ofNetwork: 100, network: "2001:db8::/48",
			want: "the accounts signed up from your network (2001:db8::/48) hold their share of this relay's storage for open sign-ups (100 bytes of 1600): no account is signed up from it and nothing more is recorded for them until their deliveries are deleted or expire, or the relay's operator gives an account a storage quota of its own (relay accounts set-quota --storage)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(tc.total, tc.ofNetwork, tc.network)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check = %v, want room", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Fatalf("Check = %v\nwant %s", err, tc.want)
			case tc.want != "" && !errors.Is(err, domain.ErrStorageQuota):
				t.Fatalf("Check = %v, not ErrStorageQuota (QUOTA_EXCEEDED)", err)
			}
			var r domain.GuestRefusals
			r.Count(err)
			if got := r.Counts(); got[domain.GuestRefusedBudget] != tc.wantBudget || got[domain.GuestRefusedNetwork] != tc.wantNetwork {
				t.Errorf("guest refusals %v, want %s %d, %s %d", got, domain.GuestRefusedBudget, tc.wantBudget, domain.GuestRefusedNetwork, tc.wantNetwork)
			}
		})
	}
}
