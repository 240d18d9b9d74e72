// Package testwait is how tests wait for something another goroutine or
// process does: they poll a check rather than sleep a guessed time.
package testwait

import (
	"testing"
	"time"
)

// CheckFor calls f every interval until it returns nil, and fails t with
// f's last error once limit has passed. f runs at once, and once more at
// the limit, so a condition that holds by then is never reported.
func CheckFor(t testing.TB, limit, interval time.Duration, f func() error) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-deadline.C:
			if err = f(); err != nil {
				t.Fatalf("still failing after %s: %v", limit, err)
			}
			return
		case <-tick.C:
		}
	}
}
