package conflict

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/relayhq/relay/domain"
)

func TestRetry(t *testing.T) {
	conflictErr := fmt.Errorf("append: %w", domain.ErrWrongExpectedRevision)
	otherErr := errors.New("disk full")
	tests := []struct {
		name      string
		tries     int
		results   []error // what step returns on each try; nil after the last
		wantCalls int
		wantErr   error
	}{
		{"succeeds at once", 5, []error{nil}, 1, nil},
		{"succeeds after conflicts", 5, []error{conflictErr, conflictErr, nil}, 3, nil},
		{"other errors are not retried", 5, []error{otherErr}, 1, otherErr},
		{"a conflict then another error", 5, []error{conflictErr, otherErr}, 2, otherErr},
		{"gives up after tries", 3, []error{conflictErr, conflictErr, conflictErr, nil}, 3, domain.ErrWrongExpectedRevision},
		{"one try is one call", 1, []error{conflictErr, nil}, 1, domain.ErrWrongExpectedRevision},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []int
			err := Retry(context.Background(), tt.tries, func(try int) error {
				calls = append(calls, try)
				if len(calls) > len(tt.results) {
					return nil
				}
				return tt.results[len(calls)-1]
			})
			if len(calls) != tt.wantCalls {
				t.Fatalf("step ran %d times (%v), want %d", len(calls), calls, tt.wantCalls)
			}
			for i, try := range calls {
				if try != i+1 {
					t.Fatalf("tries numbered %v, want 1, 2, …", calls)
				}
			}
			if tt.wantErr == nil && err != nil || tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestRetryStopsWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Retry(ctx, 1000, func(int) error {
		calls++
		if calls == 3 {
			cancel()
		}
		return domain.ErrWrongExpectedRevision
	})
	if calls != 3 {
		t.Fatalf("step ran %d times after the context ended at the third, want 3", calls)
	}
	if !errors.Is(err, context.Canceled) || !errors.Is(err, domain.ErrWrongExpectedRevision) {
		t.Fatalf("err = %v, want both the conflict and the cancellation", err)
	}
}

func TestPauseGrowsToItsBound(t *testing.T) {
	want := []time.Duration{200 * time.Microsecond, 400 * time.Microsecond, 800 * time.Microsecond, 1600 * time.Microsecond}
	for i, w := range want {
		if got := Pause(i + 1); got != w {
			t.Errorf("Pause(%d) = %s, want %s", i+1, got, w)
		}
	}
	for _, try := range []int{8, 9, 20, 1000} {
		if got := Pause(try); got != 20*time.Millisecond {
			t.Errorf("Pause(%d) = %s, want the 20ms bound", try, got)
		}
	}
}
