package groupcommit

import (
	"runtime"
	"testing"
	"time"
)

// batchOf is a batch of n appends.
func batchOf(n int) []int { return make([]int, n) }

// onOneProc runs the test on one P, so that goroutines it starts run only
// when it yields: whether Gather yielded is then what they sent.
func onOneProc(t *testing.T) {
	t.Helper()
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// gather is l.Gather, failing t if it has not returned in 10 s: the tests
// give Gather an hour's wait, so that only company, not the clock, ends it,
// and a Gather that kept waiting would otherwise hang the run.
func gather(t *testing.T, l *Linger[int], ch <-chan int, batch []int, max int) []int {
	t.Helper()
	got := make(chan []int, 1)
	go func() { got <- l.Gather(ch, batch, max) }()
	select {
	case b := <-got:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("Gather still waiting after 10 s")
		return nil
	}
}

// senders starts n goroutines that each append one value to ch: ready to
// run, not yet run.
func senders(ch chan<- int, n int) {
	for i := range n {
		go func() { ch <- i }()
	}
}

func TestLingerGathersWhatOthersAppendWhileInCompany(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wait  time.Duration
		prev  int // the previous commit's size
		ready int // goroutines ready to append
		batch int // what the writer took before it
		max   int
		want  int
	}{
		{"alone: no wait", time.Hour, 1, 3, 1, 256, 1},
		{"few senders: no wait", time.Hour, Company - 1, 3, 1, 256, 1},
		{"turned off", 0, 64, 3, 1, 256, 1},
		{"in company: takes what the others append", time.Hour, Company, 3, 1, 256, 4},
		{"up to twice the last commit", time.Hour, Company, 10, 1, 256, 2 * Company},
		{"never past max", time.Hour, 64, 10, 1, 5, 5},
		{"already twice the last commit", time.Hour, Company, 3, 2 * Company, 256, 2 * Company},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onOneProc(t)
			l := &Linger[int]{Wait: tc.wait}
			ch := make(chan int, 64)
			l.Gather(ch, batchOf(tc.prev), 256) // the previous commit
			senders(ch, tc.ready)
			got := gather(t, l, ch, batchOf(tc.batch), tc.max)
			if len(got) != tc.want {
				t.Fatalf("gathered %d appends, want %d", len(got), tc.want)
			}
		})
	}
}

// With nothing else ready to run, waiting would gather nothing: Gather
// returns at once, however long Wait is.
func TestLingerDoesNotWaitWhenNothingElseRuns(t *testing.T) {
	l := &Linger[int]{Wait: time.Hour}
	ch := make(chan int, 8)
	l.Gather(ch, batchOf(Company), 256)
	if got := gather(t, l, ch, batchOf(1), 256); len(got) != 1 {
		t.Fatalf("gathered %d, want 1", len(got))
	}
}

func TestLingerEndsWhenTheQueueCloses(t *testing.T) {
	onOneProc(t)
	l := &Linger[int]{Wait: time.Hour}
	ch := make(chan int, 8)
	l.Gather(ch, batchOf(Company), 256)
	go func() { ch <- 1; close(ch) }()
	if got := gather(t, l, ch, batchOf(1), 256); len(got) != 2 {
		t.Fatalf("gathered %d before the close, want 2", len(got))
	}
}
