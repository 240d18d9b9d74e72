package groupcommit

import (
	"testing"
	"time"
)

// batchOf is a batch of n appends, numbered from first.
func batchOf(first, n int) []int {
	b := make([]int, n)
	for i := range b {
		b[i] = first + i
	}
	return b
}

// commit runs one Gather of a batch of n and returns its size. Waits that
// would never end (time.Hour) fail the test by its timeout, not by a clock.
func commit(t *testing.T, l *Linger[int], ch chan int, n int) int {
	t.Helper()
	return len(l.Gather(ch, batchOf(0, n), 256))
}

func TestLingerWaitsOnlyInCompany(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wait     time.Duration
		prev     int // the previous commit's size
		queued   int // appends that arrive during the wait
		batch    int // what the writer took before it
		want     int
		max      int
		skipNext bool
	}{
		{"alone: no wait", time.Hour, 1, 0, 1, 1, 256, false},
		{"few senders: no wait", time.Hour, Company - 1, 0, 1, 1, 256, false},
		{"turned off", 0, 64, 0, 1, 1, 256, false},
		{"in company: gathers up to twice the last commit", time.Hour, Company, 10, 1, 2 * Company, 256, false},
		{"never past max", time.Hour, 64, 10, 1, 5, 5, false},
		{"already twice the last commit", time.Hour, Company, 3, 2 * Company, 2 * Company, 256, false},
		{"nothing came: backs off", time.Millisecond, Company, 0, 1, 1, 256, true},
		{"something came: keeps waiting", time.Millisecond, Company, 1, 1, 2, 256, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &Linger[int]{Wait: tc.wait}
			ch := make(chan int, 64)
			l.Gather(ch, batchOf(0, tc.prev), 256) // the previous commit (nothing queued yet)
			for i := range tc.queued {
				ch <- 100 + i
			}
			got := l.Gather(ch, batchOf(0, tc.batch), tc.max)
			if len(got) != tc.want {
				t.Fatalf("gathered %d appends, want %d", len(got), tc.want)
			}
			if (l.skip > 0) != tc.skipNext {
				t.Fatalf("backing off for %d commits, want backing off %v", l.skip, tc.skipNext)
			}
		})
	}
}

func TestLingerBacksOffAfterAWaitForNothing(t *testing.T) {
	l := &Linger[int]{Wait: time.Millisecond}
	ch := make(chan int, 64)
	commit(t, l, ch, Company) // company
	if got := commit(t, l, ch, Company); got != Company {
		t.Fatalf("gathered %d, want %d: nothing was sent", got, Company)
	}
	// Every sender may already be in the batch: the next Backoff commits
	// do not wait, however long Wait is.
	l.Wait = time.Hour
	for i := range Backoff {
		if got := commit(t, l, ch, Company); got != Company {
			t.Fatalf("commit %d after the empty wait gathered %d, want %d", i, got, Company)
		}
	}
	// Then it waits again, and gathers what comes.
	for i := range Company {
		ch <- i
	}
	if got := commit(t, l, ch, Company); got != 2*Company {
		t.Fatalf("after backing off gathered %d, want %d", got, 2*Company)
	}
}

func TestLingerEndsWhenTheQueueCloses(t *testing.T) {
	l := &Linger[int]{Wait: time.Hour}
	ch := make(chan int, 8)
	commit(t, l, ch, Company)
	ch <- 1
	close(ch)
	if got := commit(t, l, ch, 1); got != 2 {
		t.Fatalf("gathered %d before the close, want 2", got)
	}
}
