package agentcli

import (
	"bytes"
	"context"
	"errors"
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

// TestWorkerChannelDropsLateAnswers: a worker's answer channel serves all
// its forwards, so an answer that arrives after complete gave up on it
// (timeout, cancel) must not reach the next forward's wait; and once the
// wait is over no answer is sent to it at all.
func TestWorkerChannelDropsLateAnswers(t *testing.T) {
	s := &session{dones: map[string]chan error{}}
	done := make(chan error, 1)
	for _, tc := range []struct {
		name     string
		answered bool // the answer came before the waiter gave up
	}{{"answered then forgotten", true}, {"forgotten unanswered", false}} {
		t.Run(tc.name, func(t *testing.T) {
			s.opsMu.Lock()
			s.dones["att-1"] = done
			s.opsMu.Unlock()
			if tc.answered {
				s.finishIn(s.dones, "att-1", errors.New("late"))
			}
			s.forget(s.dones, "att-1", done)
			// After forget, an answer for the same attempt finds no wait.
			s.finishIn(s.dones, "att-1", errors.New("later"))
			select {
			case err := <-done:
				t.Fatalf("the channel still holds %v for the next forward", err)
			default:
			}
			if len(s.dones) != 0 {
				t.Errorf("waits left: %v", s.dones)
			}
		})
	}
}
