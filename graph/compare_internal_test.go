package graph

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCompareGateHoldsHalfTheCores: comparisons run at most
// DefaultGlobalSearches at once; one more waits for a slot, and gives up
// with its request.
func TestCompareGateHoldsHalfTheCores(t *testing.T) {
	var g compareGate
	ctx := context.Background()
	for range DefaultGlobalSearches() {
		if err := g.acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if err := g.acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a comparison past the slots: %v, want it to wait until its request ends", err)
	}
	g.release()
	if err := g.acquire(ctx); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}
