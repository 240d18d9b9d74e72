package record

import (
	"context"
	"errors"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
)

// ReconcilePrimary records, in the Endpoint's agent stream, a
// PrimaryChanged when the primary rule applied to the sessions that stream
// shows open names another session than the one last recorded, and returns
// it (false: nothing to record). It runs after every session's start and
// end, on the node that recorded it, even when ctx has ended (a session's
// end is often why). The change is appended at the stream's revision, so
// when two nodes decide at once only one records it: the other reads the
// stream again and finds nothing left to change.
//
// The stream holds every session the Endpoint ever had. The sessions it
// shows open are folded once and kept (foldedStates), so each decision
// reads only the events appended since the last one this process read;
// a process with nothing folded for the Endpoint starts from the stream's
// newest snapshot (coldListeners). A decision that finds many events since
// that snapshot appends another with whatever it records, at the same
// revision (domain.Listeners.Snapshot).
func (r *Recorder) ReconcilePrimary(ctx context.Context, endpointID string) (domain.PrimaryChanged, bool, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	stream := domain.AgentStream(endpointID)
	var change domain.PrimaryChanged
	var changed bool
	err := conflict.Retry(ctx, outcomeTries, func(int) error {
		st, err := r.foldListeners(ctx, endpointID)
		if err != nil {
			return err
		}
		change, changed = st.l.Decide(endpointID)
		var events []domain.Event
		if changed {
			events = append(events, change)
			st.l.Fold(events) // the snapshot below follows the change
		}
		snap, due := st.l.Snapshot(endpointID)
		if due {
			events = append(events, snap)
		}
		if len(events) == 0 || st.next == 0 {
			return nil
		}
		_, err = r.Record(ctx, stream, domain.Exact(st.next-1), domain.Trace{}, events...)
		if !changed && errors.Is(err, domain.ErrWrongExpectedRevision) {
			// Only a snapshot, and the stream moved on: the decision that
			// follows what moved it takes one.
			return nil
		}
		return err
	})
	if err != nil {
		return domain.PrimaryChanged{}, false, fmt.Errorf("record %s: %w", domain.TypePrimaryChanged, err)
	}
	return change, changed, nil
}

// foldListeners is the Endpoint's agent stream folded to its end: the state
// kept from an earlier decision with the events appended since, or, with
// none kept, the stream read from its newest snapshot. What a node appends
// between this read and the decision's append makes that append conflict,
// and the decision is taken again on the newer stream.
func (r *Recorder) foldListeners(ctx context.Context, endpointID string) (listenerState, error) {
	stream := domain.AgentStream(endpointID)
	st, ok := r.listeners.get(endpointID)
	if !ok {
		st, err := r.coldListeners(ctx, stream)
		if err != nil {
			return listenerState{}, err
		}
		r.listeners.put(endpointID, st)
		return st, nil
	}
	recs, events, err := domain.LoadStreamFrom(ctx, r.store, r.codec, stream, st.next)
	if err != nil {
		r.listeners.drop(endpointID)
		return listenerState{}, err
	}
	st.l.Fold(events)
	if len(recs) > 0 {
		st.next = recs[len(recs)-1].Revision + 1
		r.listeners.put(endpointID, st)
	}
	return st, nil
}

// listenerWindow is how many events coldListeners reads at a time, going
// back from a stream's end: more than domain.SnapshotAfter, so that one
// read usually holds the newest snapshot.
const listenerWindow = 2 * domain.SnapshotAfter

// coldListeners folds an agent stream from its newest snapshot: it reads
// the stream's last event, then windows of listenerWindow events going
// back from it until one holds a snapshot (or the stream's start), and
// decodes only the snapshot and what follows it. Each decision that finds
// more than domain.SnapshotAfter events (and one per open session) since
// the newest snapshot appends another, so this reads about that many
// whatever the stream's length; a stream written before snapshots existed
// is read whole once, and the decision then leaves one.
func (r *Recorder) coldListeners(ctx context.Context, stream string) (listenerState, error) {
	last, err := r.store.LastEvent(ctx, stream)
	if err != nil {
		return listenerState{}, fmt.Errorf("load %s: %w", stream, err)
	}
	// The windows read, newest first, the oldest cut at its snapshot.
	var windows [][]domain.RecordedEvent
	found := last.Type == domain.TypeListenersSnapshot
	if found {
		windows = append(windows, []domain.RecordedEvent{last})
	}
	for end := last.Revision + 1; !found && end > 0; {
		from := end - min(end, listenerWindow)
		w, err := readRange(ctx, r.store, stream, from, end)
		if err != nil {
			return listenerState{}, err
		}
		for i := len(w) - 1; i >= 0 && !found; i-- {
			if found = w[i].Type == domain.TypeListenersSnapshot; found {
				w = w[i:]
			}
		}
		windows = append(windows, w)
		end = from
	}
	l := domain.LoadListeners(nil)
	for i := len(windows) - 1; i >= 0; i-- {
		for _, rec := range windows[i] {
			e, err := r.codec.Decode(rec.Type, rec.Data)
			if err != nil {
				return listenerState{}, fmt.Errorf("load %s revision %d: %w", stream, rec.Revision, err)
			}
			l.Fold([]domain.Event{e})
		}
	}
	return listenerState{l: l, next: last.Revision + 1}, nil
}

// readRange reads the events of stream at revisions [from, end).
func readRange(ctx context.Context, store domain.EventStore, stream string, from, end uint64) ([]domain.RecordedEvent, error) {
	out := make([]domain.RecordedEvent, 0, end-from)
	for next := from; next < end; {
		batch, err := store.ReadStream(ctx, stream, next, int(end-next))
		if err != nil {
			return nil, fmt.Errorf("load %s: %w", stream, err)
		}
		if len(batch) == 0 {
			return nil, fmt.Errorf("load %s: no event at revision %d, before its last event at %d", stream, next, end-1)
		}
		out = append(out, batch...)
		next = batch[len(batch)-1].Revision + 1
	}
	return out, nil
}

// maxListenerStates bounds the Endpoints whose folded sessions a Recorder
// keeps: one entry holds an Endpoint's open sessions, a few hundred bytes.
const maxListenerStates = 10_000

// listenerState is an agent stream folded up to revision next-1 (nothing
// folded when next is 0).
type listenerState struct {
	l    *domain.Listeners
	next uint64
}

func (st listenerState) nextRevision() uint64 { return st.next }

func (st listenerState) clone() listenerState {
	return listenerState{l: st.l.Clone(), next: st.next}
}
