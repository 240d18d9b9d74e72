package sqlite

import (
	"sync"

	"github.com/relayhq/relay/domain"
)

// Limits of the tail: enough for a live subscriber a few commits behind the
// writer under full load, small enough not to matter to the process's memory.
// The tail keeps at least this much and, between trims, up to twice as much:
// trimming only once the limit is doubled copies each event at most once.
// tailMaxBytes counts an event's payload as much again as its data
// (eventSize), so it holds as many events as 1 MiB did before payloads.
const (
	tailMaxEvents = 256
	tailMaxBytes  = 2 << 20
)

// tail holds the most recently committed events in memory, in position
// order and without gaps, so a live subscription (the projections, usually
// one commit behind the writer) gets them without reading back from the
// database what the writer has just written. Anything older is read from
// the database as before.
type tail struct {
	mu     sync.RWMutex
	events []domain.RecordedEvent // contiguous positions, oldest first
	bytes  int                    // eventSize of events
}

// add appends a committed batch. The writer calls it in commit order; a batch
// that does not follow the last position held (which the single writer never
// produces) replaces the tail rather than leave a gap in it.
func (t *tail) add(evs []domain.RecordedEvent) {
	if len(evs) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n := len(t.events); n > 0 && t.events[n-1].Position+1 != evs[0].Position {
		t.events, t.bytes = nil, 0
	}
	t.events = append(t.events, evs...)
	for _, e := range evs {
		t.bytes += eventSize(e)
	}
	if len(t.events) <= 2*tailMaxEvents && t.bytes <= 2*tailMaxBytes {
		return
	}
	drop := 0
	for len(t.events)-drop > tailMaxEvents || (t.bytes > tailMaxBytes && len(t.events)-drop > 1) {
		t.bytes -= eventSize(t.events[drop])
		drop++
	}
	// Copy what is kept so the dropped events' memory is released.
	t.events = append(make([]domain.RecordedEvent, 0, 2*tailMaxEvents), t.events[drop:]...)
}

// after returns up to max events with positions greater than pos, when the
// tail holds the one right after pos; ok is false when it does not (pos is
// older than the tail, or nothing newer is held).
func (t *tail) after(pos uint64, max int) (evs []domain.RecordedEvent, ok bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.events) == 0 {
		return nil, false
	}
	first := t.events[0].Position
	last := t.events[len(t.events)-1].Position
	if pos+1 < first || pos >= last {
		return nil, false
	}
	i := int(pos + 1 - first)
	j := min(len(t.events), i+max)
	return append([]domain.RecordedEvent(nil), t.events[i:j]...), true
}

// eventSize is what an event holds in memory, roughly. Its payload
// (domain.EventData.Payload: a body as bytes, the same body in base64 in
// Data) is counted as Data again.
func eventSize(e domain.RecordedEvent) int {
	n := len(e.Data) + len(e.ID) + len(e.Type) + len(e.Stream) + 64
	if e.Payload != nil {
		n += len(e.Data)
	}
	return n
}

// reset forgets every event held, after a commit deleted some of them.
func (t *tail) reset() {
	t.mu.Lock()
	t.events, t.bytes = nil, 0
	t.mu.Unlock()
}
