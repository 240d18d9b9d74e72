package readmodel_test

import (
	"context"
	"errors"
	"math/rand/v2"
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
