package record

import (
	"context"
	"fmt"
	"sync"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
)

// RecordCopy records a copy of a delivery given to another session than
// the primary (cmd.AttemptID is the copy's own attempt) with its outcome,
// in one append: the copy's ForwardRequested and its ForwardResponded or
// ForwardFailed, both marked as a copy. Nothing waits on a copy, so it is
// recorded after the primary's outcome, never in its way.
func (r *Recorder) RecordCopy(ctx context.Context, cmd domain.ForwardCommand, agentID string, out domain.ForwardOutcome) (uint64, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	stream := domain.DeliveryStream(cmd.DeliveryID)
	var ids []string // kept across tries so a repeated append stays idempotent
	var position uint64
	err := conflict.Retry(ctx, outcomeTries, func(int) error {
		recs, events, err := domain.LoadStream(ctx, r.store, r.codec, stream)
		if err != nil {
			return err
		}
		d := domain.LoadDelivery(events)
		if d.Pending(cmd.AttemptID) {
			return nil // recorded by an earlier try whose answer was lost
		}
		if err := d.RequestCopy(cmd.AttemptID, cmd.EndpointID, agentID); err != nil {
			return &InvariantError{Err: err}
		}
		if out.Failed() {
			d.RecordFailure(domain.ForwardFailed{AttemptID: cmd.AttemptID, AgentID: agentID, Status: out.Status,
				Error: storedText(out.Error), DurationMs: out.DurationMs, Copy: true})
		} else {
			headers, dropped := storedHeaders(out.Headers)
			fr := domain.ForwardResponded{AttemptID: cmd.AttemptID, AgentID: agentID, Status: out.Status, Headers: headers,
				BodySize: int64(len(out.Body)), Captured: cmd.CaptureResponse, DurationMs: out.DurationMs,
				Signature: out.Signature, Copy: true, DroppedHeaders: dropped}
			if cmd.CaptureResponse {
				fr.Body = out.Body
			}
			d.RecordResponse(fr)
		}
		causation := ""
		if len(recs) > 0 {
			causation = recs[0].ID
		}
		var res domain.AppendResult
		res, ids, err = r.appendIDs(ctx, ids, stream, d.Expected(), domain.Trace{CorrelationID: cmd.CorrelationID, CausationID: causation}, d.Changes())
		position = res.Position
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("record copy %s: %w", cmd.AttemptID, err)
	}
	return position, nil
}

// ReconcilePrimary records, in the Endpoint's agent stream, a
// PrimaryChanged when the primary rule applied to the sessions that stream
// shows open names another session than the one last recorded, and returns
// it (false: nothing to record). It runs after every session's start and
// end, on the node that recorded it, even when ctx has ended (a session's
// end is often why). The change is appended at the stream's revision, so
// when two nodes decide at once only one records it: the other reads the
// stream again and finds nothing left to change.
//
// The stream holds every session the Endpoint ever had; the sessions it
// shows open are folded once and kept (listenerStates), so each decision
// reads only the events appended since the last one this process read.
func (r *Recorder) ReconcilePrimary(ctx context.Context, endpointID string) (domain.PrimaryChanged, bool, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	stream := domain.AgentStream(endpointID)
	var change domain.PrimaryChanged
	var changed bool
	err := conflict.Retry(ctx, outcomeTries, func(int) error {
		st := r.listeners.get(endpointID)
		recs, events, err := domain.LoadStreamFrom(ctx, r.store, r.codec, stream, st.next)
		if err != nil {
			r.listeners.drop(endpointID)
			return err
		}
		st.l.Fold(events)
		if len(recs) > 0 {
			st.next = recs[len(recs)-1].Revision + 1
			r.listeners.put(endpointID, st)
		}
		change, changed = st.l.Decide(endpointID)
		if !changed || st.next == 0 {
			return nil
		}
		_, err = r.Record(ctx, stream, domain.Exact(st.next-1), domain.Trace{}, change)
		return err
	})
	if err != nil {
		return domain.PrimaryChanged{}, false, fmt.Errorf("record %s: %w", domain.TypePrimaryChanged, err)
	}
	return change, changed, nil
}

// maxListenerStates bounds the Endpoints whose folded sessions a Recorder
// keeps: one entry holds an Endpoint's open sessions, a few hundred bytes.
const maxListenerStates = 10_000

// listenerStates keeps, per Endpoint, its agent stream's sessions folded up
// to a revision, so that ReconcilePrimary reads only what follows.
type listenerStates struct {
	mu sync.Mutex
	m  map[string]listenerState
}

// listenerState is an agent stream folded up to revision next-1 (nothing
// folded when next is 0).
type listenerState struct {
	l    *domain.Listeners
	next uint64
}

// get returns a copy of the Endpoint's state to fold on, or an empty one.
func (c *listenerStates) get(endpointID string) listenerState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[endpointID]; ok {
		return listenerState{l: st.l.Clone(), next: st.next}
	}
	return listenerState{l: domain.LoadListeners(nil)}
}

// put keeps st unless a state folded further is kept already (two
// decisions for one Endpoint may run at once).
func (c *listenerStates) put(endpointID string, st listenerState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[endpointID]; ok && old.next >= st.next {
		return
	}
	if c.m == nil {
		c.m = map[string]listenerState{}
	}
	if _, ok := c.m[endpointID]; !ok && len(c.m) >= maxListenerStates {
		for id := range c.m { // any one: it is read again from the log when needed
			delete(c.m, id)
			break
		}
	}
	c.m[endpointID] = listenerState{l: st.l.Clone(), next: st.next}
}

// drop forgets the Endpoint's state (after a failed read: a stream deleted
// or unreadable is read again from its start).
func (c *listenerStates) drop(endpointID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, endpointID)
}
