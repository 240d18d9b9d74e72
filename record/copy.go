package record

import (
	"context"
	"fmt"

	"github.com/relayhq/relay/domain"
	"github.com/relayhq/relay/internal/conflict"
)

// RecordCopy records a copy of a delivery given to another session than
// the primary (cmd.AttemptID is the copy's own attempt) with its outcome,
// in one append: the copy's ForwardRequested and its ForwardResponded or
// ForwardFailed, both marked as a copy. Nothing waits on a copy, so it is
// recorded after the primary's outcome, never in its way. Its answer
// keeps its body only while the account may store more (withinQuota).
//
// A delivery holds its copies and their answers, as many as its listeners
// times its attempts: the copy reads the request and the events appended
// since the state it folded last, answers without their bodies
// (foldDelivery), as a retry does, never the whole stream.
func (r *Recorder) RecordCopy(ctx context.Context, cmd domain.ForwardCommand, agentID string, out domain.ForwardOutcome) (uint64, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	stream := domain.DeliveryStream(cmd.DeliveryID)
	var answer domain.ForwardResponded
	if !out.Failed() {
		answer = responded(cmd, out, nil)
		answer.AgentID, answer.Copy = agentID, true
		answer = r.withinQuota(ctx, cmd, answer)
	}
	var ids []string // kept across tries so a repeated append stays idempotent
	var position uint64
	err := conflict.Retry(ctx, outcomeTries, func(int) error {
		first, _, st, err := r.foldDelivery(ctx, cmd.DeliveryID)
		if err != nil {
			return err
		}
		d := st.d
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
			d.RecordResponse(answer)
		}
		var res domain.AppendResult
		res, ids, err = r.appendIDs(ctx, ids, stream, d.Expected(), domain.Trace{CorrelationID: cmd.CorrelationID, CausationID: first.ID}, d.Changes())
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
// shows open are folded once and kept (foldedStates), so each decision
// reads only the events appended since the last one this process read.
func (r *Recorder) ReconcilePrimary(ctx context.Context, endpointID string) (domain.PrimaryChanged, bool, error) {
	ctx, cancel := detached(ctx)
	defer cancel()
	stream := domain.AgentStream(endpointID)
	var change domain.PrimaryChanged
	var changed bool
	err := conflict.Retry(ctx, outcomeTries, func(int) error {
		st, ok := r.listeners.get(endpointID)
		if !ok {
			st = listenerState{l: domain.LoadListeners(nil)}
		}
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
