// Package groupcommit holds the wait a log's single writer makes for more
// appends before it commits, so that one fsync serves more of them.
//
// A writer that commits whatever is waiting the moment it becomes free
// shares its fsync among the appends that came during its last commit. Under
// many senders that is a few: each commit still costs its fsync, and each
// rewrites the pages it touches (the last leaf of every index, in full),
// whatever it carries. Waiting a little longer gathers more of them into one
// commit, as PostgreSQL's commit_delay and MySQL's
// binlog_group_commit_sync_delay do. A wait on a clock costs the appends
// already gathered that time even when nothing else would have run in it
// (measured: the guest inspector lost a sixth of its rate at 16 senders), so
// the writer waits only by yielding its processor: while other goroutines
// are ready to run (the requests that will append next), it lets them run
// and takes what they append; as soon as nothing else is ready it commits
// (docs/event-store.md).
package groupcommit

import (
	"runtime"
	"time"
)

// DefaultWait is how long a writer lingers at most.
const DefaultWait = 500 * time.Microsecond

// Company is how many appends the previous commit must have carried for the
// writer to linger. Fewer means few senders: there is no company to wait
// for.
const Company = 4

// idleYield is how short a yield is when nothing else was ready to run.
const idleYield = 2 * time.Microsecond

// Linger decides, before each commit, whether the writer waits for more
// appends and gathers them. Its zero value never waits; it is used by one
// goroutine (the writer).
type Linger[T any] struct {
	// Wait is the longest wait before a commit; zero or less never waits.
	Wait time.Duration

	last int // how many appends the previous commit carried
}

// Gather returns batch with what arrives on ch while the writer lingers, up
// to max in all. It lingers only when the previous batch carried Company or
// more appends, and not past Wait or twice the previous batch. It returns
// early when ch is closed (the writer's caller sees that itself).
func (l *Linger[T]) Gather(ch <-chan T, batch []T, max int) []T {
	prev := l.last
	batch = l.gather(ch, batch, min(max, 2*prev), prev)
	l.last = len(batch)
	return batch
}

func (l *Linger[T]) gather(ch <-chan T, batch []T, limit, prev int) []T {
	if l.Wait <= 0 || prev < Company || len(batch) >= limit {
		return batch
	}
	start := time.Now()
	yielded, idle := start, 0
	for len(batch) < limit {
		runtime.Gosched()
		had := len(batch)
		for more := true; more && len(batch) < limit; {
			select {
			case v, ok := <-ch:
				if !ok {
					return batch
				}
				batch = append(batch, v)
			default:
				more = false
			}
		}
		now := time.Now()
		if len(batch) > had || now.Sub(yielded) >= idleYield {
			idle = 0
		} else if idle++; idle == 2 {
			// Nothing else was ready to run, twice: waiting gathers
			// nothing. (Once may be the scheduler's turn to take the
			// writer back from the global queue before the others.)
			return batch
		}
		if now.Sub(start) >= l.Wait {
			return batch
		}
		yielded = now
	}
	return batch
}
