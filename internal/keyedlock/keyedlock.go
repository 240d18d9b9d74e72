// Package keyedlock is a mutex per key (a delivery's id, say), kept only
// while someone holds or waits for it, so that the map holds no more keys
// than there are holders and waiters.
package keyedlock

import (
	"context"
	"fmt"
	"sync"
)

// Locks is a set of mutexes by key. The zero value is ready.
type Locks struct {
	mu   sync.Mutex
	held map[string]*lock
}

type lock struct {
	// turn holds a token while the key is held: a channel, not a
	// sync.Mutex, so that a waiter whose context ends stops waiting.
	turn  chan struct{}
	users int // holding or waiting
}

// Lock waits for key, or for ctx to end, and returns its unlock. A waiter
// whose ctx ends gets ctx's error, holds nothing and is forgotten.
func (k *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.held == nil {
		k.held = map[string]*lock{}
	}
	l := k.held[key]
	if l == nil {
		l = &lock{turn: make(chan struct{}, 1)}
		k.held[key] = l
	}
	l.users++
	k.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		k.leave(key, l)
		return nil, fmt.Errorf("wait for the lock of %s: %w", key, ctx.Err())
	}
	return func() {
		<-l.turn
		k.leave(key, l)
	}, nil
}

// leave forgets l once no one holds or waits for it.
func (k *Locks) leave(key string, l *lock) {
	k.mu.Lock()
	if l.users--; l.users == 0 {
		delete(k.held, key)
	}
	k.mu.Unlock()
}

// Held is how many keys are held or waited for.
func (k *Locks) Held() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.held)
}
