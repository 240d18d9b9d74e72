package keyedlock

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
)

// TestLocksExcludePerKeyAndForgetKeys: holders of one key take turns,
// holders of another run beside them, and a key no one holds or waits for
// is forgotten.
func TestLocksExcludePerKeyAndForgetKeys(t *testing.T) {
	var (
		k       Locks
		wg      sync.WaitGroup
		mu      sync.Mutex
		inside  = map[string]int{}
		overlap bool
	)
	for i := range 200 {
		key := []string{"a", "b", "c"}[i%3]
		wg.Go(func() {
			unlock, err := k.Lock(context.Background(), key)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			if inside[key]++; inside[key] > 1 {
				overlap = true
			}
			mu.Unlock()
			runtime.Gosched() // another holder of key would come in here
			mu.Lock()
			inside[key]--
			mu.Unlock()
			unlock()
		})
	}
	wg.Wait()
	if overlap {
		t.Error("two holders of one key at once")
	}
	if n := k.Held(); n != 0 {
		t.Errorf("%d keys kept with no one holding them", n)
	}
	unlockA, _ := k.Lock(context.Background(), "a")
	done := make(chan struct{})
	go func() {
		unlockB, _ := k.Lock(context.Background(), "b")
		unlockB()
		close(done)
	}()
	<-done // another key is not held back by a
	unlockA()
}

// TestAWaiterWhoseContextEndsLeaves: a waiter whose context ends gets its
// error, holds nothing, and the key is forgotten once its holder is done;
// the holder's turn is unaffected and the next waiter gets the key.
func TestAWaiterWhoseContextEndsLeaves(t *testing.T) {
	var k Locks
	unlock, err := k.Lock(context.Background(), "d")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gave := make(chan error, 1)
	go func() {
		_, err := k.Lock(ctx, "d")
		gave <- err
	}()
	for k.users("d") < 2 { // the waiter is queued
		runtime.Gosched()
	}
	cancel()
	if err := <-gave; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter whose context ended: %v, want context.Canceled", err)
	}
	if n := k.users("d"); n != 1 {
		t.Fatalf("%d users of d after the waiter left, want the holder alone", n)
	}
	next := make(chan func(), 1)
	go func() {
		u, _ := k.Lock(context.Background(), "d")
		next <- u
	}()
	unlock()
	(<-next)()
	if n := k.Held(); n != 0 {
		t.Errorf("%d keys kept with no one holding them", n)
	}
}

// users is how many hold or wait for key.
func (k *Locks) users(key string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.held[key]; l != nil {
		return l.users
	}
	return 0
}
