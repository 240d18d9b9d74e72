package ingress

import (
	"fmt"
	"testing"
)

// TestQuotaRefusalsStayBounded: a flood of refused accounts never grows the
// per-account counts past maxLimitedAccounts; the totals still count all.
func TestQuotaRefusalsStayBounded(t *testing.T) {
	var q quotaRefusals
	const n = maxLimitedAccounts + 500
	for i := range n {
		q.add(fmt.Sprint("acc-", i), RefusedStorage)
	}
	q.add("acc-0", RefusedRate)
	if len(q.counts) != maxLimitedAccounts {
		t.Fatalf("counts hold %d accounts, bound is %d", len(q.counts), maxLimitedAccounts)
	}
	if q.totals[RefusedStorage] != n || q.totals[RefusedRate] != 1 {
		t.Fatalf("totals %v, want %d storage and 1 rate", q.totals, n)
	}
	if c := q.counts["acc-0"]; c[RefusedStorage] != 1 || c[RefusedRate] != 1 {
		t.Fatalf("acc-0 counts %v", c)
	}
}
