// Package logtest holds what tests of several packages measure on the
// event log.
package logtest

import (
	"context"
	"testing"

	"github.com/relayhq/relay/domain"
)

// BytesAfter sums the payload bytes of the events the log holds after
// position from: what a test's operations appended, counted, not timed.
func BytesAfter(t testing.TB, store domain.EventStore, from uint64) int64 {
	t.Helper()
	var n int64
	for {
		recs, err := store.ReadAll(context.Background(), from, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return n
		}
		for _, r := range recs {
			n += int64(len(r.Data))
			from = r.Position
		}
	}
}
