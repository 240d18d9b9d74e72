// Package workers runs functions on goroutines it keeps between them. A
// new goroutine grows its stack to the depth of what it runs by copying
// it, several times for a deep call (a forward through the tunnel, a local
// HTTP exchange); a kept goroutine has that stack already, and is handed
// the next function through a channel.
package workers

import (
	"sync"
	"time"
)

// Pool runs functions on kept goroutines, each with a state of its own (S)
// that it passes to every function it runs. A function never waits for a
// busy goroutine: with none idle, a new one starts. A goroutine idle for
// longer than the pool's keep, or once quit closes, ends.
type Pool[S any] struct {
	idle     chan func(S) // unbuffered: a send succeeds only when a goroutine waits
	keep     time.Duration
	quit     <-chan struct{}
	newState func() S
	running  sync.WaitGroup
}

// New returns a pool whose goroutines wait keep for their next function,
// end once quit closes, and start with the state newState returns.
func New[S any](keep time.Duration, quit <-chan struct{}, newState func() S) *Pool[S] {
	return &Pool[S]{idle: make(chan func(S)), keep: keep, quit: quit, newState: newState}
}

// Go runs f on an idle goroutine of the pool, or on a new one.
func (p *Pool[S]) Go(f func(S)) {
	select {
	case p.idle <- f:
		return
	default:
	}
	p.running.Add(1)
	// f is the goroutine's argument, not captured: a captured f would
	// live on the heap for every function, also those handed to an idle
	// goroutine.
	go p.work(f)
}

// Wait returns once every goroutine of the pool has ended: after quit
// closed, once the functions they run return.
func (p *Pool[S]) Wait() { p.running.Wait() }

func (p *Pool[S]) work(f func(S)) {
	defer p.running.Done()
	state := p.newState()
	idle := time.NewTimer(p.keep)
	defer idle.Stop()
	for {
		f(state)
		idle.Reset(p.keep)
		select {
		case f = <-p.idle:
		case <-idle.C:
			return
		case <-p.quit:
			return
		}
	}
}
