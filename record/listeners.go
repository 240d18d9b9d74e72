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

// coldListeners folds an agent stream from its newest snapshot
// (domain.LoadStreamTail). Each decision that finds more than
// domain.SnapshotAfter events (and one per open session) since the newest
// snapshot appends another, so this reads about that many whatever the
// stream's length; a stream written before snapshots existed is read whole
// once, and the decision then leaves one.
func (r *Recorder) coldListeners(ctx context.Context, stream string) (listenerState, error) {
	recs, events, err := domain.LoadStreamTail(ctx, r.store, r.codec, stream, domain.TypeListenersSnapshot)
	if err != nil {
		return listenerState{}, err
	}
	return listenerState{l: domain.LoadListeners(events), next: recs[len(recs)-1].Revision + 1}, nil
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
