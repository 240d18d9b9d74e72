package workers

import (
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolKeepsGoroutines: functions run one after the other reuse one
// goroutine, which keeps its state; functions run at once each get one.
func TestPoolKeepsGoroutines(t *testing.T) {
	quit := make(chan struct{})
	var made atomic.Int32
	p := New(time.Minute, quit, func() *int { made.Add(1); return new(int) })
	done := make(chan int)
	for range 5 {
		p.Go(func(n *int) { *n++; done <- *n })
		if got := <-done; got < 1 {
			t.Fatalf("state %d", got)
		}
		waitIdle(t, 1) // the goroutine waits for the next function
	}
	if n := made.Load(); n != 1 {
		t.Errorf("5 functions one after the other made %d goroutines, want 1", n)
	}
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		p.Go(func(*int) { defer wg.Done(); <-release })
	}
	close(release) // none of the three waited for another: all started
	wg.Wait()
	if n := made.Load(); n < 3 {
		t.Errorf("3 functions at once ran on %d goroutines, want 3", n)
	}
	close(quit)
	p.Wait()
}

// waitIdle waits until n goroutines of pools wait for a function.
func waitIdle(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		idle := 0
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[select") && strings.Contains(g, "workers.(*Pool[...]).work") {
				idle++
			}
		}
		if idle >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines idle, want %d", idle, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestPoolGoroutinesEnd: an idle goroutine ends after keep, and every one
// ends once quit closes; Wait waits for a function still running.
func TestPoolGoroutinesEnd(t *testing.T) {
	count := func() int {
		buf := make([]byte, 1<<20)
		return strings.Count(string(buf[:runtime.Stack(buf, true)]), "workers.(*Pool[...]).work")
	}
	quit := make(chan struct{})
	p := New(20*time.Millisecond, quit, func() struct{} { return struct{}{} })
	done := make(chan struct{})
	p.Go(func(struct{}) { close(done) })
	<-done
	deadline := time.Now().Add(10 * time.Second)
	for count() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d goroutines left after keep", n)
	}

	p = New(time.Hour, quit, func() struct{} { return struct{}{} })
	release, ended := make(chan struct{}), make(chan struct{})
	p.Go(func(struct{}) { <-release })
	close(quit)
	go func() { p.Wait(); close(ended) }()
	select {
	case <-ended:
		t.Fatal("Wait returned while a function runs")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("a goroutine did not end after quit")
	}
}
