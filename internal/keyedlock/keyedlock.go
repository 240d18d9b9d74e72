// Package keyedlock is a mutex per key (a delivery's id, say), kept only
// while someone holds or waits for it, so that the map holds no more keys
// than there are holders and waiters.
package keyedlock

import "sync"

// Locks is a set of mutexes by key. The zero value is ready.
type Locks struct {
	mu   sync.Mutex
	held map[string]*lock
}

type lock struct {
	sync.Mutex
	users int // holding or waiting
}

// Lock locks key and returns its unlock.
func (k *Locks) Lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.held == nil {
		k.held = map[string]*lock{}
	}
	l := k.held[key]
	if l == nil {
		l = &lock{}
		k.held[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.held, key)
		}
		k.mu.Unlock()
	}
}

// Held is how many keys are held or waited for.
func (k *Locks) Held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.held)
}
