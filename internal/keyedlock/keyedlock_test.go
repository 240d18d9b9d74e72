package keyedlock

import (
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
			unlock := k.Lock(key)
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
	unlockA := k.Lock("a")
	done := make(chan struct{})
	go func() { k.Lock("b")(); close(done) }()
	<-done // another key is not held back by a
	unlockA()
}
