package graph

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
)

// TestCompareGateHoldsHalfTheCores: comparisons run at most
// DefaultGlobalSearches at once; one more waits for a slot, and gives up
// with its request.
func TestCompareGateHoldsHalfTheCores(t *testing.T) {
	var g compareGate
	ctx := context.Background()
	var releases []func()
	for i := range DefaultGlobalSearches() {
		release, err := g.acquire(ctx, fmt.Sprintf("account:%d", i))
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, release)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := g.acquire(short, "account:other"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a comparison past the slots: %v, want it to wait until its request ends", err)
	}
	releases[0]()
	if _, err := g.acquire(ctx, "account:other"); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

// TestCompareGateSharesTheSlotsBetweenCallers: with two slots, one caller
// holding one and 50 more of its comparisons waiting, another caller's
// comparison takes the other slot at once: the 50 wait for their caller's
// own turn, not in the slots' queue. Without the caller's share they took
// the free slot and queued ahead of everyone else's.
func TestCompareGateSharesTheSlotsBetweenCallers(t *testing.T) {
	var g compareGate
	g.once.Do(func() { g.slots = make(chan struct{}, 2) })
	ctx := t.Context()
	first, err := g.acquire(ctx, "account:a")
	if err != nil {
		t.Fatal(err)
	}
	const flood = 50
	done := make(chan struct{})
	for range flood {
		go func() {
			release, err := g.acquire(ctx, "account:a")
			if err != nil {
				return
			}
			<-done
			release()
		}()
	}
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		if w := g.shares.Waiting("account:a"); w != flood || len(g.slots) != 1 {
			return fmt.Errorf("%d of the caller's comparisons wait for its share, %d slots held; want %d and 1", w, len(g.slots), flood)
		}
		return nil
	})
	other, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	release, err := g.acquire(other, "account:b")
	if err != nil {
		t.Fatalf("another caller's comparison behind one caller's %d: %v; want it to run at once", flood, err)
	}
	if w := g.shares.Waiting("account:a"); w != flood {
		t.Errorf("%d of the first caller's comparisons still wait once the other's ran, want %d", w, flood)
	}
	release()
	first()
	close(done)
}
