package commands

import (
	"context"
	"sync/atomic"
)

// Writes collects the log position of what one request changed, so its
// answer can carry it (read-your-writes across nodes: a node asked to read
// after that position waits until its views have reached it).
type Writes struct{ position atomic.Uint64 }

type writesKey struct{}

// WithWrites returns a context in which the Service notes the position of
// every change it waits for the views to show.
func WithWrites(ctx context.Context) (context.Context, *Writes) {
	w := &Writes{}
	return context.WithValue(ctx, writesKey{}, w), w
}

// Position is the latest change noted; 0: none.
func (w *Writes) Position() uint64 { return w.position.Load() }

func noteWrite(ctx context.Context, position uint64) {
	w, ok := ctx.Value(writesKey{}).(*Writes)
	if !ok {
		return
	}
	for {
		old := w.position.Load()
		if position <= old || w.position.CompareAndSwap(old, position) {
			return
		}
	}
}

// ReadAfter waits, up to the configured views wait, until this node's
// views have applied position: a client that changed something through
// another node reads its change here too. Beyond the wait,
// domain.ErrUnavailable.
func (s *Service) ReadAfter(ctx context.Context, position uint64) error {
	if position == 0 {
		return nil
	}
	return s.waitForViews(ctx, position)
}
