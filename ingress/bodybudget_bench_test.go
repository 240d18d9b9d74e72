package ingress

import (
	"fmt"
	"testing"
)

// BenchmarkBodyBudgetReserve is what taking and giving back one body's
// bytes of the budget costs, with 64 clients of 16 networks already
// holding some of it: for a key (a client address with its network, as
// the queue and the copies take it with an account's key) and for a body
// a client sent to an account's Endpoint (its address, network and
// account), as ingress takes it.
func BenchmarkBodyBudgetReserve(b *testing.B) {
	for _, bb := range []struct {
		name    string
		account string
	}{
		{"key", ""},
		{"client and account", "acc-1"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			budget := newBodyBudget(DefaultProxyBodyBudget, DefaultMaxBody)
			for i := range 64 {
				budget.reserve(fmt.Sprintf("198.51.%d.%d", i%16, i), fmt.Sprintf("acc-%d", i%8), 1<<20)
			}
			b.ReportAllocs()
			for b.Loop() {
				if !budget.reserve("203.0.113.7", bb.account, 64<<10) {
					b.Fatal("refused")
				}
				budget.release("203.0.113.7", bb.account, 64<<10)
			}
		})
	}
}
