package ingress

import (
	"fmt"
	"testing"

	"github.com/relayhq/relay/internal/forwarded"
)

// TestBodyBudgetShareOfAnIPv6Client: one client may hold a quarter of the
// body budget at most; an IPv6 client, which usually holds a whole /64,
// is one client over all its addresses, so bodies from eight addresses of
// one /64 leave room for another client's.
func TestBodyBudgetShareOfAnIPv6Client(t *testing.T) {
	b := newBodyBudget(DefaultProxyBodyBudget, DefaultMaxBody)
	taken := int64(0)
	for i := range 64 { // 64 bodies of 4 MiB (each within --max-body), from one /64
		key := budgetKey(forwarded.Client{Addr: fmt.Sprintf("[2001:db8:1:2::%x]:40000", i%8+1)})
		if b.Reserve(key, 4<<20) {
			taken += 4 << 20
		}
	}
	other := budgetKey(forwarded.Client{Addr: "198.51.100.7:50000"})
	if !b.Reserve(other, 1<<20) {
		t.Errorf("one /64 holds %d MiB of the %d MiB budget; another client's 1 MiB body is refused", taken>>20, int64(DefaultProxyBodyBudget)>>20)
	}
}

// TestBodyBudgetShareOfAnIPv6Network: the /64s of one /48 (65 536 client
// keys) hold at most half of the budget over all of them, so bodies from
// 64 of its /64s leave room for another network's.
func TestBodyBudgetShareOfAnIPv6Network(t *testing.T) {
	b := newBodyBudget(DefaultProxyBodyBudget, DefaultMaxBody)
	for i := range 64 { // one 4 MiB body from each of 64 /64s of 2001:db8:1::/48
		b.Reserve(budgetKey(forwarded.Client{Addr: fmt.Sprintf("[2001:db8:1:%x::1]:40000", i)}), 4<<20)
	}
	if got := b.InUse(); got > DefaultProxyBodyBudget/NetworkBodyShare {
		t.Errorf("one /48 holds %d MiB of the %d MiB budget, want at most half", got>>20, int64(DefaultProxyBodyBudget)>>20)
	}
	if other := budgetKey(forwarded.Client{Addr: "[2001:db8:2::1]:40000"}); !b.Reserve(other, 1<<20) {
		t.Error("another /48's 1 MiB body is refused")
	}
}
