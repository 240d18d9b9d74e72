package readmodel_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/relayhq/relay/readmodel"
)

// readers counts the reads running under a budget and the most that ran
// at once.
type readers struct {
	running, most atomic.Int64
	bytes         atomic.Int64 // bytes read
}

// read returns a read of n bytes that calls during while it runs.
func (r *readers) read(n int64, during func()) func() (int64, error) {
	return func() (int64, error) {
		now := r.running.Add(1)
		for {
			most := r.most.Load()
			if now <= most || r.most.CompareAndSwap(most, now) {
				break
			}
		}
		if during != nil {
			during()
		}
		r.running.Add(-1)
		r.bytes.Add(n)
		return n, nil
	}
}

// rendezvous is a during that returns once n reads are in it (or after a
// second, after which none waits, so that a budget that runs them one at
// a time fails the test rather than hangs it).
func rendezvous(n int) func() {
	var (
		mu      sync.Mutex
		arrived int
		all     = make(chan struct{})
	)
	return func() {
		mu.Lock()
		if arrived++; arrived == n {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(time.Second):
			mu.Lock()
			if arrived < n {
				arrived = n
				close(all)
			}
			mu.Unlock()
		}
	}
}

// TestLogBudgetReadsRunAtOnceWhileTheyFit: the reads under one budget
// whose sizes fit in it together run at once, as the reads of a page's
// deliveries do. Before, they ran one at a time: the most running at once
// was 1.
func TestLogBudgetReadsRunAtOnceWhileTheyFit(t *testing.T) {
	const n = 8
	b := readmodel.NewLogBudget(n << 10)
	var r readers
	meet := rendezvous(n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if ok, err := b.Read(t.Context(), 1<<10, r.read(1<<10, meet)); !ok || err != nil {
				t.Errorf("a read of 1 KiB under a budget of %d KiB: ran %v, %v", n, ok, err)
			}
		})
	}
	wg.Wait()
	if got := r.most.Load(); got != n {
		t.Errorf("%d reads of 1 KiB under a budget of %d KiB: at most %d ran at once, want all %d", n, n, got, n)
	}
	if b.Spent() != n<<10 {
		t.Errorf("spent %d, want %d", b.Spent(), n<<10)
	}
}

// TestLogBudgetBoundsReadsAtOnce: however many reads start at once, each
// reading up to what it reserved, the budget's reads together read at
// most its limit and the one read that crossed it, and they read it whole
// (the reads refused are refused only once it is spent).
func TestLogBudgetBoundsReadsAtOnce(t *testing.T) {
	const (
		limit = 1 << 20
		most  = 96 << 10 // the largest read
	)
	for round := range 20 {
		b := readmodel.NewLogBudget(limit)
		var (
			r       readers
			wg      sync.WaitGroup
			refused atomic.Int64
		)
		rng := rand.New(rand.NewPCG(uint64(round), 1))
		for range 200 {
			size := 1 + rng.Int64N(most)
			n := size - rng.Int64N(size/4+1) // reads up to what it reserved
			wg.Go(func() {
				ok, err := b.Read(t.Context(), size, r.read(n, func() { time.Sleep(50 * time.Microsecond) }))
				if err != nil {
					t.Error(err)
				}
				if !ok {
					if b.Spent() < limit {
						t.Errorf("a read refused with %d of %d spent", b.Spent(), limit)
					}
					refused.Add(1)
				}
			})
		}
		wg.Wait()
		if got := r.bytes.Load(); got > limit+most || got < limit {
			t.Fatalf("round %d: 200 reads of up to %d bytes read %d under a budget of %d, want [%d, %d]", round, most, got, limit, limit, limit+most)
		}
		if refused.Load() == 0 {
			t.Fatalf("round %d: no read refused", round)
		}
		if round == 0 {
			t.Logf("200 reads of up to 96 KiB read %d bytes under a budget of 1 MiB, at most %d at once; %d refused", r.bytes.Load(), r.most.Load(), refused.Load())
		}
	}
}

// TestLogBudgetReadsThatDoNotFitWaitForTheRunning: a read whose size does
// not fit beside the reads running waits for them to settle, then runs
// alone while the budget is not spent; one of unknown size (Unsized) runs
// alone; one that finds the budget spent is refused unread.
func TestLogBudgetReadsThatDoNotFitWaitForTheRunning(t *testing.T) {
	ctx := t.Context()
	b := readmodel.NewLogBudget(10)
	var r readers
	release := make(chan struct{})
	first := make(chan struct{})
	done := make(chan bool, 3)
	go func() {
		ok, _ := b.Read(ctx, 6, r.read(6, func() { close(first); <-release }))
		done <- ok
	}()
	<-first
	started := make(chan struct{}, 2)
	go func() { // 6 more do not fit beside the 6 reserved
		ok, _ := b.Read(ctx, 6, r.read(6, func() { started <- struct{}{} }))
		done <- ok
	}()
	go func() { // nor does a read of unknown size
		ok, _ := b.Read(ctx, readmodel.Unsized, r.read(1, func() { started <- struct{}{} }))
		done <- ok
	}()
	select {
	case <-started:
		t.Fatal("a read started beside one whose reservation left no room for it")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	refused := 0
	for range 3 {
		if !<-done {
			refused++
		}
	}
	if got := r.most.Load(); got != 1 {
		t.Errorf("at most %d reads ran at once, want 1", got)
	}
	// 6 read, under 10: the next runs alone, and so does the last if that
	// one read 1; past 10 (6 and 6) it is refused.
	if spent := b.Spent(); !(spent == 12 && refused == 1) && !(spent == 13 && refused == 0) {
		t.Errorf("spent %d with %d refused, want 12 and 1 (6, 6) or 13 and 0 (6, 1, 6)", spent, refused)
	}
	ran := false
	if ok, err := b.Read(ctx, 1, func() (int64, error) { ran = true; return 1, nil }); ok || ran || err != nil {
		t.Errorf("a read past the spent budget: ok %v, ran %v, %v", ok, ran, err)
	}

	// A read waiting for room gives up with its context.
	b = readmodel.NewLogBudget(10)
	release = make(chan struct{})
	inside := make(chan struct{})
	go func() { _, _ = b.Read(ctx, 8, func() (int64, error) { close(inside); <-release; return 8, nil }) }()
	<-inside
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if ok, err := b.Read(wctx, 8, func() (int64, error) { return 8, nil }); ok || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a read waiting past its context: ok %v, %v", ok, err)
	}
	close(release)
}

// TestLogBudgetUnsizedReadsRunAlone: reads of unknown size run one at a
// time, beside no other read, as every read under a budget did before.
func TestLogBudgetUnsizedReadsRunAlone(t *testing.T) {
	b := readmodel.NewLogBudget(1 << 20)
	var r readers
	var wg sync.WaitGroup
	for i := range 16 {
		size := readmodel.Unsized
		if i%2 == 0 {
			size = 1
		}
		wg.Go(func() {
			_, _ = b.Read(t.Context(), size, r.read(1, func() {
				if size == readmodel.Unsized && r.running.Load() != 1 {
					t.Errorf("a read of unknown size ran beside %d others", r.running.Load()-1)
				}
				time.Sleep(time.Millisecond)
			}))
		})
	}
	wg.Wait()
	if b.Spent() != 16 {
		t.Errorf("spent %d, want 16", b.Spent())
	}
}

// TestNilLogBudgetReadsUnbounded: the relay's own reads name no budget.
func TestNilLogBudgetReadsUnbounded(t *testing.T) {
	var b *readmodel.LogBudget
	if ok, err := b.Read(t.Context(), readmodel.Unsized, func() (int64, error) { return 1 << 40, nil }); !ok || err != nil {
		t.Errorf("nil budget: ok %v, %v", ok, err)
	}
}

// budgetRead is a read started under a budget by a test: it holds, once
// started, until the test ends it with the bytes it read.
type budgetRead struct {
	size    int64
	started chan struct{}
	end     chan int64
	cancel  context.CancelFunc
	done    chan error // Read's error; errRefused when it returned !ok
}

var errRefused = errors.New("refused")

func startRead(ctx context.Context, b *readmodel.LogBudget, size int64) *budgetRead {
	ctx, cancel := context.WithCancel(ctx)
	r := &budgetRead{size: size, started: make(chan struct{}), end: make(chan int64, 1), cancel: cancel, done: make(chan error, 1)}
	go func() {
		defer cancel()
		ok, err := b.Read(ctx, size, func() (int64, error) {
			close(r.started)
			return <-r.end, nil
		})
		if err == nil && !ok {
			err = errRefused
		}
		r.done <- err
	}()
	return r
}

// waitFor fails the test unless cond holds within a few seconds; a read
// that started where it should wait fails it at once.
func waitFor(t *testing.T, what string, cond func() bool, mustNotStart ...*budgetRead) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok := cond()
		for _, r := range mustNotStart {
			select {
			case <-r.started:
				t.Fatalf("%s: a read of %d started ahead of its turn", what, r.size)
			default:
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLogBudgetReadsStartInTheOrderTheyCame: a read that does not fit
// waits, and the reads that come after it wait behind it even when they
// would fit beside the reads running, until it starts (or gives up, or is
// refused): they cannot keep it waiting. The budget's other rules hold as
// before: a read larger than what is left starts alone once none runs,
// an Unsized one alone, and once the budget is spent the reads waiting are
// refused. Before, the later reads that fit started first: each case with
// a small read behind a waiting one failed as the small read came.
func TestLogBudgetReadsStartInTheOrderTheyCame(t *testing.T) {
	type arrival struct {
		name  string
		size  int64
		waits bool // else it starts as it comes
	}
	type step struct {
		end    string // the running read that ends now ...
		read   int64  // ... having read this many bytes
		cancel string // or the waiting read that gives up now
		start  []string
		refuse []string
	}
	for _, tc := range []struct {
		name     string
		limit    int64
		arrivals []arrival
		steps    []step
		spent    int64
	}{{
		name:     "a smaller read waits behind a larger one that does not fit",
		limit:    100,
		arrivals: []arrival{{"a", 60, false}, {"b", 60, true}, {"c", 20, true}},
		steps: []step{
			{end: "a", read: 10, start: []string{"b", "c"}},
			{end: "b", read: 60},
			{end: "c", read: 20},
		},
		spent: 90,
	}, {
		name:     "sized reads wait behind an Unsized one",
		limit:    100,
		arrivals: []arrival{{"a", 10, false}, {"u", readmodel.Unsized, true}, {"c", 10, true}},
		steps: []step{
			{end: "a", read: 10, start: []string{"u"}},
			{end: "u", read: 5, start: []string{"c"}},
			{end: "c", read: 10},
		},
		spent: 25,
	}, {
		name:     "the reads behind one larger than what is left are refused once it spends the budget",
		limit:    100,
		arrivals: []arrival{{"a", 60, false}, {"b", 60, true}, {"c", 10, true}},
		steps: []step{
			{end: "a", read: 60, start: []string{"b"}},
			{end: "b", read: 60, refuse: []string{"c"}},
		},
		spent: 120,
	}, {
		name:     "reads start at once while they fit and none waits",
		limit:    100,
		arrivals: []arrival{{"a", 40, false}, {"b", 40, false}, {"c", 40, true}},
		steps: []step{
			{end: "a", read: 40},
			{end: "b", read: 40, start: []string{"c"}},
			{end: "c", read: 40},
		},
		spent: 120,
	}, {
		name:     "the reads waiting are refused once the budget is spent",
		limit:    100,
		arrivals: []arrival{{"a", 60, false}, {"b", 60, true}, {"c", 50, true}},
		steps:    []step{{end: "a", read: 100, refuse: []string{"b", "c"}}},
		spent:    100,
	}, {
		name:     "the read at the head that gives up lets the next start",
		limit:    100,
		arrivals: []arrival{{"a", 60, false}, {"b", 60, true}, {"c", 20, true}},
		steps: []step{
			{cancel: "b", start: []string{"c"}},
			{end: "a", read: 60},
			{end: "c", read: 20},
		},
		spent: 80,
	}, {
		name:     "a read behind the head that gives up leaves the others waiting",
		limit:    100,
		arrivals: []arrival{{"a", 60, false}, {"b", 60, true}, {"u", readmodel.Unsized, true}, {"d", 10, true}},
		steps: []step{
			{cancel: "u"},
			{end: "a", read: 10, start: []string{"b", "d"}},
			{end: "b", read: 60},
			{end: "d", read: 10},
		},
		spent: 80,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			b := readmodel.NewLogBudget(tc.limit)
			reads := map[string]*budgetRead{}
			var waiting []*budgetRead // in the order they came
			for _, a := range tc.arrivals {
				r := startRead(t.Context(), b, a.size)
				reads[a.name] = r
				if !a.waits {
					waitFor(t, "read "+a.name+" starts", func() bool {
						select {
						case <-r.started:
							return true
						default:
							return false
						}
					}, waiting...)
					continue
				}
				waiting = append(waiting, r)
				n := len(waiting)
				waitFor(t, "read "+a.name+" waits", func() bool { return readmodel.LogBudgetWaiting(b) >= n }, waiting...)
			}
			for _, s := range tc.steps {
				what := "the end of " + s.end
				if s.cancel != "" {
					what = s.cancel + " giving up"
					reads[s.cancel].cancel()
					if err := <-reads[s.cancel].done; !errors.Is(err, context.Canceled) {
						t.Fatalf("%s: Read returned %v, want context.Canceled", what, err)
					}
				} else {
					reads[s.end].end <- s.read
					if err := <-reads[s.end].done; err != nil {
						t.Fatalf("%s: %v", what, err)
					}
				}
				// The reads that start or are refused are decided by the
				// time the one that ended returns from Read.
				gone := map[*budgetRead]bool{reads[s.cancel]: true, reads[s.end]: true}
				for _, name := range s.start {
					r := reads[name]
					gone[r] = true
					select {
					case <-r.started:
					case <-time.After(5 * time.Second):
						t.Fatalf("%s: read %s did not start", what, name)
					}
				}
				for _, name := range s.refuse {
					gone[reads[name]] = true
					if err := <-reads[name].done; err != errRefused {
						t.Fatalf("%s: read %s returned %v, want refused", what, name, err)
					}
				}
				waiting = slices.DeleteFunc(waiting, func(r *budgetRead) bool { return gone[r] })
				if got := readmodel.LogBudgetWaiting(b); got != len(waiting) {
					t.Fatalf("after %s: %d reads wait, want %d", what, got, len(waiting))
				}
				for _, r := range waiting {
					select {
					case <-r.started:
						t.Fatalf("after %s: a read of %d started ahead of its turn", what, r.size)
					default:
					}
				}
			}
			if got := b.Spent(); got != tc.spent {
				t.Errorf("spent %d, want %d", got, tc.spent)
			}
		})
	}
}

// TestLogBudgetReadsGivingUpLeakNothing: reads that give up while they
// wait, some just as their turn comes, leave no room reserved and no read
// counted as running: a read of unknown size, which waits for every other
// to end, still starts after them, and the budget counts the bytes of
// exactly the reads that ran.
func TestLogBudgetReadsGivingUpLeakNothing(t *testing.T) {
	for round := range 20 {
		b := readmodel.NewLogBudget(1 << 40) // never spent: a read only waits
		var (
			wg    sync.WaitGroup
			bytes atomic.Int64
		)
		rng := rand.New(rand.NewPCG(uint64(round), 2))
		for range 200 {
			size := readmodel.Unsized
			if rng.IntN(8) > 0 {
				size = 1 + rng.Int64N(1<<38)
			}
			wait := time.Duration(rng.Int64N(int64(300 * time.Microsecond)))
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(t.Context(), wait)
				defer cancel()
				_, err := b.Read(ctx, size, func() (int64, error) {
					time.Sleep(50 * time.Microsecond)
					bytes.Add(1)
					return 1, nil
				})
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if n := readmodel.LogBudgetWaiting(b); n != 0 {
			t.Fatalf("round %d: %d reads still wait after all returned", round, n)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		ok, err := b.Read(ctx, readmodel.Unsized, func() (int64, error) { bytes.Add(1); return 1, nil })
		cancel()
		if !ok || err != nil {
			t.Fatalf("round %d: a read alone after the others: ok %v, %v", round, ok, err)
		}
		if got, want := b.Spent(), bytes.Load(); got != want {
			t.Fatalf("round %d: spent %d, want the %d bytes read", round, got, want)
		}
	}
}

// TestLogBudgetReadThatPanicsGivesBackItsRoom: a read that panics ends as
// one that returned does: the read waiting for its room starts.
func TestLogBudgetReadThatPanicsGivesBackItsRoom(t *testing.T) {
	b := readmodel.NewLogBudget(100)
	inside, panicNow := make(chan struct{}), make(chan struct{})
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _ = b.Read(t.Context(), 60, func() (int64, error) {
			close(inside)
			<-panicNow
			panic("read failed")
		})
	}()
	<-inside
	next := startRead(t.Context(), b, 60)
	waitFor(t, "the second read waits", func() bool { return readmodel.LogBudgetWaiting(b) == 1 }, next)
	close(panicNow)
	if p := <-panicked; p != "read failed" {
		t.Fatalf("recovered %v", p)
	}
	select {
	case <-next.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the read waiting did not start after the running one panicked")
	}
	next.end <- 60
	if err := <-next.done; err != nil {
		t.Fatal(err)
	}
	if b.Spent() != 60 {
		t.Errorf("spent %d, want 60", b.Spent())
	}
}
