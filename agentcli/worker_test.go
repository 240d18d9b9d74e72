package agentcli

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
)

// goroutineID is the id runtime.Stack prints for the calling goroutine.
func goroutineID() string {
	b := make([]byte, 64)
	b = b[:runtime.Stack(b, false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	return string(b[:bytes.IndexByte(b, ' ')])
}

// TestSessionRunReusesWorkers: forwards one after another run on the same
// worker goroutine; forwards at the same time each start at once, none
// waiting for a busy worker; the workers end with the session.
func TestSessionRunReusesWorkers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	s := &session{idle: make(chan func(*worker))}

	ids := map[string]bool{}
	for range 50 {
		done := make(chan string)
		s.run(ctx, &wg, func(*worker) { done <- goroutineID() })
		ids[<-done] = true
		time.Sleep(time.Millisecond) // the worker is back waiting
	}
	if len(ids) > 5 {
		t.Errorf("50 forwards one after another ran on %d goroutines", len(ids))
	}

	const n = 8
	started := make(chan struct{}, n)
	release := make(chan struct{})
	for range n {
		s.run(ctx, &wg, func(*worker) {
			started <- struct{}{}
			<-release
		})
	}
	for i := range n {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d forwards at the same time started", i, n)
		}
	}
	close(release)

	cancel()
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("workers outlived the session")
	}
}
