package clientkey

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/internal/testwait"
)

// TestSharesBoundEachKey: a key holds at most its share, its next taker
// waits (and gives up with its context) while another key takes at once;
// a key that holds nothing leaves no entry.
func TestSharesBoundEachKey(t *testing.T) {
	var s Shares
	ctx := context.Background()
	release, err := s.Take(ctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	waiting, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := s.Take(waiting, "a", 1)
		got <- err
	}()
	testwait.CheckFor(t, 10*time.Second, time.Millisecond, func() error {
		select {
		case err := <-got:
			t.Fatalf("a second taker of a share of 1 returned %v, want it to wait", err)
		default:
		}
		if n := s.Waiting("a"); n != 1 {
			return fmt.Errorf("%d of a's takers wait, want 1", n)
		}
		return nil
	})
	other, err := s.Take(ctx, "b", 1)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-got; err != context.Canceled {
		t.Fatalf("the waiting taker: %v, want context.Canceled", err)
	}
	release()
	other()
	if len(s.keys) != 0 {
		t.Fatalf("%d keys kept after every share came back", len(s.keys))
	}
}
