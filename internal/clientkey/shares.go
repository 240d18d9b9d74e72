package clientkey

import (
	"context"
	"sync"
)

// Shares bounds what each key holds at once of a small shared pool (a few
// database connections, a few turns), the key's other takers waiting for
// one of its own to come back rather than in the pool's queue. With a
// share below the pool's size, no one key can hold every unit, so another
// key never waits behind that key's work. The zero value is ready; a key's
// entry goes when it holds and awaits nothing.
type Shares struct {
	mu   sync.Mutex
	keys map[string]*share
}

// share is one key's turns: a slot of turns per unit it holds.
type share struct {
	turns chan struct{}
	users int // takers holding a turn or waiting for one
}

// Take waits until key holds fewer than max units, then counts one more
// for it; release gives it back. It returns ctx's error if ctx ends first.
func (s *Shares) Take(ctx context.Context, key string, max int) (release func(), err error) {
	s.mu.Lock()
	if s.keys == nil {
		s.keys = map[string]*share{}
	}
	sh := s.keys[key]
	if sh == nil {
		sh = &share{turns: make(chan struct{}, max)}
		s.keys[key] = sh
	}
	sh.users++
	s.mu.Unlock()
	select {
	case sh.turns <- struct{}{}:
		return func() {
			<-sh.turns
			s.leave(key, sh)
		}, nil
	case <-ctx.Done():
		s.leave(key, sh)
		return nil, ctx.Err()
	}
}

// Waiting is how many of key's takers wait for a turn.
func (s *Shares) Waiting(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.keys[key]
	if sh == nil {
		return 0
	}
	return sh.users - len(sh.turns)
}

func (s *Shares) leave(key string, sh *share) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh.users--; sh.users == 0 {
		delete(s.keys, key)
	}
}
